"""The parent-worker protocol cannot deadlock and never makes its caller wait for the worker.

Issue 30's crossing: the worker writes a large result while the parent writes the next job's
large command; with both pipes full, each side waited for the other to read. These tests force
that crossing with the real worker process (the angular velocity kind, its pictures asked for:
two float64 IWEs, 690 kB; each job's ``extra`` a 1 MB array, pickled through the pipe: both far
beyond a pipe's 64 kB buffer), and with a worker slowed on purpose (stopped with SIGSTOP while
jobs are submitted).
"""

from __future__ import annotations

import os
import signal
import threading
import time

import numpy as np
import pytest

from conftest import slice_events
from focus_ros.camera import Calibration
from focus_ros.estimators.angular_velocity import real_time_settings
from focus_ros.runtime import EstimatorProcess

#: bytes a pipe holds on Linux before a writer blocks
PIPE_BUFFER_BYTES = 64 * 1024
#: an extra far larger than the pipe's buffer (the depth kind's extra is a trajectory segment)
LARGE_EXTRA = np.arange(1_000_000 // 8, dtype=np.float64)


@pytest.fixture(scope="module")
def window():
    return slice_events("boxes_rotation")[:5000]


@pytest.fixture
def worker():
    process = EstimatorProcess(Calibration.davis240c(), real_time_settings(), capacity_events=5000)
    yield process
    process.close()


def call_within(seconds: float, function, *args, **kwargs):
    """function(*args, **kwargs) in a thread; fails the test when it has not returned within
    ``seconds`` (a hang), else returns its result or re-raises its exception."""
    outcome = {}

    def call():
        try:
            outcome["value"] = function(*args, **kwargs)
        except BaseException as error:  # noqa: BLE001 - handed to the test
            outcome["error"] = error

    thread = threading.Thread(target=call, daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        pytest.fail(f"{getattr(function, '__name__', function)} did not return within {seconds} s: hung")
    if "error" in outcome:
        raise outcome["error"]
    return outcome.get("value")


def test_results_and_extras_are_larger_than_a_pipe(worker, window):
    """The premise of the crossing: what each side writes does not fit the pipe."""
    import pickle
    result = worker.estimate(window, images=True, extra=LARGE_EXTRA)
    assert len(pickle.dumps(result)) > 4 * PIPE_BUFFER_BYTES
    assert len(pickle.dumps(LARGE_EXTRA)) > 4 * PIPE_BUFFER_BYTES


def test_two_large_jobs_crossing_with_large_results_never_hang(worker, window):
    """200 crossings: job A submitted; after a pause of 0-40 ms (random, so that the worker is
    sometimes still estimating, sometimes writing A's large result) job B with its large
    extra; both results collected. Every submit returns within 1 s (it never waits for the
    worker) and every result comes within 10 s. On the protocol before issue 30, B's submit
    blocked in the pipe while the worker blocked writing A's result: forever."""
    generator = np.random.default_rng(30)
    for crossing in range(200):
        call_within(1.0, worker.submit, window, images=True, extra=LARGE_EXTRA)
        time.sleep(generator.uniform(0.0, 0.04))
        call_within(1.0, worker.submit, window, images=True, extra=LARGE_EXTRA)
        for _ in range(2):
            result = call_within(10.0, worker.collect, 10.0)
            assert result is not None, f"crossing {crossing}: no result within 10 s"
            assert result.images is not None and result.estimate is not None
        assert worker.in_flight == 0


def test_a_stopped_worker_does_not_block_the_caller(worker, window):
    """The worker slowed on purpose (SIGSTOP) while two jobs with large extras are submitted and
    a control command is queued behind them: the submits return at once (the caller, a node's
    executor thread, never waits for the worker); once it runs again every answer comes, in
    order."""
    os.kill(worker.pid, signal.SIGSTOP)
    try:
        started = time.monotonic()
        tokens = [call_within(1.0, worker.submit, window, images=True, extra=LARGE_EXTRA) for _ in range(2)]
        assert time.monotonic() - started < 1.0
        assert tokens == sorted(tokens) and worker.in_flight == 2
    finally:
        os.kill(worker.pid, signal.SIGCONT)
    results = [call_within(20.0, worker.collect, 20.0) for _ in range(2)]
    assert all(result is not None and result.images is not None for result in results)
    call_within(10.0, worker.reset)  # control answers still come after the results


def test_close_ends_a_stopped_worker_within_seconds(window):
    """A worker that never answers again (stopped, with a large job half-written to it) is
    ended by close() within a few seconds, and nothing of it is left."""
    process = EstimatorProcess(Calibration.davis240c(), real_time_settings(), capacity_events=5000)
    pid = process.pid
    os.kill(pid, signal.SIGSTOP)
    process.submit(window, images=True, extra=LARGE_EXTRA)
    started = time.monotonic()
    call_within(5.0, process.close)
    assert time.monotonic() - started < 3.0
    assert not _alive(pid)


def test_the_worker_ends_by_itself_when_its_parent_is_killed(tmp_path):
    """A parent that dies by SIGKILL (no close(), no cleanup) leaves no worker behind: it notices
    within a few seconds and exits."""
    import subprocess
    import sys
    script = tmp_path / "parent.py"
    script.write_text(
        "import sys, time\n"
        "from focus_ros.camera import Calibration\n"
        "from focus_ros.estimators.angular_velocity import real_time_settings\n"
        "from focus_ros.runtime import EstimatorProcess\n"
        "process = EstimatorProcess(Calibration.davis240c(), real_time_settings(), capacity_events=1000)\n"
        "print(process.pid, flush=True)\n"
        "time.sleep(120)\n")
    parent = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    try:
        worker_pid = int(parent.stdout.readline())
        assert _alive(worker_pid)
        parent.kill()
        parent.wait()
        deadline = time.monotonic() + 5.0
        while _alive(worker_pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _alive(worker_pid), "the worker outlived its killed parent by 5 s"
    finally:
        parent.kill()


def _alive(pid: int) -> bool:
    """The process exists and is not a zombie waiting to be reaped."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False
