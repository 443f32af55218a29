"""The one table of estimator kinds: what an engine (:class:`~focus_ros.runtime.InlineEstimator`,
the worker of :class:`~focus_ros.runtime.EstimatorProcess`) can run, and how.

A kind names an estimator and says how to build it from (calibration, settings), how to run
one job, what pictures to draw when asked and what state (the warm start) survives a new
configuration:

- ``angular_velocity``: a window of events (extra: whether its covariance is wanted) ->
  :class:`~focus_ros.estimators.angular_velocity.WindowEstimate`;
- ``optical_flow``: a window -> :class:`~focus_ros.estimators.optical_flow.FlowEstimate`;
- ``depth``: a keyframe's events plus its trajectory segment (the job's ``extra``) ->
  :class:`~focus_ros.estimators.depth.DepthKeyframe`.

Each kind imports its estimator only when called, so that a worker process loads only its
own (the estimators never import this package: no cycle).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from focus_ros.camera import Calibration
from focus_ros.events import Events


@dataclass
class WorkerResult:
    """One job's estimate (its kind's result type; None when the worker skipped the job for a
    newer one), the estimator's own wall time for it (s, measured where it ran) and, when
    asked, the kind's pictures (angular velocity: the IWE before and after compensation,
    float64 (height, width); optical flow: arrows over the compensated image, rgb8; depth:
    the colour depth map, rgb8). Pickled from the worker process to the parent."""

    estimate: Any
    estimator_s: float
    images: tuple | None = None
    #: CPU time of the estimating thread for the job (s): the work itself, without the
    #: time spent waiting for a core or for the GIL
    estimator_cpu_s: float = float("nan")


@dataclass(frozen=True)
class EstimatorKind:
    """How an engine builds and runs one kind of estimator.

    build(calibration, settings) -> estimator (ValueError naming the problem when unusable;
    builds only, so that a caller can check settings without compiling anything);
    warm_up(estimator): runs what the first job would compile or load (called by the engines
    through :func:`configured_estimator`, in the process that estimates), or None;
    run(estimator, events, extra) -> estimate (``extra``: the job's input beside its events,
    pickled to the worker: keep it small); pictures(estimator, estimate) -> tuple of arrays or
    None (called right after run, while the estimator still holds the job);
    carry(previous, new): what survives a new configuration (the warm start), or None.
    The functions import their estimator when called, so that a worker loads only its own.
    """

    name: str
    build: Callable[[Calibration, Any], Any]
    run: Callable[[Any, Events, Any], Any]
    pictures: Callable[[Any, Any], tuple | None]
    carry: Callable[[Any, Any], None] | None = None
    warm_up: Callable[[Any], None] | None = None


# ----------------------------------------------------------------- angular velocity
def _build_angular_velocity(calibration, settings):
    from focus_ros.estimators.angular_velocity import AngularVelocityEstimator
    return AngularVelocityEstimator(calibration, settings)


def _warm_up_angular_velocity(estimator) -> None:
    """One estimate of a small synthetic window (random pixels over 10 ms), then forgotten: the
    compiled kernels these settings use load now, when the node starts, not in its first window."""
    calibration = estimator.calibration
    generator = np.random.default_rng(0)
    count = max(int(estimator.settings.min_events), 2000)
    estimator.estimate(Events.from_arrays(x=generator.integers(0, calibration.width, count),
                                          y=generator.integers(0, calibration.height, count),
                                          t=np.sort(generator.integers(0, 10_000_000, count)),
                                          p=generator.choice([-1, 1], count)))
    estimator.reset()


def _run_angular_velocity(estimator, events, covariance_wanted) -> Any:
    """One window; the job's extra says whether its covariance is wanted (the node: someone
    subscribes to imu or twist; None, as from a caller that gives no extra: yes)."""
    return estimator.estimate(events, covariance=covariance_wanted is not False)


def _carry_angular_velocity(previous, estimator) -> None:
    if not estimator.degenerate_reason:
        estimator.previous = previous.previous


def _angular_velocity_pictures(estimator, estimate):
    if estimate.degenerate:
        return None
    objective = estimator.objective  # still holds this window
    return objective.image(np.zeros(3)).image, objective.image(estimate.angular_velocity).image


# ----------------------------------------------------------------- optical flow
def _build_optical_flow(calibration, settings):
    from focus_ros.estimators.optical_flow import OpticalFlowEstimator
    return OpticalFlowEstimator(calibration.width, calibration.height, settings)


def _optical_flow_pictures(estimator, estimate):
    from focus_ros.flow.pictures import compensated_image, flow_arrows_image
    return (flow_arrows_image(compensated_image(estimator, estimate), estimate),)


# ----------------------------------------------------------------- depth
def _build_depth(calibration, settings):
    from focus_ros.estimators.depth import DepthEstimator
    _leave_a_core_to_the_node()
    return DepthEstimator(calibration, settings)


def _warm_up_depth(estimator) -> None:
    """The first call of each compiled stage loads it: at the start, not in the first keyframe's latency."""
    from focus_ros.estimators.depth import warm_up
    warm_up(estimator)


def _leave_a_core_to_the_node() -> None:
    """numba's threads for this thread's parallel stages (DSI voting, peaks): the CPUs this process
    may use, less one for the node (its input decodes events while a keyframe is computed) unless
    the process is pinned to CPUs of its own (``estimator_cpus``). A parallel loop waits for its
    slowest thread: a thread that shares its core with the node makes the whole stage wait."""
    import os

    import numba
    machine = os.cpu_count() or 1
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else machine
    threads = usable if usable < machine else usable - 1
    numba.set_num_threads(max(1, min(threads, numba.config.NUMBA_NUM_THREADS)))


def _depth_pictures(estimator, keyframe):
    if keyframe.warning:
        return None
    from focus_ros.depth.pictures import depth_picture, event_image
    return (depth_picture(keyframe.depth_m, event_image(estimator.dsi.votes), *keyframe.z_range_m),)


#: name -> EstimatorKind: what EstimatorProcess / InlineEstimator / EstimatorRunner can run
KINDS = {
    "angular_velocity": EstimatorKind("angular_velocity", _build_angular_velocity, _run_angular_velocity,
                                      _angular_velocity_pictures, _carry_angular_velocity,
                                      _warm_up_angular_velocity),
    "optical_flow": EstimatorKind("optical_flow", _build_optical_flow,
                                  lambda estimator, events, extra: estimator.estimate(events),
                                  _optical_flow_pictures),
    "depth": EstimatorKind("depth", _build_depth,
                           lambda estimator, events, trajectory: estimator.estimate(events, trajectory),
                           _depth_pictures, warm_up=_warm_up_depth),
}


def kind_named(name: str) -> EstimatorKind:
    """The kind of :data:`KINDS` called ``name``; ValueError listing the known ones otherwise."""
    try:
        return KINDS[name]
    except KeyError:
        raise ValueError(f"estimator kind '{name}' is not one of: {', '.join(KINDS)}") from None


# ----------------------------------------------------------------- what both engines do with a kind
def configured_estimator(kind: EstimatorKind, previous, calibration, settings, keep_warm_start: bool):
    """A new estimator of ``kind``, warmed up (its compiled code loaded: the kind's ``warm_up``);
    the warm start carried over from ``previous`` when asked."""
    estimator = kind.build(calibration, settings)
    if kind.warm_up is not None:
        kind.warm_up(estimator)
    if keep_warm_start and previous is not None and kind.carry is not None:
        kind.carry(previous, estimator)
    return estimator


def run_job(kind: EstimatorKind, estimator, events: Events, extra, images: bool) -> WorkerResult:
    """One job estimated in this thread, timed (wall and this thread's CPU time, pictures excluded)."""
    started, started_cpu = time.perf_counter(), time.thread_time()
    estimate = kind.run(estimator, events, extra)
    elapsed, elapsed_cpu = time.perf_counter() - started, time.thread_time() - started_cpu
    pictures = kind.pictures(estimator, estimate) if images else None
    return WorkerResult(estimate, elapsed, pictures, elapsed_cpu)


def forget_warm_start(estimator) -> None:
    """The estimator's ``reset()``, when it has one."""
    reset = getattr(estimator, "reset", None)  # depth: forgets the depth range seen
    if reset is not None:
        reset()
