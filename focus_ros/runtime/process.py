"""The estimator in a process of its own, fed through shared memory.

Why: inside a ROS node the estimator shares the interpreter with the executor thread that
takes, decodes and windows about a thousand event messages a second. The optimizer's
Python steps (line search, BFGS update, loss bookkeeping between the GIL-free Numba
kernels) then wait for the GIL while that thread runs Python (CPython hands it over every
switch interval, 5 ms by default). In a process of its own the estimator runs exactly the
offline code on its own interpreter, whatever the executor does (measurements: BENCHMARKS.md,
"The node through ROS 2").

:class:`EstimatorProcess` starts ``python -m focus_ros.runtime._worker_main`` (a plain
subprocess of the same interpreter: nothing of the parent, rclpy included, is imported
there), writes each job's events into one of three shared-memory slots (grown when a larger
job comes) and exchanges pickled commands and results over a pair of pipes (the protocol, and
why it cannot deadlock: :mod:`focus_ros.runtime._channel`). Jobs can be queued from one thread
(``submit``, which never waits for the worker) while another collects the results
(``collect``), so the estimator starts on the next job without waiting for the collecting thread.

A worker that dies (killed, out of memory) raises :class:`WorkerDied` from the call that
noticed it; ``restart()`` starts a fresh one with the last configuration (the warm start
is lost, as after a gap). Every wait is bounded: ``close()`` ends a worker that does not
answer (hung, stopped) by killing it, a ``cancelled`` event ends a start or a control call
that waits (the node is stopping), and a worker whose parent died exits by itself
(:mod:`focus_ros.runtime._worker_main`).
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
import weakref
from collections import deque
from multiprocessing import shared_memory

from focus_ros.camera import Calibration
from focus_ros.events import Events
from focus_ros.runtime._channel import BYTES_PER_EVENT, ParentEnd, slot_views
from focus_ros.runtime.cpus import format_cpu_list
from focus_ros.runtime.kinds import WorkerResult, kind_named

#: the module the worker process runs (``python -m``)
_WORKER_MODULE = "focus_ros.runtime._worker_main"


class WorkerDied(RuntimeError):
    """The estimator process ended or stopped answering."""


class EstimatorProcess:
    """The estimator in a subprocess (module docstring).

    calibration, settings: as for the kind's estimator (checked here first, so that a bad
    combination raises ValueError in the caller, not in the worker); kind: a name of
    :data:`~focus_ros.runtime.kinds.KINDS`; capacity_events: initial size of each shared slot
    (grown on demand); start_timeout_s: how long the worker may take to import, compile (Numba
    cache) and warm up before it counts as dead; cpus: CPU numbers the worker runs on
    (:func:`~focus_ros.runtime.cpus.parse_cpu_list`; empty = wherever the OS puts it), kept
    across restarts; when the OS refuses them the worker runs unpinned and ``pinning_error``
    says why; cancelled: once set (by another thread: the owner is stopping), a start or a
    control call still waiting for the worker raises :class:`WorkerDied` within half a second
    (a start cancelled so ends its worker).

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
                 capacity_events: int = 60_000, start_timeout_s: float = 120.0, cpus=frozenset(),
                 cancelled: threading.Event | None = None):
        self.kind = kind_named(kind)
        self._check(calibration, settings)  # raises ValueError on a bad combination
        self.cpus = frozenset(cpus)
        self._calibration, self._settings = calibration, settings
        self.start_timeout_s = float(start_timeout_s)
        self.restarts = 0
        self._cancelled = cancelled if cancelled is not None else threading.Event()
        self._process: subprocess.Popen | None = None
        self._connection: ParentEnd | None = None
        self._memory: shared_memory.SharedMemory | None = None
        self._capacity = 0
        self._state_lock = threading.Lock()  # slots and tokens: submit() and collect() may run in two threads
        self._free_slots: list[int] = []
        self._in_flight: dict[int, int] = {}  # token -> slot
        self._results: deque = deque()         # results read while waiting for a control answer
        self._next_token = 0
        self._allocate(max(int(capacity_events), 1))
        try:
            self._start()
        except BaseException:  # cancelled, timed out or refused: nothing of it stays behind
            self.close(timeout_s=0.0 if self._cancelled.is_set() else 1.0)
            raise

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

    def ended(self) -> WorkerDied | None:
        """A :class:`WorkerDied` saying how the worker ended, when it has (killed, exited); None
        while it runs. For a watcher that looks between jobs, when no call would notice."""
        if self._process is None or self._process.poll() is None:
            return None
        return WorkerDied(self._death_text())

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
            [sys.executable, "-m", _WORKER_MODULE, str(child_read), str(child_write)],
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
        self._connection = ParentEnd(parent_read, parent_write, name=f"estimator_{self._process.pid}")
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
        """Kill the worker if it still runs, reap it, then end the pipe threads (which end
        because the worker's end of the pipes is gone)."""
        if self._process is not None:
            if self._process.poll() is None:
                self._process.kill()
            try:
                self._process.wait(timeout=2.0)
            except subprocess.TimeoutExpired:  # not reaped (uninterruptible sleep): its pipes are still closed
                pass
            self._process = None
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    def close(self, timeout_s: float = 1.0) -> None:
        """Stop the worker and free the shared block: asked to stop, killed when it has not
        ended within ``timeout_s`` (s: busy with a long job, hung, stopped). Returns within
        about ``timeout_s`` + 2 s whatever the worker does."""
        if self._connection is not None and self.alive():
            try:
                self._connection.send(("stop",))
                self._process.wait(timeout=timeout_s)
            except (OSError, subprocess.TimeoutExpired):
                pass
        self._stop_process()
        if self._memory is not None:
            self._release_memory()

    # ----------------------------------------------------------------- commands
    def _send(self, command: tuple) -> None:
        """Queue a command for the worker (never waits for it); WorkerDied when it is gone."""
        connection = self._connection
        if connection is None or not self.alive():
            raise WorkerDied(self._death_text())
        try:
            connection.send(command)
        except OSError as error:
            raise WorkerDied(self._death_text(error)) from None

    def _receive(self, timeout_s: float | None):
        """The worker's next answer, or None after timeout_s; WorkerDied when it is gone, or
        when ``cancelled`` is set while waiting."""
        connection = self._connection
        if connection is None:
            raise WorkerDied(self._death_text())
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        try:
            while True:
                left = 0.5 if deadline is None else min(0.5, deadline - time.monotonic())
                reply = connection.receive(left)
                if reply is not None:
                    return reply
                if self._cancelled.is_set():
                    raise WorkerDied(f"estimator process (pid {self.pid}) not waited for: stopping")
                if not self.alive():
                    raise WorkerDied(self._death_text())
                if deadline is not None and time.monotonic() >= deadline:
                    return None
        except EOFError as error:
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
        if code is None:  # it has not ended: the pipe's error is all there is to say
            how = "still running" + (f"; {error}" if str(error or "") else "")
        else:  # how it ended says it all (the pipe error a kill causes depends on the moment it is noticed)
            how = f"killed by signal {-code}" if code < 0 else f"exit code {code}"
        return f"estimator process (pid {self.pid}) stopped ({how})"

    def _check(self, calibration: Calibration, settings) -> None:
        """ValueError naming the problem when the kind's estimator refuses these settings
        (the light estimators are built here for that, not warmed up: nothing compiles in the
        caller's process; depth checks its settings when made)."""
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
        x, y, t, p = slot_views(self._memory.buf, self._capacity, slot)
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


def _unlink(memory: shared_memory.SharedMemory) -> None:
    """Unmap and remove the shared block (nothing to do when already gone)."""
    try:
        memory.close()
        memory.unlink()
    except (OSError, BufferError):
        pass
