"""Bringing a node into one state and stopping it with a signal, as ``ros2 launch`` would: for
test/test_node_stop.py (the 5-s bound) and benchmarks/bench_stop.py (the times).

The states (:data:`STATES`):

- ``idle``: running, estimator up, no events;
- ``compiling``: started with an empty Numba cache, signalled while its estimator compiles;
- ``estimating``: a bag replayed into it, signalled mid-stream with windows or keyframes queued;
- ``worker_stopped``: its estimator process stopped (SIGSTOP: a worker that hangs) while events flow;
- ``worker_dead``: its estimator process killed (SIGKILL) while events flow, signalled at once
  (the restart under way).

The signal goes to the node's process alone (as launch sends it, not to its group).
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from conftest import REPOSITORY_ROOT
from ros_harness import NodeProcess, executable, ros_environment

CONFIG = REPOSITORY_ROOT / "config"
#: node -> (its arguments after --ros-args, the simulated preset its bag holds)
NODES = {
    "angular_velocity_node": (["--params-file", str(CONFIG / "davis240c.yaml"), "-r", "events:=/dvs/events",
                               "-p", "qos_reliability:=reliable"], "rotation_short"),
    "optical_flow_node": (["-r", "events:=/dvs/events", "-p", "qos_reliability:=reliable"], "rotation_short"),
    "depth_node": (["--params-file", str(CONFIG / "depth_davis240c.yaml"), "-r", "events:=/dvs/events",
                    "-r", "pose:=/optitrack/davis", "-p", "qos_reliability:=reliable",
                    "-p", "keyframe_events:=100000", "-p", "max_pending_keyframes:=100"], "slider"),
}
STATES = ("idle", "compiling", "estimating", "worker_stopped", "worker_dead")


def write_bags(folder: Path) -> dict[str, Path]:
    """A 3-s simulated rotation and a 2-s simulated slider (events, camera_info, poses) as ROS 2
    bags in ``folder``: preset name -> bag."""
    from focus_ros.sources.bags import write_bag
    from focus_ros.sources.simulator import simulate_preset

    paths = {}
    for preset, duration_s in (("rotation_short", 3.0), ("slider", 2.0)):
        recording = simulate_preset(preset, duration_s=duration_s, seed=3)
        recording.depth_times = recording.depth_maps = None
        paths[preset] = folder / f"{preset}.bag2"
        write_bag(paths[preset], recording, version=2, storage="mcap", events_per_message=5000)
    return paths


def descendants(pid: int) -> set[int]:
    """The processes below ``pid`` now (children, their children, ...), from /proc."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(parent, []).append(int(entry.name))
    found, stack = set(), [pid]
    while stack:
        for child in children.get(stack.pop(), []):
            found.add(child)
            stack.append(child)
    return found


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def worker_pid(node_pid: int) -> int | None:
    """The node's estimator process (``focus_ros.runtime._worker_main``), once started."""
    for pid in descendants(node_pid):
        try:
            if b"focus_ros.runtime._worker_main" in Path(f"/proc/{pid}/cmdline").read_bytes():
                return pid
        except OSError:
            continue
    return None


class StateNotReached(AssertionError):
    """The node did not reach the state asked for (the message names it, with the node's log)."""


def wait_for(condition, timeout_s: float, what: str, node: NodeProcess) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise StateNotReached(f"{what} not within {timeout_s} s; node log:\n{node.log()}")
        time.sleep(0.05)


def start_replay(bag: Path, env: dict) -> subprocess.Popen:
    return subprocess.Popen([executable("focus-ros"), "replay", str(bag), "--rate", "1",
                             "--wait-for-subscribers", "60"], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)


@dataclass
class Stopped:
    """How a node ended after the signal: ``took_s`` (s) from the signal to its exit (None: still
    running after ``bound_s``), ``left``: its processes still alive 2 s after it exited, ``log``."""

    took_s: float | None
    left: list[int]
    log: str


def stop_in_state(node_name: str, state: str, signal_name: str, bags: dict[str, Path], folder: Path,
                  bound_s: float = 5.0) -> Stopped:
    """Start ``node_name`` as ``ros2 run`` does, bring it into ``state``, send ``signal_name``
    to it and see how it ends (waiting at most ``bound_s`` for its exit)."""
    arguments, preset = NODES[node_name]
    env = ros_environment()
    if state == "compiling":
        env["NUMBA_CACHE_DIR"] = str(folder / "empty_numba_cache")
    node = NodeProcess([executable(node_name), "--ros-args", *arguments], env, folder / "node.log")
    replay = None
    try:
        if state == "compiling":
            wait_for(lambda: "compiling" in node.log(), 60.0, "the node saying it compiles", node)
        else:
            wait_for(lambda: "estimator running in process" in node.log(), 120.0, "the estimator running", node)
        if state in ("estimating", "worker_stopped", "worker_dead"):
            replay = start_replay(bags[preset], env)
            time.sleep(1.5)  # events flowing: windows estimated and queued, keyframes being cut
            if not node.alive():
                raise StateNotReached(f"{node_name} ended while events flowed; log:\n{node.log()}")
        worker = worker_pid(node.process.pid)
        if state == "worker_stopped":
            os.kill(worker, signal.SIGSTOP)
            time.sleep(1.0)  # jobs pile up in front of the stopped worker
        elif state == "worker_dead":
            os.kill(worker, signal.SIGKILL)
            time.sleep(0.3)  # noticed, restart under way
        own = descendants(node.process.pid)
        signalled = time.monotonic()
        os.kill(node.process.pid, getattr(signal, signal_name))
        try:
            node.process.wait(timeout=bound_s)
            took_s = time.monotonic() - signalled
        except subprocess.TimeoutExpired:
            return Stopped(None, sorted(own), node.log())
        deadline = time.monotonic() + 2.0
        while any(alive(pid) for pid in own) and time.monotonic() < deadline:
            time.sleep(0.05)
        return Stopped(took_s, [pid for pid in own if alive(pid)], node.log())
    finally:
        if replay is not None:
            os.killpg(replay.pid, signal.SIGKILL)
            replay.wait()
        node.stop(timeout=1.0)
