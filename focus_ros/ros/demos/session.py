"""What both demos share: a ROS domain of their own on loopback, a node started as ``ros2 run``
starts it, and, in this process, a collector node and a bag replayer on one executor
(:func:`node_and_replayer`, yielding a :class:`DemoSession`).

The demo waits on conditions, never on fixed sleeps (issue 30: a fixed 30-s wait for the clouds
and a 10-s ``process.wait`` were too short for a node compiling its kernels and too long for
one that was ready):

1. **the estimator running**: the node's ``/diagnostics`` carry ``estimator_state`` (``starting``,
   ``compiling``, ``running``, ``restarting``, ``stopped``); the demo replays only once it says
   ``running``. While it says ``compiling`` (a first start after an install, or a Numba cache the
   node cannot use) the demo says so once and waits, up to :data:`READY_TIMEOUT_S`.
2. **the subscriptions matched**: every publisher of the replayer on a topic the node reads has
   it as subscriber, and every subscription of the demo (the node's outputs, the replayer's
   pace topic) has it as publisher (:data:`MATCH_TIMEOUT_S`). Otherwise the first messages of
   the bag, camera_info among them, can go to nobody.
3. **the last results flushed**: each part waits until the node's /diagnostics say it has
   every event and nothing left to do (:meth:`DemoSession.settled`; the rotation part for its
   last window, the depth part for its last keyframe and map), through
   :meth:`DemoSession.spin_until`, bounded, with a message that says what was missing.

Failing says why in one line: every wait raises :class:`DemoFailure` (its text is that line)
when its deadline passes or when the node exits under it, with the node's last log line. The
node is always stopped at the end, whatever happened (:class:`~.processes.NodeProcess`:
SIGINT, SIGTERM, SIGKILL, then anything of its own left), and when that took SIGKILL or left
processes to kill, the demo fails and says so in the same one line.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path
from typing import Callable

from focus_ros.ros.demos.processes import NodeProcess

#: the repository's parameter files (config/), as a source checkout holds them
CONFIG_FOLDER = Path(__file__).resolve().parents[3] / "config"
#: the longest wait for a node's estimator to run (s): a first start after an install compiles
#: Numba kernels (15 s for depth_node on this project's 2-core test machine, minutes on a slow
#: robot computer); beyond it the node is taken as stuck
READY_TIMEOUT_S = 300.0
#: the longest wait (s), once the estimator runs, for the node and the demo to see each other's
#: topics (discovery on loopback takes well under a second)
MATCH_TIMEOUT_S = 30.0
#: how often (s) the waits look at their condition (and the executor delivers messages)
SPIN_STEP_S = 0.05

#: the log files of the nodes started in this process, in order (the one-line report of a part
#: that failed names the log of the node it started, if any)
started_node_logs: list[Path] = []


class DemoFailure(Exception):
    """Why a demo part cannot go on: ``str(failure)`` is the one line the demo prints after
    ``demo failed:``; ``node_log``: the log of the node concerned, when there is one."""

    def __init__(self, reason: str, node_log: Path | None = None):
        super().__init__(" ".join(str(reason).split()))
        self.node_log = node_log


class DemoInterrupted(DemoFailure):
    """Ctrl-C (or SIGTERM) reached the demo; the node was stopped. ``str()``: what stopping it took,
    when it did not go as it should ('' otherwise)."""


def describe_exception(error: BaseException) -> str:
    """An unexpected exception as one line: 'TypeName: message' (the message's whitespace folded)."""
    text = " ".join(str(error).split())
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def ros_environment() -> dict:
    """This process's environment for ROS 2 on loopback, in a domain of the demo's own (unless
    ``ROS_DOMAIN_ID`` is set: a test's, or the user's choice); the nodes it starts get the same,
    unbuffered, so that their log is written as they go."""
    environment = dict(os.environ)
    environment.setdefault("ROS_DOMAIN_ID", str(60 + os.getpid() % 40))
    environment.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    os.environ.update({key: environment[key] for key in ("ROS_DOMAIN_ID", "ROS_AUTOMATIC_DISCOVERY_RANGE")})
    environment["PYTHONUNBUFFERED"] = "1"
    return environment


def exit_description(returncode: int) -> str:
    """'exited with code N' or 'was killed by SIGNAME' for a Popen return code."""
    if returncode < 0:
        try:
            return f"was killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"was killed by signal {-returncode}"
    return f"exited with code {returncode}"


class DemoSession:
    """The demo's side of a running node: the collector node, the replayer and their executor,
    the node's latest /diagnostics values (``values``), and the waits of the module docstring.

    ``node``: the :class:`~.processes.NodeProcess` (its ``name`` is the node's ROS name: its
    /diagnostics status is named '<name>: ...')."""

    def __init__(self, node: NodeProcess, collector, replayer, executor):
        from diagnostic_msgs.msg import DiagnosticArray

        self.node, self.collector, self.replayer, self.executor = node, collector, replayer, executor
        self.values: dict[str, str] = {}
        self.reports = 0
        self._said_compiling = False
        collector.create_subscription(DiagnosticArray, "/diagnostics", self._on_diagnostics, 10)

    # ----------------------------------------------------------------- what the node says
    def _on_diagnostics(self, message) -> None:
        for status in message.status:
            if status.name.split(":")[0].strip() == self.node.name:
                self.values = {pair.key: pair.value for pair in status.values}
                self.reports += 1

    def count(self, key: str) -> int | None:
        """An integer value of the node's latest /diagnostics report, None when absent or not an integer."""
        try:
            return int(self.values[key])
        except (KeyError, ValueError):
            return None

    def estimator_state(self) -> str:
        """The node's ``estimator_state`` in its latest /diagnostics report ('' before the first).
        DemoFailure when its reports do not carry one (a node older than this demo: nothing to wait on)."""
        if self.reports and "estimator_state" not in self.values:
            raise DemoFailure(f"{self.node.name}'s /diagnostics carry no estimator_state: it cannot say when its "
                              "estimator runs (a focus_ros older than this demo?)", self.node.log_path)
        return self.values.get("estimator_state", "")

    # ----------------------------------------------------------------- waiting
    def ensure_node_alive(self, when: str) -> None:
        """DemoFailure when the node has ended: '<name> exited with code N <when> (its last line: ...)'."""
        code = self.node.returncode
        if code is not None:
            last = self.node.last_line()
            raise DemoFailure(f"{self.node.name} {exit_description(code)} {when}"
                              + (f" (its last line: {last})" if last else ""), self.node.log_path)

    def spin_until(self, condition: Callable[[], bool], timeout_s: float, missing: Callable[[], str],
                   when: str) -> float:
        """Spin the executor until ``condition()``; returns the seconds it took. DemoFailure with
        ``missing()`` once ``timeout_s`` (s) has passed, or as soon as the node has ended
        ('... exited with code N <when>')."""
        started = time.monotonic()
        deadline = started + timeout_s
        while not condition():
            self.ensure_node_alive(when)
            if time.monotonic() >= deadline:
                raise DemoFailure(missing(), self.node.log_path)
            self.executor.spin_once(timeout_sec=SPIN_STEP_S)
        return time.monotonic() - started

    def settled(self, snapshot: Callable[[], tuple | None], quiet_s: float) -> Callable[[], bool]:
        """A condition for :meth:`spin_until`: true once ``snapshot()`` (the counts that show the
        node has nothing left to do, from its latest report, or None while it has) has stayed the
        same over at least two reports and ``quiet_s`` (s). One report is not enough: the node may
        have been between taking the last events in and queuing the work they make."""
        first: dict = {}

        def condition() -> bool:
            now = snapshot()
            if now is None:
                first.clear()
                return False
            if now != first.get("snapshot"):
                first.update(snapshot=now, report=self.reports, since_s=time.monotonic())
                return False
            return self.reports > first["report"] and time.monotonic() - first["since_s"] >= quiet_s

        return condition

    def wait_until_running(self, timeout_s: float = READY_TIMEOUT_S) -> float:
        """Until the node says its estimator runs (module docstring, 1); returns the seconds waited.
        Says once when the node is compiling; fails at once when its estimator says ``stopped``."""
        name = self.node.name

        def running() -> bool:
            state = self.estimator_state()
            if state == "compiling" and not self._said_compiling:
                self._said_compiling = True
                print(f"      {name} is compiling its kernels (first start after an install, or a Numba cache it "
                      f"cannot use): waiting for it, at most {timeout_s:.0f} s ...", flush=True)
            if state == "stopped":
                raise DemoFailure(f"{name}'s estimator stopped before it ran (estimator_state: stopped)",
                                  self.node.log_path)
            return state == "running"

        def missing() -> str:
            state = (f"estimator_state: {self.values['estimator_state']}" if self.reports
                     else "no /diagnostics report received from it")
            return f"{name} did not report its estimator running within {timeout_s:.0f} s ({state})"

        waited = self.spin_until(running, timeout_s, missing, "before its estimator ran")
        self.node.remember_family()  # its worker is up now: remembered even if it leaves the session
        return waited

    def wait_until_matched(self, topics: list[str], timeout_s: float = MATCH_TIMEOUT_S) -> float:
        """Until the node subscribes to each of ``topics`` (as the replayer's publishers see it)
        and publishes on every topic this process subscribes to (the collector's subscriptions,
        the replayer's pace topic); returns the seconds waited (module docstring, 2)."""
        publishers = {publisher.topic_name: publisher for publisher in self.replayer.publishers}
        unknown = [topic for topic in topics if topic not in publishers]
        if unknown:
            raise DemoFailure(f"the bag has no {', '.join(unknown)} to replay", self.node.log_path)
        subscriptions = [subscription for node in (self.collector, self.replayer) for subscription in node.subscriptions
                         if subscription.topic_name not in ("/diagnostics", "/parameter_events")]

        def unmatched() -> list[str]:
            return ([f"subscribed to {topic}" for topic in topics if publishers[topic].get_subscription_count() < 1]
                    + [f"published on {s.topic_name}" for s in subscriptions if s.get_publisher_count() < 1])

        return self.spin_until(lambda: not unmatched(), timeout_s,
                               lambda: f"{self.node.name} never {' nor '.join(unmatched())} within {timeout_s:.0f} s "
                                       "of its estimator running",
                               "before it subscribed to the bag's topics")

    def wait_until_ready(self, topics: list[str]) -> float:
        """:meth:`wait_until_running`, then :meth:`wait_until_matched`; prints how long it took."""
        started = time.monotonic()
        self.wait_until_running()
        self.wait_until_matched(topics)
        waited = time.monotonic() - started
        print(f"      {self.node.name} ready after {waited:.1f} s: estimator running, subscribed to "
              f"{', '.join(topics)}", flush=True)
        return waited

    def play(self) -> float:
        """Replay the bag (the replayer's pacing); returns the wall time (s). DemoFailure when the
        node ended meanwhile."""
        started = time.monotonic()
        self.replayer.play(self.executor)
        self.ensure_node_alive("during the replay")
        return time.monotonic() - started


@contextlib.contextmanager
def node_and_replayer(command: list[str], log_path: Path, bag: Path, rate: float, name: str):
    """Start the node ``name`` as ``ros2 run`` would (``command``, output to ``log_path``) and, in
    this process, a collector node and a bag replayer (``rate``: 0 = at the estimator's pace) on
    one executor in a ROS context of their own; yields a :class:`DemoSession`.

    At the end, whatever happened (an exception, Ctrl-C), the node is stopped and nothing of its
    own is left (:meth:`~.processes.NodeProcess.stop`), then this process's ROS context is shut
    down. When stopping took SIGKILL or left processes to kill, that is a :class:`DemoFailure`
    (joined to the failure already under way, if any, in one line); after Ctrl-C it is a
    :class:`DemoInterrupted` saying so."""
    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.signals import SignalHandlerOptions

    from focus_ros.ros.replay_node import BagReplayer

    environment = ros_environment()
    node = NodeProcess(command, log_path, environment, name)
    started_node_logs.append(node.log_path)
    context = rclpy.Context()
    ros_nodes, executor, failure = [], None, None
    try:
        # no rclpy signal handlers: Ctrl-C stays a KeyboardInterrupt here, and the node is stopped below
        rclpy.init(context=context, signal_handler_options=SignalHandlerOptions.NO)
        collector = rclpy.create_node("focus_ros_demo", context=context)
        ros_nodes.append(collector)
        replayer = BagReplayer(bag=str(bag), rate=rate, context=context)
        ros_nodes.append(replayer)
        executor = SingleThreadedExecutor(context=context)
        executor.add_node(collector)
        executor.add_node(replayer)
        yield DemoSession(node, collector, replayer, executor)
    except BaseException as error:
        failure = error
        raise
    finally:
        outcome = node.stop()
        with contextlib.suppress(Exception):
            if executor is not None:
                executor.shutdown(timeout_sec=1.0)
            for ros_node in ros_nodes:
                ros_node.destroy_node()
            rclpy.try_shutdown(context=context)
        problem = outcome.problem
        if isinstance(failure, (KeyboardInterrupt, DemoInterrupted)):
            raise DemoInterrupted(problem, node.log_path) from None
        if problem and isinstance(failure, DemoFailure):
            raise DemoFailure(f"{failure}; {problem}", node.log_path) from None
        if problem and isinstance(failure, Exception):
            raise DemoFailure(f"{describe_exception(failure)}; {problem}", node.log_path) from None
        if problem and failure is None:
            raise DemoFailure(problem, node.log_path)
