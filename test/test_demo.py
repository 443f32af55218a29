"""`make demo` fails in one line and leaves no process behind, whatever the node does (issue 30).

Real processes throughout, no mocks: real nodes started by the demo's own session helper
(focus_ros.ros.demos.session.node_and_replayer), one made to hang with SIGSTOP (a stopped
process acts on no signal but SIGKILL: the worst a node can do to its stopper); a command
that ignores SIGINT and SIGTERM with a child that leaves its session
(focus_ros.ros.demos.processes.NodeProcess); and the demo itself run as `make demo` runs it,
failing or interrupted with Ctrl-C.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from focus_ros.ros.demos import processes
from focus_ros.ros.demos.processes import NodeProcess, still_running
from ros_harness import REPOSITORY_ROOT, executable, ros_environment

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the demo's process handling reads /proc")

#: the most stop() may take on a node that ignores everything but SIGKILL: its two grace periods,
#: the family's grace periods, and a margin for a loaded machine
STOP_BOUND_S = (processes.SIGINT_GRACE_S + processes.SIGTERM_GRACE_S + processes.LEFTOVER_GRACE_S
                + processes.LEFTOVER_TERM_GRACE_S + 3.0)


def wait_for(condition, timeout_s: float, step_s: float = 0.05) -> bool:
    """Poll ``condition()`` until true or ``timeout_s`` (s) passed (for processes: nothing to block on)."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() >= deadline:
            return False
        time.sleep(step_s)
    return True


def angular_velocity_command() -> list[str]:
    return [executable("angular_velocity_node"), "--ros-args", "--params-file",
            str(REPOSITORY_ROOT / "config" / "davis240c.yaml")]


@pytest.fixture
def short_bag(tmp_path):
    """A 0.2-s simulated rotation written as the demo writes it (what the session's replayer opens)."""
    from argparse import Namespace

    from focus_ros.ros.demos import rotation

    bag, _ = rotation.simulate(Namespace(output=tmp_path, duration=0.2, seed=0))
    return bag


def test_the_session_ends_a_hung_node_and_its_worker_and_says_so_in_one_line(tmp_path, short_bag, monkeypatch):
    """The demo's session helper around a real angular_velocity_node whose estimator runs, frozen
    with SIGSTOP, and a part that then raises: the session stops the node anyway (SIGINT and
    SIGTERM do nothing to it, so SIGKILL), its worker and resource trackers with it, within the
    bound, and the part's error and the kill come out as one line."""
    from focus_ros.ros.demos.session import DemoFailure, node_and_replayer

    monkeypatch.setenv("ROS_DOMAIN_ID", ros_environment()["ROS_DOMAIN_ID"])  # the session's domain: the test's
    log = tmp_path / "node.log"
    with pytest.raises(DemoFailure) as failure:
        with node_and_replayer(angular_velocity_command(), log, short_bag, rate=0.0,
                               name="angular_velocity_node") as session:
            session.wait_until_running(timeout_s=45.0)
            node, family = session.node, session.node.family()
            assert any("_worker_main" in info.command for info in family), family
            os.kill(node.pid, signal.SIGSTOP)
            started = time.monotonic()
            raise RuntimeError("the part failed here")
    took = time.monotonic() - started
    assert processes.SIGINT_GRACE_S + processes.SIGTERM_GRACE_S - 0.5 <= took <= STOP_BOUND_S, took
    assert not node.alive() and node.returncode == -signal.SIGKILL
    left = [info for info in family if still_running(info)]
    assert not left, left
    line = str(failure.value)
    assert "\n" not in line
    assert line.startswith("RuntimeError: the part failed here; angular_velocity_node did not stop within 5 s of "
                           "SIGINT and 5 s of SIGTERM: killed (SIGKILL)"), line
    assert failure.value.node_log == log


def test_the_session_stops_a_node_that_stops_on_sigint_and_lets_the_error_through(tmp_path, short_bag, monkeypatch):
    """The usual case: the node ends on SIGINT with its worker and trackers; the part's own error
    comes through unchanged (nothing to add to it) and nothing of the node's is left."""
    from focus_ros.ros.demos.session import node_and_replayer

    monkeypatch.setenv("ROS_DOMAIN_ID", ros_environment()["ROS_DOMAIN_ID"])
    with pytest.raises(RuntimeError, match="^the part failed here$"):
        with node_and_replayer(angular_velocity_command(), tmp_path / "node.log", short_bag, rate=0.0,
                               name="angular_velocity_node") as session:
            session.wait_until_running(timeout_s=45.0)
            node, family = session.node, session.node.family()
            assert any("_worker_main" in info.command for info in family), family
            raise RuntimeError("the part failed here")
    outcome = node.stop()  # the session's: stop() is idempotent
    assert outcome.signal == "SIGINT" and outcome.problem == "", (outcome, node.last_line())
    assert outcome.seconds <= processes.SIGINT_GRACE_S
    assert not [info for info in family if still_running(info)]
    assert "Traceback" not in (tmp_path / "node.log").read_text()


IGNORES_SIGNALS = textwrap.dedent('''
    import os, signal, subprocess, sys, time
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    # a child that leaves the session (setsid) and ignores SIGTERM: only remembering it finds it
    child = subprocess.Popen([sys.executable, "-c", "import signal, time; signal.signal(signal.SIGTERM, "
                              "signal.SIG_IGN); print('child ready', flush=True); time.sleep(600)"],
                             start_new_session=True, stdout=sys.stdout)
    print("parent ready", child.pid, flush=True)
    time.sleep(600)
''')


def test_stop_kills_what_ignores_sigint_and_sigterm_and_a_child_that_left_its_session(tmp_path):
    """A 'node' that ignores SIGINT and SIGTERM and whose child left its session (setsid) and
    ignores SIGTERM: stop() ends both within the bound and names the child in its one line."""
    log = tmp_path / "node.log"
    node = NodeProcess([sys.executable, "-c", IGNORES_SIGNALS], log, dict(os.environ), "stubborn_node")
    try:
        assert wait_for(lambda: "child ready" in log.read_text() and "parent ready" in log.read_text(), 30.0), \
            log.read_text()
        family = node.remember_family()
        child = next(info for info in family if info.ppid == node.pid)
        assert child.sid != node.pid  # outside the node's session: killpg alone would miss it
        started = time.monotonic()
        outcome = node.stop()
        took = time.monotonic() - started
    finally:
        if node.alive():
            os.killpg(node.pid, signal.SIGKILL)
            node.process.wait()
    assert took <= STOP_BOUND_S, took
    assert outcome.signal == "SIGKILL", outcome
    assert not still_running(child), child
    problem = outcome.problem
    assert "\n" not in problem
    assert "stubborn_node did not stop within 5 s of SIGINT and 5 s of SIGTERM: killed (SIGKILL)" in problem
    assert f"1 of its processes outlived it and were killed: -c import signal" in problem
    assert f"(pid {child.pid})" in problem


def demo_command(output: Path, *arguments: str) -> list[str]:
    """``python -m focus_ros.ros.demos`` as `make demo` runs it, with a short rotation."""
    return [sys.executable, "-m", "focus_ros.ros.demos", "--output", str(output), *arguments]


def run_demo(tmp_path, *arguments: str, timeout_s: float = 120.0) -> tuple[int, str]:
    completed = subprocess.run(demo_command(tmp_path / "out", *arguments), env=ros_environment(), cwd=tmp_path,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout_s)
    return completed.returncode, completed.stdout


def failure_lines(output: str) -> list[str]:
    return [line for line in output.splitlines() if line.startswith("demo failed:")]


def test_a_demo_part_whose_node_fails_says_why_in_one_line(tmp_path):
    """The node refuses its parameters and exits: the demo says so in one line, with the node's
    own last line and its log, no traceback, exit 1, and starts nothing else."""
    code, output = run_demo(tmp_path, "--part", "rotation", "--duration", "0.2", "--loss", "no_such_loss")
    assert code == 1, output
    assert "Traceback" not in output, output
    lines = failure_lines(output)
    assert len(lines) == 1, output
    line = lines[0]
    assert line.startswith("demo failed: angular_velocity_node exited with code 1 before its estimator ran "
                           "(its last line: angular_velocity_node: error: loss 'no_such_loss' is not one of"), line
    assert line.endswith(f"; node log: {tmp_path / 'out' / 'angular_velocity_node.log'}"), line


def test_an_exception_the_demo_does_not_handle_is_one_line_too(tmp_path):
    """A part that raises where the demo has no message of its own (here: the simulator refusing a
    duration of 0) still ends in one line naming the exception, exit 1, no traceback."""
    code, output = run_demo(tmp_path, "--part", "depth", "--slider-duration", "0")
    assert code == 1, output
    assert "Traceback" not in output, output
    lines = failure_lines(output)
    assert len(lines) == 1, output
    assert lines[0] == ("demo failed: the depth part raised ValueError: duration must be a positive number of "
                        "seconds, got 0.0"), lines[0]


def test_ctrl_c_on_the_demo_leaves_no_process_behind(tmp_path):
    """Ctrl-C while the demo's node runs with its worker: the demo stops them, says 'demo
    interrupted' in one line, exits 130; none of its processes is left."""
    output_file = tmp_path / "demo.txt"
    with open(output_file, "wb") as output:
        # the depth part: its replay runs in real time (1 s) and its last keyframe comes 1 s after,
        # so the interrupt lands while the node works
        demo = subprocess.Popen(demo_command(tmp_path / "out", "--part", "depth", "--slider-duration", "1.0"),
                                env=ros_environment(), cwd=tmp_path, stdout=output, stderr=subprocess.STDOUT,
                                start_new_session=True)
    try:
        def demo_family():
            return processes.descendants(demo.pid)

        assert wait_for(lambda: "ready after" in output_file.read_text() or demo.poll() is not None, 50.0), \
            output_file.read_text()
        family = demo_family()
        assert any("_worker_main" in info.command for info in family), (family, output_file.read_text())
        demo.send_signal(signal.SIGINT)
        code = demo.wait(timeout=processes.SIGINT_GRACE_S + 5.0)
    finally:
        if demo.poll() is None:
            os.killpg(demo.pid, signal.SIGKILL)
            demo.wait()
    text = output_file.read_text()
    assert code == 130, text
    assert "Traceback" not in text, text
    assert text.rstrip().splitlines()[-1] == "demo interrupted", text
    assert wait_for(lambda: not [info for info in family if still_running(info)], 5.0), \
        [info for info in family if still_running(info)]
