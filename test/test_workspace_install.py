"""focus_ros as installed by `colcon build`: the install tree, and the node started as `ros2 run` starts it.

Runs where the imported focus_ros is an installed one (``colcon test``; make test-workspace
in CI); in the .venv layout of `make test` (editable install, no install tree) it skips,
unless FOCUS_ROS_REQUIRE_INSTALL is set (CI's colcon run), where it fails.
"""

from __future__ import annotations

import importlib.metadata
import os
from pathlib import Path

import numpy as np
import pytest

rclpy = pytest.importorskip("rclpy")
pytest.importorskip("dvs_msgs.msg", reason="interface packages not built: run `make setup`")

from diagnostic_msgs.msg import DiagnosticArray  # noqa: E402
from dvs_msgs.msg import EventArray  # noqa: E402
from geometry_msgs.msg import TwistStamped  # noqa: E402

from conftest import BOXES_ROTATION_REFERENCE, DATASET_WINDOWS, REPOSITORY_ROOT, slice_folder  # noqa: E402
from focus_ros import codecs  # noqa: E402
from focus_ros.sources.ecd import read_ecd_folder  # noqa: E402
from ros_harness import PACKAGE, NodeProcess, client_node, install_prefix, spin_until  # noqa: E402


@pytest.fixture(scope="module")
def prefix() -> Path:
    found = install_prefix()
    if found is None:
        reason = "focus_ros is imported from an editable install (.venv), not an install tree: runs under colcon test"
        if os.environ.get("FOCUS_ROS_REQUIRE_INSTALL"):
            pytest.fail(reason)
        pytest.skip(reason)
    return found


def test_colcon_build_compiled_the_installed_kernels(prefix, tmp_path):
    """`colcon build` (setup.py install) compiled every kernel for the installed copy:
    `ros2 run focus_ros focus-ros compile --check` (the installed focus_ros, not the source
    folder pytest imports from) finds a usable cache entry for each, in the install tree unless
    NUMBA_CACHE_DIR sends numba elsewhere."""
    import subprocess

    completed = subprocess.run([str(ros2_run_path(PACKAGE, "focus-ros")), "compile", "--check"], cwd=tmp_path,
                               capture_output=True, text=True, timeout=120)
    assert completed.returncode == 0 and "nothing to compile" in completed.stdout, completed.stdout + completed.stderr
    if not os.environ.get("NUMBA_CACHE_DIR"):
        assert f"numba's cache: {prefix}/" in completed.stdout, completed.stdout


def ros2_run_path(package: str, executable: str) -> Path:
    """What `ros2 run <package> <executable>` starts: <prefix from the ament index>/lib/<package>/<executable>."""
    from ament_index_python.packages import get_package_prefix

    return Path(get_package_prefix(package)) / "lib" / package / executable


def test_install_tree_has_every_executable_and_file(prefix):
    scripts = [e.name for e in importlib.metadata.distribution(PACKAGE).entry_points if e.group == "console_scripts"]
    assert {"angular_velocity_node", "replay_node", "focus-ros"} <= set(scripts)
    for name in scripts:
        path = ros2_run_path(PACKAGE, name)
        assert path.is_file() and os.access(path, os.X_OK), f"`ros2 run {PACKAGE} {name}` would not find {path}"
    assert Path(ros2_run_path(PACKAGE, "x")).parents[2] == prefix
    share = prefix / "share" / PACKAGE
    assert (share / "package.xml").read_text() == (REPOSITORY_ROOT / "package.xml").read_text()
    for folder in ("launch", "config"):
        sources = {p.name for p in (REPOSITORY_ROOT / folder).iterdir() if p.is_file()}
        assert sources and sources <= {p.name for p in (share / folder).iterdir()}, folder
    for interface in ("dvs_msgs", "event_camera_msgs"):
        assert ros2_run_path(interface, "x").parents[2].is_dir(), f"{interface} is not in the ament index"


def test_installed_node_answers_real_events(prefix, tmp_path, monkeypatch):
    """Started as `ros2 run focus_ros angular_velocity_node --ros-args --params-file <installed config>`:
    it reports on /diagnostics and turns real DAVIS events into an angular velocity in rad/s."""
    events = read_ecd_folder(slice_folder("boxes_rotation")).events  # 30,000: one of the dataset's windows
    command = [str(ros2_run_path(PACKAGE, "angular_velocity_node")), "--ros-args", "--params-file",
               str(prefix / "share" / PACKAGE / "config" / "davis240c.yaml"), "-r", "events:=/dvs/events",
               "-p", "qos_reliability:=reliable", "-p", "camera_info_timeout_s:=0.5", *DATASET_WINDOWS]
    with client_node("workspace_client", monkeypatch) as (env, client, executor):
        reports, estimates = [], []
        client.create_subscription(DiagnosticArray, "/diagnostics", reports.append, 10)
        client.create_subscription(TwistStamped, "/angular_velocity", estimates.append, 10)
        publisher = client.create_publisher(EventArray, "/dvs/events", 100)
        with NodeProcess(command, env, tmp_path / "node.log") as node:
            assert spin_until(executor, lambda: reports, 30.0), node.log()
            assert spin_until(executor, lambda: publisher.get_subscription_count() > 0, 20.0), node.log()
            for start in range(0, len(events), 5000):
                publisher.publish(codecs.encode_event_array(events[start:start + 5000], 180, 240, "dvs"))
                executor.spin_once(timeout_sec=0.01)
            assert spin_until(executor, lambda: estimates, 60.0), node.log()
            assert node.alive(), node.log()
    omega = np.array([estimates[0].twist.angular.x, estimates[0].twist.angular.y, estimates[0].twist.angular.z])
    # the published estimate of the slice (~5.5 rad/s in norm, 315 deg/s): rad/s, not deg/s, not
    # zero, and each axis with its sign, as test_angular_velocity_node checks the source checkout's node
    assert np.linalg.norm(omega - np.array(BOXES_ROTATION_REFERENCE)) < 0.5, omega
    assert estimates[0].header.frame_id == "dvs"
