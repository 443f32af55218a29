"""The worker process of :class:`~focus_ros.runtime.EstimatorProcess`, started as
``python -m focus_ros.runtime._worker_main READ_FD WRITE_FD`` (a plain subprocess of the
same interpreter: nothing of the parent, rclpy included, is imported here). It answers the
commands of :mod:`focus_ros.runtime._channel` in order until "stop" or the parent goes away.

A parent that dies without a word (SIGKILL, a crash) may leave this process in the middle of a
long job, where it would not read the closed pipe for a while: a watchdog thread ends it within
:data:`PARENT_CHECK_PERIOD_S` of its parent's death (no orphan holding a core and the shared block).
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections import deque
from multiprocessing import shared_memory

from focus_ros.events import Events
from focus_ros.runtime._channel import Duplex, slot_views
from focus_ros.runtime.kinds import EstimatorKind, configured_estimator, forget_warm_start, kind_named, run_job


#: how often (s) the watchdog looks whether the parent process is still there
PARENT_CHECK_PERIOD_S = 0.5


def end_with_parent(parent_pid: int) -> None:
    """Exit this process at once when ``parent_pid`` is no longer its parent (it died: this process
    was handed to init or a subreaper). Runs in a daemon thread."""
    while os.getppid() == parent_pid:
        time.sleep(PARENT_CHECK_PERIOD_S)
    os._exit(0)


def serve(read_fd: int, write_fd: int) -> None:
    """The worker's loop: answer commands in order until "stop" or the parent goes away. An
    estimate marked skippable is skipped (answered "skipped") when a newer estimate is
    already queued behind it with no other command in between."""
    # Ctrl-C reaches the whole process group: the parent decides when this worker ends
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    threading.Thread(target=end_with_parent, args=(os.getppid(),), name="end_with_parent", daemon=True).start()
    try:  # OpenCV (the spatial losses' filters) on one thread too: small images, busy cores
        import cv2
        cv2.setNumThreads(1)
    except ImportError:
        pass
    connection = Duplex(read_fd, write_fd)
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
                estimator = configured_estimator(new_kind, previous, calibration, settings, keep_warm_start)
                kind = new_kind
                reply = ("ok",)
            elif verb == "reset":
                forget_warm_start(estimator)
                reply = ("ok",)
            elif verb == "estimate":
                _, slot, count, images, skippable, extra, token = command
                if skippable and queued and queued[0][0] == "estimate":
                    reply = ("skipped", token)
                else:
                    x, y, t, p = slot_views(memory.buf, capacity, slot)
                    # views, no copies: the parent reuses a slot only after its answer, and the
                    # estimators keep nothing of a job's arrays (they copy what they need)
                    events = Events(x[:count], y[:count], t[:count], p[:count])
                    reply = ("result", token, run_job(kind, estimator, events, extra, images))
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
    serve(int(sys.argv[1]), int(sys.argv[2]))
