"""What the parent (:class:`~focus_ros.runtime.EstimatorProcess`) and its worker process
(:mod:`focus_ros.runtime._worker_main`) share: the layout of the shared-memory slots and the pipe.

A job's events travel through one of the slots of a shared block (x, y, t, p arrays, never
pickled: a depth keyframe has a million events); commands, the job's small extra input and
the results travel pickled over a pair of pipes. Commands (parent -> worker) and answers,
one answer per command except "stop", in order:

- ``("attach", block name, capacity_events, slots)`` -> ``("ok",)``
- ``("configure", kind name, calibration, settings, keep_warm_start)`` -> ``("ok",)``
- ``("reset",)`` -> ``("ok",)``
- ``("estimate", slot, count, images, skippable, extra, token)`` -> ``("result", token, WorkerResult)``,
  ``("skipped", token)`` (a newer estimate queued behind it) or ``("failed", token, text)``
- ``("stop",)`` -> no answer: the worker ends
- a control command that raises, or an unknown one -> ``("error", text)``

Why it cannot deadlock: a pipe holds 64 kB, and commands (a depth keyframe's trajectory
segment) and answers (depth maps, clouds, pictures) are often larger, so a writer blocks until
the other side reads. The worker writes only after it has read a command and reads only between
jobs; if the parent also wrote only when it was not reading, a large answer crossing a large
command would leave each side waiting for the other, forever (issue 30: the depth node and its
worker, both pipes full). The parent's end (:class:`ParentEnd`) therefore never does pipe I/O in
its callers' threads: a reader thread takes every answer as soon as the worker writes it, so
the worker's writes always complete, and a writer thread sends the queued commands, so a caller
(a node's executor thread) never waits for the worker to read. The worker's writes then never
wait on the parent, and the parent's writes wait only on a worker that is busy or stopped,
in a thread of their own: no cycle of waits exists, whatever the sizes and the timing.
"""

from __future__ import annotations

import pickle
import queue
import threading
from multiprocessing.connection import Connection

import numpy as np

#: bytes per event in the shared block: x, y (uint16), t (int64), p (int8)
BYTES_PER_EVENT = 2 + 2 + 8 + 1


class Duplex:
    """The worker's end: reads from one pipe end and writes to another, with pickled,
    length-prefixed messages, in the calling thread (the parent reads every answer at once:
    :class:`ParentEnd`)."""

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


class ParentEnd:
    """The parent's end of the pipes (module docstring: why): :meth:`send` queues a command for
    the writer thread and returns at once; the reader thread puts every answer in a queue that
    :meth:`receive` takes from. Once the worker's end is gone (it ended, or was killed) the
    reader ends, :meth:`receive` raises EOFError after the answers that came before, and
    :meth:`send` raises OSError. :meth:`close` only after the worker has ended (it joins the
    threads, which end when the worker's end of the pipes closes)."""

    def __init__(self, read_fd: int, write_fd: int, name: str = "worker"):
        self._reader = Connection(read_fd, writable=False)
        self._writer = Connection(write_fd, readable=False)
        self._outbox: queue.SimpleQueue = queue.SimpleQueue()   # pickled commands; None ends the writer
        self._answers: queue.SimpleQueue = queue.SimpleQueue()  # answers; _CLOSED after the last one
        self.broken = ""  # why the pipe to the worker broke ("" while it works)
        self._threads = [threading.Thread(target=self._read, name=f"{name}_answers", daemon=True),
                         threading.Thread(target=self._write, name=f"{name}_commands", daemon=True)]
        for thread in self._threads:
            thread.start()

    def send(self, obj) -> None:
        """Queue one command (pickled here, written by the writer thread); OSError when the pipe broke."""
        if self.broken:
            raise OSError(self.broken)
        self._outbox.put(pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL))

    def receive(self, timeout_s: float):
        """The next answer, or None after timeout_s (s); EOFError once the worker's end is gone
        and every answer before has been taken."""
        try:
            answer = self._answers.get(timeout=max(timeout_s, 0.0))
        except queue.Empty:
            return None
        if answer is _CLOSED:
            self._answers.put(_CLOSED)  # every later call says so too
            raise EOFError("the estimator process closed its pipe")
        return answer

    def close(self, timeout_s: float = 1.0) -> None:
        """End the threads (after the worker has ended) and close the pipes."""
        self._outbox.put(None)
        for thread in self._threads:
            thread.join(timeout_s)
        if not any(thread.is_alive() for thread in self._threads):  # a live thread may still use them
            self._reader.close()
            self._writer.close()

    def _read(self) -> None:
        try:
            while True:
                self._answers.put(pickle.loads(self._reader.recv_bytes()))
        except (EOFError, OSError):
            pass
        finally:
            self._answers.put(_CLOSED)

    def _write(self) -> None:
        while (data := self._outbox.get()) is not None:
            try:
                self._writer.send_bytes(data)
            except OSError as error:
                self.broken = f"the estimator process's pipe broke ({error.strerror or error})"
                return


#: the reader thread's last answer: the worker's end of the pipe is gone
_CLOSED = object()


def slot_views(buffer, capacity: int, slot: int):
    """x, y, t, p arrays of one slot of the shared block (t first: 8-byte aligned); each slot
    holds ``capacity`` events."""
    base = slot * capacity * BYTES_PER_EVENT
    t = np.ndarray(capacity, np.int64, buffer, base)
    x = np.ndarray(capacity, np.uint16, buffer, base + 8 * capacity)
    y = np.ndarray(capacity, np.uint16, buffer, base + 10 * capacity)
    p = np.ndarray(capacity, np.int8, buffer, base + 12 * capacity)
    return x, y, t, p
