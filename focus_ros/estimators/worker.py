"""The angular-velocity estimator in a process of its own, fed through shared memory.

Why: inside a ROS node the estimator shares the interpreter with the executor thread that
takes, decodes and windows about a thousand event messages a second. The optimizer's
Python steps (line search, BFGS update, loss bookkeeping between the GIL-free Numba
kernels) then wait for the GIL while that thread runs Python (CPython hands it over every
switch interval, 5 ms). In a process of its own the estimator runs exactly the offline
code on its own interpreter, whatever the executor does (measurements: BENCHMARKS.md, "The
node through ROS 2").

:class:`EstimatorProcess` starts ``python -m focus_ros.estimators.worker`` (a plain
subprocess of the same interpreter: nothing of the parent, rclpy included, is imported
there), writes each window's events into one of three shared-memory slots (x, y, t, p
arrays; grown when a larger window comes) and exchanges small pickled commands and results
over a pipe. Windows can be queued from one thread (``submit``) while another collects the
results (``collect``), so the estimator starts on the next window without waiting for the
collecting thread. :class:`InlineEstimator` has the same interface and runs in the calling
thread (for comparison and for callers that want no process). Both give identical
estimates for the same windows (same code, same inputs; tested).

A worker that dies (killed, out of memory) raises :class:`WorkerDied` from the call that
noticed it; ``restart()`` starts a fresh one with the last configuration (the warm start
is lost, as after a gap). Neither class imports rclpy.
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import threading
import time
import weakref
from collections import deque
from dataclasses import dataclass
from multiprocessing import shared_memory
from multiprocessing.connection import Connection

import numpy as np

from focus_ros.camera import Calibration
from focus_ros.estimators.angular_velocity import AngularVelocityEstimator, AngularVelocitySettings, WindowEstimate
from focus_ros.events import Events

#: bytes per event in the shared block: x, y (uint16), t (int64), p (int8)
BYTES_PER_EVENT = 2 + 2 + 8 + 1


class WorkerDied(RuntimeError):
    """The estimator process ended or stopped answering."""


@dataclass
class WorkerResult:
    """One window's estimate, the estimator's own wall time for it (s, measured where it ran)
    and, when asked, the IWE before and after compensation (float64 (height, width))."""

    estimate: WindowEstimate
    estimator_s: float
    images: tuple | None = None
    #: CPU time of the estimating thread for the window (s): the work itself, without the
    #: time spent waiting for a core or for the GIL
    estimator_cpu_s: float = float("nan")


def _estimate(estimator: AngularVelocityEstimator, events: Events, images: bool) -> WorkerResult:
    started, started_cpu = time.perf_counter(), time.thread_time()
    estimate = estimator.estimate(events)
    elapsed, elapsed_cpu = time.perf_counter() - started, time.thread_time() - started_cpu
    pictures = None
    if images and not estimate.degenerate:
        objective = estimator.objective  # still holds this window
        pictures = (objective.image(np.zeros(3)).image, objective.image(estimate.angular_velocity).image)
    return WorkerResult(estimate, elapsed, pictures, elapsed_cpu)


class InlineEstimator:
    """The estimator in the calling thread, with :class:`EstimatorProcess`'s interface."""

    pid = None
    restarts = 0

    def __init__(self, calibration: Calibration, settings: AngularVelocitySettings):
        self.estimator = AngularVelocityEstimator(calibration, settings)
        self._queue = deque()

    def configure(self, calibration: Calibration, settings: AngularVelocitySettings,
                  keep_warm_start: bool = True) -> None:
        """New calibration/settings; the warm start carries over when keep_warm_start."""
        previous = self.estimator
        self.estimator = AngularVelocityEstimator(calibration, settings)
        if keep_warm_start and not self.estimator.degenerate_reason:
            self.estimator.previous = previous.previous

    def reset(self) -> None:
        self.estimator.reset()

    def estimate(self, events: Events, images: bool = False) -> WorkerResult:
        return _estimate(self.estimator, events, images)

    # the pipelined interface of EstimatorProcess: one window queued, estimated by collect()
    _queue: deque

    @property
    def in_flight(self) -> int:
        return len(self._queue)

    def can_submit(self) -> bool:
        return not self._queue

    def fits(self, count: int) -> bool:
        return True

    def submit(self, events: Events, images: bool = False, skippable: bool = False) -> int:
        self._queue.append((events, images))
        return 0

    def collect(self, timeout_s: float | None = None) -> WorkerResult | None:
        if not self._queue:
            return None
        events, images = self._queue[0]
        try:
            return self.estimate(events, images)
        finally:
            self._queue.popleft()

    def close(self) -> None:
        pass


class EstimatorProcess:
    """The estimator in a subprocess (module docstring).

    calibration, settings: as for AngularVelocityEstimator (checked here first, so that a bad
    combination raises ValueError in the caller, not in the worker); capacity_events: initial
    size of each shared slot (grown on demand); start_timeout_s: how long the worker may take
    to import and compile (Numba cache) before it counts as dead.

    Blocking use: ``estimate(events)``. Pipelined use (the node): ``submit(events)`` from any
    thread queues a window in one of ``SLOTS`` shared slots and returns at once (the worker
    starts on it as soon as it is free, without waiting for the caller); ``collect()`` from
    one thread returns the results in order. With ``skippable`` the worker skips a queued
    window when a newer one is already queued behind it (``collect`` then returns a result
    whose ``estimate`` is None: the window was dropped). Control calls (``configure``,
    ``reset``, ``restart``) belong to the collecting thread.
    """

    SLOTS = 3

    def __init__(self, calibration: Calibration, settings: AngularVelocitySettings, *,
                 capacity_events: int = 60_000, start_timeout_s: float = 120.0):
        AngularVelocityEstimator(calibration, settings)  # raises ValueError on a bad combination
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
        os.close(child_read)
        os.close(child_write)
        self._connection = _Duplex(parent_read, parent_write)
        self._free_slots = list(range(self.SLOTS))
        self._in_flight.clear()
        self._results.clear()
        self._call(("attach", self._memory.name, self._capacity, self.SLOTS), self.start_timeout_s)
        self._call(("configure", self._calibration, self._settings, False), self.start_timeout_s)

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

    def configure(self, calibration: Calibration, settings: AngularVelocitySettings,
                  keep_warm_start: bool = True) -> None:
        """New calibration/settings; the warm start carries over when keep_warm_start.
        Raises ValueError for settings the estimator refuses (nothing changes then)."""
        AngularVelocityEstimator(calibration, settings)
        self._calibration, self._settings = calibration, settings
        self._call(("configure", calibration, settings, keep_warm_start), self.start_timeout_s)

    def reset(self) -> None:
        """Forget the warm start (for the windows submitted after this call)."""
        self._call(("reset",))

    def can_submit(self) -> bool:
        return bool(self._free_slots)

    def submit(self, events: Events, images: bool = False, skippable: bool = False) -> int:
        """Queue one window (events in time order) for the worker; returns its token.
        Needs a free slot (``can_submit()``)."""
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
        self._send(("estimate", slot, count, images, skippable, token))
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

    def estimate(self, events: Events, images: bool = False) -> WorkerResult:
        """Estimate one window in the worker and wait for it."""
        while self._in_flight:
            self.collect()
        self.submit(events, images)
        return self.collect()


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
    try:  # OpenCV (the spatial losses' filters) on one thread too: small images, busy cores
        import cv2
        cv2.setNumThreads(1)
    except ImportError:
        pass
    connection = _Duplex(read_fd, write_fd)
    memory = None
    estimator: AngularVelocityEstimator | None = None
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
        kind = command[0]
        try:
            if kind == "stop":
                break
            if kind == "attach":
                if memory is not None:
                    memory.close()
                memory = _attach(command[1])
                capacity = command[2]
                reply = ("ok",)
            elif kind == "configure":
                _, calibration, settings, keep_warm_start = command
                previous = estimator
                estimator = AngularVelocityEstimator(calibration, settings)
                if keep_warm_start and previous is not None and not estimator.degenerate_reason:
                    estimator.previous = previous.previous
                reply = ("ok",)
            elif kind == "reset":
                estimator.reset()
                reply = ("ok",)
            elif kind == "estimate":
                _, slot, count, images, skippable, token = command
                if skippable and queued and queued[0][0] == "estimate":
                    reply = ("skipped", token)
                else:
                    x, y, t, p = _views(memory.buf, capacity, slot)
                    # views, no copies: the parent reuses a slot only after its answer, and the
                    # estimator keeps nothing of a window's arrays (set_events copies what it needs)
                    events = Events(x[:count], y[:count], t[:count], p[:count])
                    reply = ("result", token, _estimate(estimator, events, images))
            else:
                reply = ("error", f"unknown command {kind!r}")
        except Exception as error:  # noqa: BLE001 - reported to the parent, the worker carries on
            text = f"{type(error).__name__}: {error}"
            reply = ("failed", command[-1], text) if kind == "estimate" else ("error", text)
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
