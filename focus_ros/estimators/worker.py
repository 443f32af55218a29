"""Estimators in a process of their own, fed through shared memory: one execution model for
the angular velocity, optical flow and depth nodes.

Why: inside a ROS node the estimator shares the interpreter with the executor thread that
takes, decodes and windows about a thousand event messages a second. The optimizer's
Python steps (line search, BFGS update, loss bookkeeping between the GIL-free Numba
kernels) then wait for the GIL while that thread runs Python (CPython hands it over every
switch interval, 5 ms). In a process of its own the estimator runs exactly the offline
code on its own interpreter, whatever the executor does (measurements: BENCHMARKS.md, "The
node through ROS 2").

Which estimator runs is a *kind* (:data:`KINDS`, by name): ``angular_velocity`` (a window of
events -> :class:`~focus_ros.estimators.angular_velocity.WindowEstimate`), ``optical_flow`` (a
window -> :class:`~focus_ros.estimators.optical_flow.FlowEstimate`) and ``depth`` (a keyframe's
events plus its trajectory segment -> :class:`~focus_ros.estimators.depth.DepthKeyframe`). Each
kind says how to build its estimator from (calibration, settings), how to run one job, what
picture to draw when asked and what state (the warm start) survives a new configuration.
A job's events always travel through the shared-memory slots (x, y, t, p arrays, never
pickled: a depth keyframe has a million events); the job's small extra input (depth: the
poses around the keyframe) and the result travel pickled over a pipe.

:class:`EstimatorProcess` starts ``python -m focus_ros.estimators.worker`` (a plain
subprocess of the same interpreter: nothing of the parent, rclpy included, is imported
there), writes each job's events into one of three shared-memory slots (grown when a larger
job comes) and exchanges small pickled commands and results over a pipe. Jobs can be queued
from one thread (``submit``) while another collects the results (``collect``), so the
estimator starts on the next job without waiting for the collecting thread.
:class:`InlineEstimator` has the same interface and runs in the calling thread (for
comparison and for callers that want no process). Both give identical estimates for the same
jobs (same code, same inputs; tested).

A worker that dies (killed, out of memory) raises :class:`WorkerDied` from the call that
noticed it; ``restart()`` starts a fresh one with the last configuration (the warm start
is lost, as after a gap).

:class:`EstimatorRunner` is what the nodes use: a thread that keeps one of the two engines
configured and fed from a queue of jobs (the caller's queue policy: newest or all, bounded),
restarts a dead worker, counts what happened (completed, dropped, lost, failed, restarts,
time per job, latency) and hands each result to the caller's callback; its
``diagnostic_values()`` and ``health()`` are the nodes' shared ``/diagnostics`` status logic.
Nothing here imports rclpy.
"""

from __future__ import annotations

import os
import pickle
import signal
import subprocess
import sys
import threading
import time
import weakref
from collections import deque
from dataclasses import dataclass
from typing import Any, Callable
from multiprocessing import shared_memory
from multiprocessing.connection import Connection

import numpy as np

from focus_ros.camera import Calibration
from focus_ros.events import Events

#: bytes per event in the shared block: x, y (uint16), t (int64), p (int8)
BYTES_PER_EVENT = 2 + 2 + 8 + 1


class WorkerDied(RuntimeError):
    """The estimator process ended or stopped answering."""


@dataclass
class WorkerResult:
    """One job's estimate (its kind's result type; None when the worker skipped the job for a
    newer one), the estimator's own wall time for it (s, measured where it ran) and, when
    asked, the kind's pictures (angular velocity: the IWE before and after compensation,
    float64 (height, width); optical flow: arrows over the compensated image, rgb8; depth:
    the colour depth map, rgb8)."""

    estimate: Any
    estimator_s: float
    images: tuple | None = None
    #: CPU time of the estimating thread for the job (s): the work itself, without the
    #: time spent waiting for a core or for the GIL
    estimator_cpu_s: float = float("nan")


# ============================================================================ CPUs


def parse_cpu_list(text: str) -> frozenset[int]:
    """The CPU numbers of a list in taskset's syntax: "1", "0,2", "2-3" (ranges inclusive);
    "" = none (not pinned). Raises ValueError naming the part that is not a CPU number or
    range, or the CPUs this machine does not have. (Any CPU of the machine will do, not only
    the caller's own: a node started with ``taskset -c 0`` may put its estimator on CPU 1.)"""
    text = str(text).strip()
    if not text:
        return frozenset()
    cpus = set()
    for part in text.split(","):
        first, dash, last = part.strip().partition("-")
        if not (first.isdigit() and (last.isdigit() if dash else True)) or (dash and int(last) < int(first)):
            raise ValueError(f"CPU list '{text}': '{part}' is not a CPU number or a range such as 2-3")
        cpus.update(range(int(first), int(last if dash else first) + 1))
    if not hasattr(os, "sched_setaffinity"):
        raise ValueError(f"CPU list '{text}': pinning to CPUs needs Linux (os.sched_setaffinity)")
    machine = range(os.cpu_count() or 1)
    missing = sorted(cpus - set(machine))
    if missing:
        raise ValueError(f"CPU list '{text}': CPU {format_cpu_list(missing)} is not on this machine "
                         f"(CPUs {format_cpu_list(machine)})")
    return frozenset(cpus)


def format_cpu_list(cpus) -> str:
    """CPU numbers in taskset's syntax, runs as ranges: {0, 1, 2, 5} -> "0-2,5"."""
    runs: list[list[int]] = []
    for cpu in sorted(cpus):
        if runs and cpu == runs[-1][1] + 1:
            runs[-1][1] = cpu
        else:
            runs.append([cpu, cpu])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


# ============================================================================ kinds of estimator


@dataclass(frozen=True)
class EstimatorKind:
    """How the worker builds and runs one kind of estimator.

    build(calibration, settings) -> estimator (ValueError naming the problem when unusable);
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


def _build_angular_velocity(calibration, settings):
    from focus_ros.estimators.angular_velocity import AngularVelocityEstimator
    return AngularVelocityEstimator(calibration, settings)


def _carry_angular_velocity(previous, estimator) -> None:
    if not estimator.degenerate_reason:
        estimator.previous = previous.previous


def _angular_velocity_pictures(estimator, estimate):
    if estimate.degenerate:
        return None
    objective = estimator.objective  # still holds this window
    return objective.image(np.zeros(3)).image, objective.image(estimate.angular_velocity).image


def _build_optical_flow(calibration, settings):
    from focus_ros.estimators.optical_flow import OpticalFlowEstimator
    return OpticalFlowEstimator(calibration.width, calibration.height, settings)


def _optical_flow_pictures(estimator, estimate):
    from focus_ros.flow_visualization import compensated_image, flow_arrows_image
    return (flow_arrows_image(compensated_image(estimator, estimate), estimate),)


def _build_depth(calibration, settings):
    from focus_ros.estimators.depth import DepthEstimator, warm_up
    estimator = DepthEstimator(calibration, settings)
    # the first call of each compiled stage loads it (~1 s): here, not in the first keyframe's latency
    warm_up(estimator)
    return estimator


def _depth_pictures(estimator, keyframe):
    if keyframe.warning:
        return None
    from focus_ros.depth.pictures import depth_picture, event_image
    settings = estimator.settings
    return (depth_picture(keyframe.depth_m, event_image(estimator.dsi.votes), settings.z_min_m, settings.z_max_m),)


#: name -> EstimatorKind: what EstimatorProcess / InlineEstimator / EstimatorRunner can run
KINDS = {
    "angular_velocity": EstimatorKind("angular_velocity", _build_angular_velocity,
                                      lambda estimator, events, extra: estimator.estimate(events),
                                      _angular_velocity_pictures, _carry_angular_velocity),
    "optical_flow": EstimatorKind("optical_flow", _build_optical_flow,
                                  lambda estimator, events, extra: estimator.estimate(events),
                                  _optical_flow_pictures),
    "depth": EstimatorKind("depth", _build_depth,
                           lambda estimator, events, trajectory: estimator.estimate(events, trajectory),
                           _depth_pictures),
}


def kind_named(name: str) -> EstimatorKind:
    try:
        return KINDS[name]
    except KeyError:
        raise ValueError(f"estimator kind '{name}' is not one of: {', '.join(KINDS)}") from None


def _configured(kind: EstimatorKind, previous, calibration, settings, keep_warm_start: bool):
    """A new estimator of ``kind``; the warm start carried over from ``previous`` when asked."""
    estimator = kind.build(calibration, settings)
    if keep_warm_start and previous is not None and kind.carry is not None:
        kind.carry(previous, estimator)
    return estimator


def _estimate(kind: EstimatorKind, estimator, events: Events, extra, images: bool) -> WorkerResult:
    started, started_cpu = time.perf_counter(), time.thread_time()
    estimate = kind.run(estimator, events, extra)
    elapsed, elapsed_cpu = time.perf_counter() - started, time.thread_time() - started_cpu
    pictures = kind.pictures(estimator, estimate) if images else None
    return WorkerResult(estimate, elapsed, pictures, elapsed_cpu)


def _reset(estimator) -> None:
    reset = getattr(estimator, "reset", None)  # a depth estimator keeps nothing between keyframes
    if reset is not None:
        reset()


class InlineEstimator:
    """The estimator in the calling thread, with :class:`EstimatorProcess`'s interface."""

    pid = None
    restarts = 0

    def __init__(self, calibration: Calibration, settings, *, kind: str = "angular_velocity"):
        self.kind = kind_named(kind)
        self.estimator = self.kind.build(calibration, settings)
        self._queue = deque()

    def configure(self, calibration: Calibration, settings, keep_warm_start: bool = True) -> None:
        """New calibration/settings; the warm start carries over when keep_warm_start."""
        self.estimator = _configured(self.kind, self.estimator, calibration, settings, keep_warm_start)

    def reset(self) -> None:
        _reset(self.estimator)

    def estimate(self, events: Events, images: bool = False, extra=None) -> WorkerResult:
        return _estimate(self.kind, self.estimator, events, extra, images)

    # the pipelined interface of EstimatorProcess: one job queued, estimated by collect()
    _queue: deque

    @property
    def in_flight(self) -> int:
        return len(self._queue)

    def can_submit(self) -> bool:
        return not self._queue

    def fits(self, count: int) -> bool:
        return True

    def alive(self) -> bool:
        return True

    def submit(self, events: Events, images: bool = False, skippable: bool = False, extra=None) -> int:
        self._queue.append((events, images, extra))
        return 0

    def collect(self, timeout_s: float | None = None) -> WorkerResult | None:
        if not self._queue:
            return None
        events, images, extra = self._queue[0]
        try:
            return self.estimate(events, images, extra)
        finally:
            self._queue.popleft()

    def restart(self) -> None:
        pass

    def close(self) -> None:
        pass


class EstimatorProcess:
    """The estimator in a subprocess (module docstring).

    calibration, settings: as for the kind's estimator (checked here first, so that a bad
    combination raises ValueError in the caller, not in the worker); kind: a name of
    :data:`KINDS`; capacity_events: initial size of each shared slot (grown on demand);
    start_timeout_s: how long the worker may take to import, compile (Numba cache) and warm
    up before it counts as dead; cpus: CPU numbers the worker runs on (:func:`parse_cpu_list`;
    empty = wherever the OS puts it), kept across restarts; when the OS refuses them the worker
    runs unpinned and ``pinning_error`` says why.

    Blocking use: ``estimate(events, extra=...)``. Pipelined use (the node): ``submit(events)`` from any
    thread queues a window in one of ``SLOTS`` shared slots and returns at once (the worker
    starts on it as soon as it is free, without waiting for the caller); ``collect()`` from
    one thread returns the results in order. With ``skippable`` the worker skips a queued
    window when a newer one is already queued behind it (``collect`` then returns a result
    whose ``estimate`` is None: the window was dropped). Control calls (``configure``,
    ``reset``, ``restart``) belong to the collecting thread.
    """

    SLOTS = 3

    def __init__(self, calibration: Calibration, settings, *, kind: str = "angular_velocity",
                 capacity_events: int = 60_000, start_timeout_s: float = 120.0, cpus=frozenset()):
        self.kind = kind_named(kind)
        self._check(calibration, settings)  # raises ValueError on a bad combination
        self.cpus = frozenset(cpus)
        self._calibration, self._settings = calibration, settings
        self.start_timeout_s = float(start_timeout_s)
        self.restarts = 0
        self._process: subprocess.Popen | None = None
        self._connection: _Duplex | None = None
        self._memory: shared_memory.SharedMemory | None = None
        self._capacity = 0
        self._write_lock = threading.Lock()
        self._state_lock = threading.Lock()  # slots and tokens: submit() and collect() may run in two threads
        self._free_slots: list[int] = []
        self._in_flight: dict[int, int] = {}  # token -> slot
        self._results: deque = deque()         # results read while waiting for a control answer
        self._next_token = 0
        self._allocate(max(int(capacity_events), 1))
        self._start()

    # ----------------------------------------------------------------- life cycle
    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    @property
    def in_flight(self) -> int:
        """Windows submitted and not collected yet."""
        return len(self._in_flight)

    def alive(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def cpus_in_use(self) -> frozenset[int]:
        """The CPUs the worker may run on now, as the OS says (empty when it is not running)."""
        try:
            return frozenset(os.sched_getaffinity(self._process.pid)) if self.alive() else frozenset()
        except (AttributeError, OSError):
            return frozenset()

    def _allocate(self, capacity: int) -> None:
        if self._memory is not None:
            self._release_memory()
        self._memory = shared_memory.SharedMemory(create=True, size=self.SLOTS * capacity * BYTES_PER_EVENT)
        self._capacity = capacity
        # freed even if close() is never called (an exception in the owner)
        self._finalizer = weakref.finalize(self, _unlink, self._memory)

    def _release_memory(self) -> None:
        self._finalizer.detach()
        _unlink(self._memory)
        self._memory = None

    def _start(self) -> None:
        parent_read, child_write = os.pipe()
        child_read, parent_write = os.pipe()
        # one thread for the estimator's libraries: it runs beside the node's executor and the driver
        environment = dict(os.environ, PYTHONUNBUFFERED="1", NUMBA_NUM_THREADS="1", OMP_NUM_THREADS="1",
                           OPENBLAS_NUM_THREADS="1")
        self._process = subprocess.Popen(
            [sys.executable, "-m", "focus_ros.estimators.worker", str(child_read), str(child_write)],
            pass_fds=(child_read, child_write), env=environment, stdin=subprocess.DEVNULL)
        self.pinning_error = ""
        if self.cpus:  # before the worker starts its threads: they inherit it
            try:
                os.sched_setaffinity(self._process.pid, self.cpus)
            except OSError as error:  # e.g. CPUs outside this container's cpuset: runs unpinned
                self.pinning_error = (f"could not pin the estimator process to CPU {format_cpu_list(self.cpus)} "
                                      f"({error.strerror}); it runs on any CPU")
        os.close(child_read)
        os.close(child_write)
        self._connection = _Duplex(parent_read, parent_write)
        self._free_slots = list(range(self.SLOTS))
        self._in_flight.clear()
        self._results.clear()
        self._call(("attach", self._memory.name, self._capacity, self.SLOTS), self.start_timeout_s)
        self._call(("configure", self.kind.name, self._calibration, self._settings, False), self.start_timeout_s)

    def restart(self) -> None:
        """Start a fresh worker with the last configuration (after WorkerDied); windows in
        flight are lost."""
        self._stop_process()
        self.restarts += 1
        self._start()

    def _stop_process(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None
        if self._process is not None:
            if self._process.poll() is None:
                self._process.kill()
            self._process.wait()
            self._process = None

    def close(self) -> None:
        """Stop the worker and free the shared block."""
        if self._connection is not None and self.alive():
            try:
                self._send(("stop",))
                self._process.wait(timeout=5.0)
            except (OSError, subprocess.TimeoutExpired):
                pass
        self._stop_process()
        if self._memory is not None:
            self._release_memory()

    # ----------------------------------------------------------------- commands
    def _send(self, command: tuple) -> None:
        connection = self._connection
        if connection is None or not self.alive():
            raise WorkerDied(self._death_text())
        try:
            with self._write_lock:
                connection.send(command)
        except OSError as error:
            raise WorkerDied(self._death_text(error)) from None

    def _receive(self, timeout_s: float | None):
        """The worker's next answer, or None after timeout_s; WorkerDied when it is gone."""
        connection = self._connection
        if connection is None:
            raise WorkerDied(self._death_text())
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        try:
            while not connection.poll(0.5 if deadline is None else max(0.0, min(0.5, deadline - time.monotonic()))):
                if not self.alive():
                    raise WorkerDied(self._death_text())
                if deadline is not None and time.monotonic() >= deadline:
                    return None
            return connection.recv()
        except (EOFError, OSError) as error:
            raise WorkerDied(self._death_text(error)) from None

    def _call(self, command: tuple, timeout_s: float | None = None):
        """Send a control command and wait for its answer (results arriving meanwhile are kept
        for collect()); WorkerDied when the worker is gone or silent beyond timeout_s."""
        self._send(command)
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while True:
            left = None if deadline is None else deadline - time.monotonic()
            reply = self._receive(left if left is None else max(left, 0.0))
            if reply is None:
                self._process.kill()
                raise WorkerDied(f"estimator process (pid {self.pid}) did not answer '{command[0]}' "
                                 f"within {timeout_s:.0f} s")
            if reply[0] in ("result", "skipped", "failed"):
                self._results.append(reply)
                continue
            if reply[0] == "error":
                raise ValueError(reply[1])
            return None

    def _death_text(self, error=None) -> str:
        code = None
        if self._process is not None:
            try:
                code = self._process.wait(timeout=1.0)  # reap it to say how it ended
            except subprocess.TimeoutExpired:
                pass
        how = ("still running" if code is None else f"killed by signal {-code}" if code < 0 else f"exit code {code}")
        return f"estimator process (pid {self.pid}) stopped ({how}{'; ' + str(error) if str(error or '') else ''})"

    def _check(self, calibration: Calibration, settings) -> None:
        """ValueError naming the problem when the kind's estimator refuses these settings
        (the light estimators are built here for that; depth checks its settings when made)."""
        if self.kind.name != "depth":
            self.kind.build(calibration, settings)

    def configure(self, calibration: Calibration, settings, keep_warm_start: bool = True) -> None:
        """New calibration/settings; the warm start carries over when keep_warm_start.
        Raises ValueError for settings the estimator refuses (nothing changes then)."""
        self._check(calibration, settings)
        self._call(("configure", self.kind.name, calibration, settings, keep_warm_start), self.start_timeout_s)
        self._calibration, self._settings = calibration, settings

    def reset(self) -> None:
        """Forget the warm start (for the windows submitted after this call)."""
        self._call(("reset",))

    def can_submit(self) -> bool:
        return bool(self._free_slots)

    def submit(self, events: Events, images: bool = False, skippable: bool = False, extra=None) -> int:
        """Queue one job (events in time order, in a shared slot; ``extra`` pickled) for the
        worker; returns its token. Needs a free slot (``can_submit()``)."""
        count = len(events)
        if count > self._capacity:
            if self._in_flight:
                raise ValueError("a window larger than the shared slots waits until the worker is idle")
            self._allocate(max(count, 2 * self._capacity))
            self._call(("attach", self._memory.name, self._capacity, self.SLOTS))
        with self._state_lock:
            slot = self._free_slots.pop(0)
            token = self._next_token
            self._next_token += 1
            self._in_flight[token] = slot
        x, y, t, p = _views(self._memory.buf, self._capacity, slot)
        x[:count], y[:count], t[:count], p[:count] = events.x, events.y, events.t, events.p
        self._send(("estimate", slot, count, images, skippable, extra, token))
        return token

    def fits(self, count: int) -> bool:
        """True when a window of ``count`` events fits a slot (else submit() must grow the
        slots, from the collecting thread with nothing in flight)."""
        return count <= self._capacity

    def collect(self, timeout_s: float | None = None) -> WorkerResult | None:
        """The next result in submission order (its ``estimate`` None when the worker skipped
        the window for a newer one), or None after timeout_s."""
        reply = self._results.popleft() if self._results else self._receive(timeout_s)
        if reply is None:
            return None
        if reply[0] == "error":
            raise ValueError(reply[1])
        token = reply[1]
        with self._state_lock:
            self._free_slots.append(self._in_flight.pop(token))
        if reply[0] == "failed":
            raise ValueError(reply[2])
        return reply[2] if reply[0] == "result" else WorkerResult(None, 0.0)

    def estimate(self, events: Events, images: bool = False, extra=None) -> WorkerResult:
        """Estimate one job in the worker and wait for it."""
        while self._in_flight:
            self.collect()
        self.submit(events, images, extra=extra)
        return self.collect()


# ============================================================================ the nodes' side


@dataclass
class Job:
    """One unit of work for an :class:`EstimatorRunner`: the events (through the shared slots),
    the kind's extra input (pickled to the worker: depth's trajectory segment), the caller's
    own ``context`` (stays in the caller, handed back with the result) and ``received_s``
    (time.monotonic() when its last input arrived, for the latency)."""

    events: Events
    extra: Any = None
    context: Any = None
    received_s: float = float("nan")


class PictureRate:
    """Says whether the next job should bring its pictures back: only while ``watched()`` (someone
    subscribes) and at most ``rate_hz()`` times a second (0 = never). For EstimatorRunner's
    ``images_wanted``."""

    def __init__(self, rate_hz: Callable[[], float], watched: Callable[[], bool]):
        self._rate_hz, self._watched = rate_hz, watched
        self._last_s = float("-inf")

    def __call__(self) -> bool:
        rate, now = self._rate_hz(), time.monotonic()
        if rate <= 0 or now - self._last_s < 1.0 / rate or not self._watched():
            return False
        self._last_s = now
        return True


class EstimatorRunner:
    """One estimator kind run for a node: a thread of its own keeps the engine (an
    :class:`EstimatorProcess`, or an :class:`InlineEstimator` when ``in_process`` is false)
    configured and fed, collects results in order and hands each to ``on_result(job,
    result)`` (in that thread; ``result.estimate`` is never None there).

    calibration, settings: the configuration the engine starts with (loading the compiled
    code before data flows); jobs wait until :meth:`configure` gives the real one.
    unit: the noun of the counts ("window", "keyframe"); max_pending(): jobs waiting at most,
    the oldest dropped beyond it; skippable(): the worker may skip a job when a newer one is
    queued behind it (queue policy "newest"); images_wanted(): ask for the kind's pictures
    with the next job (called with the runner's lock held: must not take the caller's lock);
    logger: info/warning/error(text); warn_once(key, text): the caller's once-only warning;
    capacity_events: initial shared slot size (events); cpus: the CPUs of the estimator
    process in taskset's syntax (the nodes' ``estimator_cpus``; "" = any; ValueError naming
    ``estimator_cpus`` when unusable (:func:`parse_cpu_list`) or given with ``in_process`` false).

    A dead worker is restarted (counted in ``restarts``, its jobs in flight counted lost,
    warm start reset); a job whose estimation raises is counted ``failed`` and warned once;
    the node carries on either way. Thread-safe: ``push``, ``configure``, ``reset``,
    ``clear_pending`` from any thread.
    """

    def __init__(self, kind: str, calibration: Calibration, settings, *, in_process: bool,
                 on_result: Callable[[Job, WorkerResult], None], logger, warn_once: Callable[[str, str], None],
                 unit: str = "window", max_pending: Callable[[], int] = lambda: 1,
                 skippable: Callable[[], bool] = lambda: False, images_wanted: Callable[[], bool] = lambda: False,
                 capacity_events: int = 60_000, name: str = "focus_ros_estimator", cpus: str = ""):
        self.kind = kind_named(kind)
        self.in_process = bool(in_process)
        try:  # named as the nodes' parameter, for the one-line error a node stops with
            self.cpus = parse_cpu_list(cpus)
        except ValueError as error:
            raise ValueError(f"estimator_cpus: {error}") from None
        if self.cpus and not self.in_process:
            raise ValueError(f"estimator_cpus '{cpus}' applies to the estimator process: it needs the estimator in "
                             "a process of its own (estimator_process true)")
        self.unit = unit
        self._on_result, self._logger, self._warn_once = on_result, logger, warn_once
        self._max_pending, self._skippable, self._images_wanted = max_pending, skippable, images_wanted
        self._capacity_events = int(capacity_events)
        self._lock = threading.Condition()
        self._preload = (calibration, settings)
        self._config = None               # (calibration, settings) jobs are estimated with, once known
        self._engine = None               # EstimatorProcess or InlineEstimator, built by the thread
        self._stale = True                # the engine must be (re)configured before the next job
        self._reset_due = False           # the warm start must be forgotten before the next job
        self._configuring = False         # the thread is (re)configuring the engine: no job goes in
        self._died: WorkerDied | None = None  # noticed while submitting: the thread restarts the worker
        self._pending: deque = deque()    # jobs waiting for the engine
        self._submitted: deque = deque()  # handed to the engine: (job, submit time)
        self.counts = dict(completed=0, estimated=0, dropped=0, lost=0, failed=0, restarts=0)
        self._period = dict(estimator_s=[], estimator_cpu_s=[], round_trip_s=[], latency_s=[])
        self._last_latency_s = float("nan")
        self._running = True
        self._thread = threading.Thread(target=self._work, name=name, daemon=True)
        self._thread.start()

    # ----------------------------------------------------------------- the caller's side
    def configure(self, calibration: Calibration, settings) -> None:
        """Estimate the next jobs with this configuration (the warm start carries over)."""
        with self._lock:
            self._config = (calibration, settings)
            self._stale = True
            self._lock.notify_all()

    def reset(self) -> None:
        """Forget the waiting jobs and the warm start (a restart of the stream)."""
        with self._lock:
            self._pending.clear()
            self._reset_due = True
            self._lock.notify_all()

    def clear_pending(self) -> None:
        with self._lock:
            self._pending.clear()

    def push(self, job: Job) -> None:
        """Queue one job (any thread); beyond max_pending() the oldest waiting one is dropped."""
        with self._lock:
            self.counts["completed"] += 1
            self._pending.append(job)
            limit = max(int(self._max_pending()), 1)
            while len(self._pending) > limit:
                self._pending.popleft()
                self.counts["dropped"] += 1
            # straight from the caller's thread, so that the estimator process starts on the job
            # without waiting for this runner's thread to get the GIL back
            self._submit_pending()
            self._lock.notify_all()

    @property
    def pending(self) -> int:
        return len(self._pending)

    @property
    def pid(self) -> int:
        engine = self._engine
        return (engine.pid or 0) if engine is not None else 0

    def diagnostic_values(self) -> dict:
        """The counts and the medians since the previous call, for /diagnostics: ``{unit}s_completed``,
        ``_dropped`` (queue overflow or skipped for a newer one), ``_lost`` (in a worker that
        died), ``_failed``, ``_pending``, ``processed_ratio`` (estimated / completed since the
        start), ``processing_ms_per_{unit}`` and its CPU time, ``round_trip_ms_per_{unit}``
        (submitted to result), ``latency_ms`` (last input received to result handled),
        ``estimator_process_pid`` (0 inline), ``estimator_cpus`` (the CPUs the process may run
        on now, taskset's syntax; "" inline) and ``worker_restarts``."""
        with self._lock:
            counts = dict(self.counts)
            period = {name: values[:] for name, values in self._period.items()}
            for values in self._period.values():
                values.clear()
            pending = len(self._pending)

        def median_ms(values):
            return 1e3 * float(np.median(values)) if values else float("nan")

        unit = self.unit
        return {
            f"{unit}s_completed": counts["completed"],
            f"{unit}s_dropped": counts["dropped"],
            f"{unit}s_lost": counts["lost"],
            f"{unit}s_failed": counts["failed"],
            f"{unit}s_pending": pending,
            "processed_ratio": counts["estimated"] / counts["completed"] if counts["completed"] else float("nan"),
            f"processing_ms_per_{unit}": median_ms(period["estimator_s"]),
            f"processing_cpu_ms_per_{unit}": median_ms(period["estimator_cpu_s"]),
            f"round_trip_ms_per_{unit}": median_ms(period["round_trip_s"]),
            "latency_ms": median_ms(period["latency_s"]) if period["latency_s"] else 1e3 * self._last_latency_s,
            "estimator_process_pid": self.pid,
            "estimator_cpus": self._cpus_in_use(),
            "worker_restarts": counts["restarts"],
        }

    def _cpus_in_use(self) -> str:
        engine = self._engine
        return format_cpu_list(engine.cpus_in_use()) if isinstance(engine, EstimatorProcess) else ""

    def health(self) -> tuple[str, str] | None:
        """("error" | "warn", message) when the estimation is in trouble, None when fine: the
        estimator process not running (after a failed restart), or most jobs dropped."""
        with self._lock:
            counts = dict(self.counts)
            engine_missing = self._engine is None
        if counts["restarts"] > 0 and engine_missing:
            return "error", "estimator process not running"
        if counts["dropped"] > 0 and counts["dropped"] >= counts["estimated"]:
            return "warn", f"falling behind: most {self.unit}s dropped"
        return None

    def stop(self) -> None:
        with self._lock:
            self._running = False
            self._lock.notify_all()
        self._thread.join(timeout=5.0)
        if self._engine is not None:
            self._engine.close()

    # ----------------------------------------------------------------- the runner's thread
    def _ready(self) -> bool:
        return (self._engine is not None and not self._stale and not self._reset_due and not self._configuring
                and self._died is None)

    def _submit_pending(self) -> None:
        """Hand waiting jobs to the engine while it has room (lock held)."""
        engine = self._engine
        if not self._ready():
            return
        skippable = bool(self._skippable())
        while self._pending and engine.can_submit() and engine.in_flight < 2:
            job = self._pending[0]
            if not engine.fits(len(job.events)):
                return  # the runner's thread grows the shared slots
            try:
                engine.submit(job.events, images=self._images_wanted(), skippable=skippable, extra=job.extra)
            except WorkerDied as error:  # maybe in the caller's thread: the runner's thread restarts it
                self._died = error
                self._lock.notify_all()
                return
            self._pending.popleft()
            self._submitted.append((job, time.monotonic()))

    def _feed_large_job(self) -> None:
        """A job larger than the shared slots: submitted from here, once nothing is in flight."""
        engine = self._engine
        with self._lock:
            if (not self._ready() or not self._pending or engine.fits(len(self._pending[0].events))
                    or engine.in_flight):
                return
            job = self._pending.popleft()
            images = self._images_wanted()
            self._submitted.append((job, time.monotonic()))
            self._configuring = True  # nothing else goes in before it (results come back in order)
        try:
            engine.submit(job.events, images=images, extra=job.extra)
        finally:
            with self._lock:
                self._configuring = False

    def _work(self) -> None:
        try:  # start the estimator now (imports, compiled code); configured once the caller knows how
            self._prepare(*self._preload, configure=False, reset=False)
        except Exception as error:  # noqa: BLE001 - started again once configured
            self._logger.warning(f"estimator not started yet: {error}")
        while self._running:
            with self._lock:
                engine = self._engine
                if engine is None or engine.in_flight == 0:
                    self._lock.wait_for(lambda: not self._running or (self._pending and self._ready()) or
                                        self._reset_due or self._died is not None or
                                        (self._engine is not None and self._engine.in_flight > 0) or
                                        (self._config is not None and (self._stale or self._engine is None)),
                                        timeout=0.5)
                if not self._running:
                    return
                died, self._died = self._died, None
            if died is not None:
                self._restart(died)
                continue
            with self._lock:
                configure = (self._stale or self._engine is None) and self._config is not None
                reset = self._reset_due
                self._stale = self._stale and not configure
                self._reset_due = False
                self._configuring = configure or reset
                config = self._config
            try:
                if configure or reset:
                    try:
                        self._prepare(*config, configure=configure, reset=reset)
                    finally:
                        with self._lock:
                            self._configuring = False
                self._feed_large_job()
                with self._lock:
                    self._submit_pending()
                engine = self._engine
                if engine is None or engine.in_flight == 0:
                    continue
                result = engine.collect(timeout_s=0.2)
                if result is None:
                    continue
                with self._lock:
                    job, submitted = self._submitted.popleft()
                    self._submit_pending()
            except WorkerDied as error:
                if not self._running:
                    return
                self._restart(error)
                continue
            except Exception as error:  # noqa: BLE001 - a bad job must not stop the estimation
                if not self._running:
                    return
                self._warn_once("estimate_failed", f"estimation failed on a {self.unit}: {error}")
                with self._lock:
                    self.counts["failed"] += 1
                    if self._engine is not None and len(self._submitted) > self._engine.in_flight:
                        self._submitted.popleft()
                continue
            if result.estimate is None:  # skipped by the worker for a newer job
                with self._lock:
                    self.counts["dropped"] += 1
                continue
            round_trip_s = time.monotonic() - submitted
            try:
                self._on_result(job, result)
            except Exception as error:  # noqa: BLE001 - e.g. publishing while shutting down
                if not self._running:
                    return
                self._warn_once("result_failed", f"handling a {self.unit}'s result failed: {error}")
            latency_s = time.monotonic() - job.received_s
            with self._lock:
                self.counts["estimated"] += 1
                self._period["estimator_s"].append(result.estimator_s)
                self._period["estimator_cpu_s"].append(result.estimator_cpu_s)
                self._period["round_trip_s"].append(round_trip_s)
                if latency_s == latency_s:
                    self._period["latency_s"].append(latency_s)
                    self._last_latency_s = latency_s

    def _prepare(self, calibration, settings, configure: bool, reset: bool) -> None:
        """Start the engine (process or inline) or bring it up to date (runner's thread)."""
        if self._engine is None:
            if self.in_process:
                engine = EstimatorProcess(calibration, settings, kind=self.kind.name,
                                          capacity_events=self._capacity_events, cpus=self.cpus)
                self._log_started(engine)
            else:
                engine = InlineEstimator(calibration, settings, kind=self.kind.name)
            with self._lock:
                self._engine = engine
            return
        if configure:
            try:
                self._engine.configure(calibration, settings)
            except ValueError as error:  # checked when set; kept as a last resort
                self._logger.error(f"settings not usable: {error}; keeping the previous ones")
        if reset:
            self._engine.reset()

    def _log_started(self, engine: "EstimatorProcess") -> None:
        """Say which process the estimator runs in, on which CPUs, and why not there if refused."""
        self._logger.info(f"estimator running in process {engine.pid}"
                          + (f" on CPU {format_cpu_list(self.cpus)}" if self.cpus else ""))
        if engine.pinning_error:
            self._logger.error(engine.pinning_error)

    def _restart(self, error: Exception) -> None:
        """The estimator process died: say so, count it, start a new one (runner's thread)."""
        with self._lock:
            lost = len(self._submitted)
            self._submitted.clear()
            self.counts["lost"] += lost
            self.counts["restarts"] += 1
            self._configuring = True  # no job goes in before the new worker is configured
        self._logger.error(f"{error}: restarting it ({lost} {self.unit}(s) in progress lost, warm start reset)")
        try:
            self._engine.restart()
            self._log_started(self._engine)
            with self._lock:
                self._configuring = False
                self._submit_pending()
        except (WorkerDied, OSError) as again:
            self._logger.error(f"could not restart the estimator process: {again}; retrying in 1 s")
            self._engine.close()
            with self._lock:
                self._engine = None
                self._stale = True
                self._configuring = False
            time.sleep(1.0)


def _unlink(memory: shared_memory.SharedMemory) -> None:
    try:
        memory.close()
        memory.unlink()
    except (OSError, BufferError):
        pass


class _Duplex:
    """Reads from one pipe end and writes to another, with pickled, length-prefixed messages."""

    def __init__(self, read_fd: int, write_fd: int):
        self._reader = Connection(read_fd, writable=False)
        self._writer = Connection(write_fd, readable=False)

    def send(self, obj) -> None:
        self._writer.send_bytes(pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL))

    def recv(self):
        return pickle.loads(self._reader.recv_bytes())

    def poll(self, timeout: float) -> bool:
        return self._reader.poll(timeout)

    def close(self) -> None:
        self._reader.close()
        self._writer.close()


def _views(buffer, capacity: int, slot: int):
    """x, y, t, p arrays of one slot of the shared block (t first: 8-byte aligned)."""
    base = slot * capacity * BYTES_PER_EVENT
    t = np.ndarray(capacity, np.int64, buffer, base)
    x = np.ndarray(capacity, np.uint16, buffer, base + 8 * capacity)
    y = np.ndarray(capacity, np.uint16, buffer, base + 10 * capacity)
    p = np.ndarray(capacity, np.int8, buffer, base + 12 * capacity)
    return x, y, t, p


def serve(read_fd: int, write_fd: int) -> None:
    """The worker's loop: answer commands in order until "stop" or the parent goes away. An
    estimate marked skippable is skipped (answered "skipped") when a newer estimate is
    already queued behind it with no other command in between."""
    # Ctrl-C reaches the whole process group: the parent decides when this worker ends
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:  # OpenCV (the spatial losses' filters) on one thread too: small images, busy cores
        import cv2
        cv2.setNumThreads(1)
    except ImportError:
        pass
    connection = _Duplex(read_fd, write_fd)
    memory = None
    kind: EstimatorKind | None = None
    estimator = None
    capacity = 0
    queued: deque = deque()
    while True:
        try:
            if not queued:
                queued.append(connection.recv())
            while connection.poll(0):  # everything already sent, to see what is newest
                queued.append(connection.recv())
        except (EOFError, OSError):
            break  # the parent is gone
        command = queued.popleft()
        verb = command[0]
        try:
            if verb == "stop":
                break
            if verb == "attach":
                if memory is not None:
                    try:
                        memory.close()
                    except BufferError:  # a view still held somewhere: the old mapping stays until exit
                        pass
                memory = _attach(command[1])
                capacity = command[2]
                reply = ("ok",)
            elif verb == "configure":
                _, name, calibration, settings, keep_warm_start = command
                new_kind = kind_named(name)
                previous = estimator if new_kind is kind else None
                estimator = _configured(new_kind, previous, calibration, settings, keep_warm_start)
                kind = new_kind
                reply = ("ok",)
            elif verb == "reset":
                _reset(estimator)
                reply = ("ok",)
            elif verb == "estimate":
                _, slot, count, images, skippable, extra, token = command
                if skippable and queued and queued[0][0] == "estimate":
                    reply = ("skipped", token)
                else:
                    x, y, t, p = _views(memory.buf, capacity, slot)
                    # views, no copies: the parent reuses a slot only after its answer, and the
                    # estimators keep nothing of a job's arrays (they copy what they need)
                    events = Events(x[:count], y[:count], t[:count], p[:count])
                    reply = ("result", token, _estimate(kind, estimator, events, extra, images))
            else:
                reply = ("error", f"unknown command {verb!r}")
        except Exception as error:  # noqa: BLE001 - reported to the parent, the worker carries on
            text = f"{type(error).__name__}: {error}"
            reply = ("failed", command[-1], text) if verb == "estimate" else ("error", text)
        try:
            connection.send(reply)
        except OSError:
            break
    if memory is not None:
        memory.close()


def _attach(name: str) -> shared_memory.SharedMemory:
    """Attach to the parent's block without registering it with this process's resource
    tracker (the parent owns and unlinks it)."""
    memory = shared_memory.SharedMemory(name=name)
    try:
        from multiprocessing import resource_tracker
        resource_tracker.unregister(memory._name, "shared_memory")  # noqa: SLF001
    except Exception:  # noqa: BLE001 - only a warning at exit otherwise
        pass
    return memory


if __name__ == "__main__":
    # through the package, so that pickled results name focus_ros.estimators.worker, not __main__
    from focus_ros.estimators import worker
    worker.serve(int(sys.argv[1]), int(sys.argv[2]))
