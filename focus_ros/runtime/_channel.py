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
"""

from __future__ import annotations

import pickle
from multiprocessing.connection import Connection

import numpy as np

#: bytes per event in the shared block: x, y (uint16), t (int64), p (int8)
BYTES_PER_EVENT = 2 + 2 + 8 + 1


class Duplex:
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


def slot_views(buffer, capacity: int, slot: int):
    """x, y, t, p arrays of one slot of the shared block (t first: 8-byte aligned); each slot
    holds ``capacity`` events."""
    base = slot * capacity * BYTES_PER_EVENT
    t = np.ndarray(capacity, np.int64, buffer, base)
    x = np.ndarray(capacity, np.uint16, buffer, base + 8 * capacity)
    y = np.ndarray(capacity, np.uint16, buffer, base + 10 * capacity)
    p = np.ndarray(capacity, np.int8, buffer, base + 12 * capacity)
    return x, y, t, p
