"""The angular-velocity estimator in a process of its own, fed through shared memory.

Why: inside a ROS node the estimator shares the interpreter with the executor thread that
takes, decodes and windows about a thousand event messages a second. The optimizer's
Python steps (line search, BFGS update, loss bookkeeping between the GIL-free Numba
kernels) then wait for the GIL while that thread runs Python, and CPython hands the GIL
over only every switch interval (5 ms): measured in the node, the estimator's time per
window was 5-10x its offline time (BENCHMARKS.md, "Estimator inside the node"). In a
process of its own the estimator runs exactly the offline code, on its own interpreter.

:class:`EstimatorProcess` starts ``python -m focus_ros.estimators.worker`` (a plain
subprocess of the same interpreter: nothing of the parent, rclpy included, is imported
there), writes each window's events into a shared-memory block (x, y, t, p arrays; grown
when a larger window comes) and exchanges small pickled commands and results over a pipe.
:class:`InlineEstimator` has the same interface and runs in the calling thread (for
comparison and for callers that want no process). Both give identical estimates for the
same windows (same code, same inputs; tested).

A worker that dies (killed, out of memory) raises :class:`WorkerDied` from the call that
noticed it; ``restart()`` starts a fresh one with the last configuration (the warm start
is lost, as after a gap). Neither class imports rclpy.
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import time
import weakref
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
    """One window's estimate, the estimator's own time for it (s, measured where it ran)
    and, when asked, the IWE before and after compensation (float64 (height, width))."""

    estimate: WindowEstimate
    estimator_s: float
    images: tuple | None = None


def _estimate(estimator: AngularVelocityEstimator, events: Events, images: bool) -> WorkerResult:
    started = time.perf_counter()
    estimate = estimator.estimate(events)
    elapsed = time.perf_counter() - started
    pictures = None
    if images and not estimate.degenerate:
        objective = estimator.objective  # still holds this window
        pictures = (objective.image(np.zeros(3)).image, objective.image(estimate.angular_velocity).image)
    return WorkerResult(estimate, elapsed, pictures)


class InlineEstimator:
    """The estimator in the calling thread, with :class:`EstimatorProcess`'s interface."""

    pid = None
    restarts = 0

    def __init__(self, calibration: Calibration, settings: AngularVelocitySettings):
        self.estimator = AngularVelocityEstimator(calibration, settings)

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

    def close(self) -> None:
        pass


class EstimatorProcess:
    """The estimator in a subprocess (module docstring).

    calibration, settings: as for AngularVelocityEstimator (checked here first, so that a bad
    combination raises ValueError in the caller, not in the worker); capacity_events: initial
    size of the shared block (grown on demand); start_timeout_s: how long the worker may take
    to import and compile (Numba cache) before it counts as dead.
    """

    def __init__(self, calibration: Calibration, settings: AngularVelocitySettings, *,
                 capacity_events: int = 60_000, start_timeout_s: float = 120.0):
        AngularVelocityEstimator(calibration, settings)  # raises ValueError on a bad combination
        self._calibration, self._settings = calibration, settings
        self.start_timeout_s = float(start_timeout_s)
        self.restarts = 0
        self._process: subprocess.Popen | None = None
        self._connection: Connection | None = None
        self._memory: shared_memory.SharedMemory | None = None
        self._capacity = 0
        self._allocate(max(int(capacity_events), 1))
        self._start()

    # ----------------------------------------------------------------- life cycle
    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    def alive(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def _allocate(self, capacity: int) -> None:
        if self._memory is not None:
            self._release_memory()
        self._memory = shared_memory.SharedMemory(create=True, size=capacity * BYTES_PER_EVENT)
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
        environment = dict(os.environ, PYTHONUNBUFFERED="1")
        self._process = subprocess.Popen(
            [sys.executable, "-m", "focus_ros.estimators.worker", str(child_read), str(child_write)],
            pass_fds=(child_read, child_write), env=environment, stdin=subprocess.DEVNULL)
        os.close(child_read)
        os.close(child_write)
        self._connection = _Duplex(parent_read, parent_write)
        self._call(("attach", self._memory.name, self._capacity), self.start_timeout_s)
        self._call(("configure", self._calibration, self._settings, False), self.start_timeout_s)

    def restart(self) -> None:
        """Start a fresh worker with the last configuration (after WorkerDied)."""
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
                self._connection.send(("stop",))
                self._process.wait(timeout=5.0)
            except (OSError, subprocess.TimeoutExpired):
                pass
        self._stop_process()
        if self._memory is not None:
            self._release_memory()

    # ----------------------------------------------------------------- commands
    def _call(self, command: tuple, timeout_s: float | None = None):
        """Send a command, wait for its answer; WorkerDied when the worker is gone."""
        connection = self._connection
        if connection is None or not self.alive():
            raise WorkerDied(self._death_text())
        try:
            connection.send(command)
            deadline = None if timeout_s is None else time.monotonic() + timeout_s
            while not connection.poll(0.5):
                if not self.alive():
                    raise WorkerDied(self._death_text())
                if deadline is not None and time.monotonic() > deadline:
                    self._process.kill()
                    raise WorkerDied(f"estimator process (pid {self.pid}) did not answer '{command[0]}' "
                                     f"within {timeout_s:.0f} s")
            reply = connection.recv()
        except (EOFError, OSError) as error:
            raise WorkerDied(self._death_text(error)) from None
        if reply[0] == "error":
            raise ValueError(reply[1])
        return reply[1] if len(reply) > 1 else None

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
        """Forget the warm start."""
        self._call(("reset",))

    def estimate(self, events: Events, images: bool = False) -> WorkerResult:
        """Estimate one window (events in time order) in the worker."""
        count = len(events)
        if count > self._capacity:
            self._allocate(max(count, 2 * self._capacity))
            self._call(("attach", self._memory.name, self._capacity))
        x, y, t, p = _views(self._memory.buf, self._capacity)
        x[:count], y[:count], t[:count], p[:count] = events.x, events.y, events.t, events.p
        return self._call(("estimate", count, images))


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


def _views(buffer, capacity: int):
    """x, y, t, p arrays over the shared block (t first: 8-byte aligned)."""
    t = np.ndarray(capacity, np.int64, buffer, 0)
    x = np.ndarray(capacity, np.uint16, buffer, 8 * capacity)
    y = np.ndarray(capacity, np.uint16, buffer, 10 * capacity)
    p = np.ndarray(capacity, np.int8, buffer, 12 * capacity)
    return x, y, t, p


def serve(read_fd: int, write_fd: int) -> None:
    """The worker's loop: answer commands until "stop" or the parent goes away."""
    connection = _Duplex(read_fd, write_fd)
    memory = None
    estimator: AngularVelocityEstimator | None = None
    capacity = 0
    while True:
        try:
            command = connection.recv()
        except (EOFError, OSError):
            break  # the parent is gone
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
                _, count, images = command
                x, y, t, p = _views(memory.buf, capacity)
                # views, no copies: the parent writes the next window only after this answer, and
                # the estimator keeps nothing of a window's arrays (set_events copies what it needs)
                events = Events(x[:count], y[:count], t[:count], p[:count])
                reply = ("result", _estimate(estimator, events, images))
            else:
                reply = ("error", f"unknown command {kind!r}")
        except Exception as error:  # noqa: BLE001 - reported to the parent, the worker carries on
            reply = ("error", f"{type(error).__name__}: {error}")
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
