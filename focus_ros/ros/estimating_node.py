"""What the three estimating nodes (angular velocity, optical flow, depth) share around
their estimator: the runner's two parameters (:class:`RunnerSettings`, declared by
:class:`EstimatingNode` itself), /diagnostics, and stopping.

A node derived from :class:`EstimatingNode` creates ``self._input`` (its
:class:`~focus_ros.ros.event_input.EventInput`) and ``self._runner`` (its
:class:`~focus_ros.runtime.EstimatorRunner`, built with
:func:`EstimatingNode.runner_options`), starts its once-a-second report with
:meth:`EstimatingNode.start_diagnostics` and reports through
:meth:`EstimatingNode.publish_diagnostics`.

Timers that must run whatever the ROS clock does are on the steady clock
(:meth:`EstimatingNode.create_steady_timer`): with ``use_sim_time`` true and nothing on
``/clock`` (a bag played without ``--clock``, a live driver) a timer on the node's clock never
fires, and /diagnostics would stay silent.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from diagnostic_msgs.msg import DiagnosticArray
from rclpy.clock import Clock, ClockType

from focus_ros.ros import messages
from focus_ros.ros.parameters import FocusNode, declare_settings
from focus_ros.settings import setting

@dataclass(frozen=True)
class RunnerSettings:
    """How every estimating node runs its estimator (:class:`~focus_ros.runtime.EstimatorRunner`)."""

    estimator_process: bool = setting(True, "run the estimator in a process of its own, fed through shared memory "
                                      "(its time then does not depend on the node's other threads), or in a thread "
                                      "of the node (false)", read_only=True)
    estimator_cpus: str = setting("", "CPUs the estimator process runs on, in taskset's list syntax ('1', '0,2', "
                                  "'2-3'); empty = wherever the OS puts it (BENCHMARKS.md measured no consistent "
                                  "difference on a 2-core machine)", read_only=True)


@dataclass(frozen=True)
class WindowNodeSettings:
    """The parameters of a node that estimates per window (angular velocity, optical flow): how
    it queues windows for its estimator, how often it draws pictures, its output frame."""

    queue_policy: str = setting("newest", "when windows complete faster than they are processed: newest (skip to the "
                                "newest window, live use) or all (process every window in order, for bag "
                                "evaluation)", choices=("newest", "all"))
    max_pending_windows: int = setting(100, "queue_policy all, and the windows of events held before the node could "
                                       "use them: bound on queued windows; beyond it the oldest are dropped",
                                       unit="windows", minimum=1, maximum=100000)
    image_rate_hz: float = setting(5.0, "pictures per second at most (only while subscribed); 0 = never",
                                   unit="Hz", minimum=0.0, maximum=1000.0)
    frame_id: str = setting("", "output frame; empty = the frame of the events")


class EstimatingNode(FocusNode):
    """A focus_ros node that runs an estimator on its events (see the module docstring)."""

    def __init__(self, name: str, **kwargs):
        super().__init__(name, **kwargs)
        declare_settings(self, RunnerSettings)
        self._diagnostics_publisher = self.create_publisher(DiagnosticArray, "/diagnostics", 10)
        self._first_output_said = False

    def say_first_output(self, what: str, stamp_ns: int) -> None:
        """Say once, at the moment, that the node published its first ``what`` (of the events at
        ``stamp_ns``, ns): after a start, when it was ready and from which events, read from the
        node's own log (benchmarks/bench_first_output.py), not from when a subscriber happened to
        discover the topic."""
        if not self._first_output_said:
            self._first_output_said = True
            self.get_logger().info(f"first {what} published (stamp {stamp_ns} ns)")

    def runner_options(self) -> dict:
        """The :class:`~focus_ros.runtime.EstimatorRunner` options the runner's
        parameters set (``in_process``, ``cpus``)."""
        return dict(in_process=self.get_parameter("estimator_process").value,
                    cpus=self.get_parameter("estimator_cpus").value)

    def window_queue_options(self) -> dict:
        """The :class:`~focus_ros.runtime.EstimatorRunner` options of the queue policy
        (:class:`WindowNodeSettings`, declared by the node): ``newest`` keeps one waiting window
        and lets the worker skip to the newest; ``all`` keeps up to ``max_pending_windows``, every
        one estimated. Windows cut from held events are estimated in order either way (the
        runner's ``push(job, held=True)``). Read by the runner with its lock held: no lock taken."""
        live = lambda: self.get_parameter("queue_policy").value == "newest"  # noqa: E731
        return dict(max_pending=lambda: 1 if live() else self.get_parameter("max_pending_windows").value,
                    skippable=live)

    def create_steady_timer(self, period_s: float, callback: Callable[[], None]):
        """A timer every ``period_s`` (s) of the steady clock: it fires with ``use_sim_time`` and no
        ``/clock`` too (a timer on the node's own clock would wait for simulated time that never comes)."""
        return self.create_timer(period_s, callback, clock=Clock(clock_type=ClockType.STEADY_TIME))

    def start_diagnostics(self, callback: Callable[[], None], period_s: float = 1.0):
        """Call ``callback`` (the node's /diagnostics report) every ``period_s`` (s) of the steady clock."""
        return self.create_steady_timer(period_s, callback)

    def health(self) -> tuple[str, str] | None:
        """The problem that sets the /diagnostics level, or None: the estimator's (its process cannot
        run, most windows dropped: :meth:`~focus_ros.runtime.EstimatorRunner.health`) first, then
        what keeps events from arriving (a topic type or QoS that cannot match, a refused
        camera_info: :meth:`~focus_ros.ros.event_input.EventInput.problem`)."""
        return self._runner.health() or self._input.problem()

    def publish_diagnostics(self, status, values: dict) -> None:
        """One /diagnostics message: ``status`` (from :func:`messages.estimator_status`) with ``values``."""
        self._diagnostics_publisher.publish(messages.diagnostic_array(status, values, self.get_clock().now().to_msg()))

    def stop(self) -> None:
        """Stop taking events, then stop the estimator (its process, if it has one)."""
        self._input.close()
        self._runner.stop()
