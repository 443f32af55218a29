"""Tests never leave processes behind, whatever fails, and two test runs never share a ROS
domain (test/ros_harness.py, test/conftest.py).

A pytest run in a subprocess starts a long-lived process with NodeProcess the way the ROS
tests do, then fails, or is killed; afterwards that process must be gone.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

TEST_DIR = Path(__file__).resolve().parent

INNER = '''
import sys, time
from pathlib import Path
from ros_harness import NodeProcess

PIDS = Path({pids!r})

def start(tmp_path):
    process = NodeProcess([sys.executable, "-c", "import time; time.sleep(120)"], {{}}, tmp_path / "log")
    with PIDS.open("a") as handle:
        handle.write(f"{{process.process.pid}}\\n")
    return process

def test_fails_with_a_process_running(tmp_path):
    start(tmp_path)
    assert False, "this test fails on purpose"

def test_next_test_finds_it_stopped(tmp_path):
    import os
    pid = int(PIDS.read_text().split()[0])
    time.sleep(0.2)
    assert not alive(pid)

def test_killed_while_a_process_runs(tmp_path):
    start(tmp_path)
    time.sleep(120)

def alive(pid):
    try:
        import os
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    status = Path(f"/proc/{{pid}}/stat").read_text().split()[2]
    return status != "Z"
'''


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return not stat.exists() or stat.read_text().split()[2] != "Z"


def run_inner(tmp_path, selection, **popen):
    pids = tmp_path / "pids.txt"
    (tmp_path / "test_inner.py").write_text(textwrap.dedent(INNER.format(pids=str(pids))))
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}  # colcon test passes its own
    env["PYTHONPATH"] = os.pathsep.join([str(TEST_DIR), os.environ.get("PYTHONPATH", "")])
    command = [sys.executable, "-m", "pytest", "-q", "-p", "conftest", "-p", "no:cacheprovider",
               "--rootdir", str(tmp_path), "--basetemp", str(tmp_path / "base"), str(tmp_path / "test_inner.py"),
               "-k", selection]
    return pids, subprocess.Popen(command, env=env, cwd=tmp_path, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True, **popen)


def test_a_failing_test_leaves_no_process(tmp_path):
    pids, run = run_inner(tmp_path, "fails_with or finds_it_stopped")
    output, _ = run.communicate(timeout=120)
    assert "1 failed, 1 passed" in output, output
    assert "this test fails on purpose" in output
    pid = int(pids.read_text().split()[0])
    assert not alive(pid)


def test_a_killed_test_run_leaves_no_process(tmp_path):
    pids, run = run_inner(tmp_path, "killed_while")
    try:
        deadline = time.monotonic() + 60
        while not (pids.exists() and pids.read_text().strip()) and time.monotonic() < deadline:
            time.sleep(0.1)
        pid = int(pids.read_text().split()[0])
        assert alive(pid)
        run.send_signal(signal.SIGKILL)   # no teardown, no atexit: only the kernel can clean up
        run.wait(timeout=30)
        deadline = time.monotonic() + 10
        while alive(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not alive(pid), f"process {pid} outlived the killed test run"
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()


def test_two_test_runs_at_once_get_different_ros_domains():
    """Each test process reserves its own ROS domain IDs (locks held while it lives): a second
    process running at the same time gets none of this one's, and every environment this
    process hands out is on one of its own."""
    sys.path.insert(0, str(TEST_DIR))
    import ros_harness

    mine = set(ros_harness._reserved_domains())
    handed_out = {int(ros_harness.ros_environment()["ROS_DOMAIN_ID"]) for _ in range(3 * len(mine))}
    other = subprocess.run([sys.executable, "-c", "import ros_harness; print(*ros_harness._reserved_domains())"],
                           cwd=TEST_DIR, capture_output=True, text=True, timeout=60, check=True).stdout.split()
    assert len(mine) == ros_harness._DOMAINS_PER_PROCESS and handed_out == mine
    assert len(other) == ros_harness._DOMAINS_PER_PROCESS and not mine & {int(domain) for domain in other}
