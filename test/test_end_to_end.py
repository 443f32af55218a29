"""End to end through ROS: simulated bag -> `focus-ros replay` -> node -> TwistStamped.

Three processes talk over real topics on loopback: the replay tool (subprocess), the
angular velocity node (subprocess, started as `ros2 run` would), and this test
(collecting the estimates). The same bag through `focus-ros estimate` (offline) must give
the same estimates for the same windows.
"""

from __future__ import annotations

import csv
import re
import subprocess

import numpy as np
import pytest

rclpy = pytest.importorskip("rclpy")
pytest.importorskip("dvs_msgs.msg", reason="interface packages not built: run `make setup`")

from diagnostic_msgs.msg import DiagnosticArray  # noqa: E402
from geometry_msgs.msg import TwistStamped  # noqa: E402

from conftest import REPOSITORY_ROOT  # noqa: E402
from focus_ros.sources.bags import write_bag  # noqa: E402
from focus_ros.sources.simulator import simulate_preset  # noqa: E402
from ros_harness import NodeProcess, client_node, executable, spin_until  # noqa: E402

WINDOW_EVENTS = 30000


@pytest.fixture(scope="module")
def simulated_bag(tmp_path_factory):
    """0.8 s of the dataset-like short rotation preset (ramping up to ~200 deg/s), as a ROS 2 mcap bag."""
    recording = simulate_preset("rotation_short", duration_s=0.8, seed=3)
    path = tmp_path_factory.mktemp("e2e") / "rotation.bag2"
    write_bag(path, recording, version=2, storage="mcap")
    return path, recording


def ground_truth_at(recording, t_ns):
    return np.column_stack([np.interp(t_ns, recording.imu.t, recording.imu.angular_velocity[:, axis])
                            for axis in range(3)])


def test_replay_node_estimates_match_ground_truth_and_offline(simulated_bag, tmp_path, monkeypatch):
    bag, recording = simulated_bag
    with client_node("e2e_collector", monkeypatch) as (env, collector, executor):
        estimates, node_log = replay_through_node(bag, recording, env, collector, executor, tmp_path)
    check_estimates(estimates, node_log, bag, recording, env, tmp_path)


def replay_through_node(bag, recording, env, collector, executor, tmp_path):
    estimates = []
    collector.create_subscription(TwistStamped, "/angular_velocity", estimates.append, 1000)
    reports = []
    collector.create_subscription(DiagnosticArray, "/diagnostics", reports.append, 10)
    with NodeProcess([executable("angular_velocity_node"), "--ros-args", "--params-file",
                      str(REPOSITORY_ROOT / "config" / "davis240c.yaml"), "-r", "events:=/dvs/events",
                      "-p", "qos_reliability:=reliable", "-p", "queue_policy:=all",
                      "-p", f"window_events:={WINDOW_EVENTS}"],
                     env, tmp_path / "node.log") as node:
        # start the bag once the node's reports reach this test: discovery in both directions is
        # done, so no estimate goes out before this collector is matched
        assert spin_until(executor, lambda: reports, 30.0), node.log()
        with NodeProcess([executable("focus-ros"), "replay", str(bag), "--paced"], env,
                         tmp_path / "replay.log") as replay:
            spin_until(executor, lambda: not replay.alive(), 240.0)  # collect while the bag plays
            assert replay.process.wait(timeout=1) == 0, replay.log()
        expected_windows = len(recording.events) // WINDOW_EVENTS
        spin_until(executor, lambda: len(estimates) >= expected_windows, 30.0)
        node_log = node.log()
    return estimates, node_log


def check_estimates(estimates, node_log, bag, recording, env, tmp_path):
    # every window is estimated; one may be withheld as a doubtful optimum (the 60-ms window
    # in which omega crosses zero: the estimator's recovery finds two optima there, 95 deg/s
    # off without it) and is then missing here exactly as in the offline run below
    expected_windows = len(recording.events) // WINDOW_EVENTS
    withheld = len(re.findall("doubtful optimum", node_log))
    assert withheld <= 1 and len(estimates) == expected_windows - withheld, (len(estimates), expected_windows,
                                                                             node_log)
    t_ns = np.array([m.header.stamp.sec * 10**9 + m.header.stamp.nanosec for m in estimates])
    omega = np.array([[m.twist.angular.x, m.twist.angular.y, m.twist.angular.z] for m in estimates])
    error_deg_s = np.degrees(omega - ground_truth_at(recording, t_ns))
    rms = np.sqrt(np.mean(error_deg_s ** 2, axis=0))
    median = np.median(np.abs(error_deg_s), axis=0)
    # Offline on this sequence (peak 300 deg/s) the engine is within ~2 deg/s of the truth in
    # almost every window; without the recovery of doubtful windows two windows dominated the
    # RMS: the first, cold-started from 0 at ~340 deg/s, and the 60-ms window in which omega
    # crosses zero (constant-velocity model), together ~20 deg/s RMS per axis. Through ROS nothing may be lost, shifted or rescaled:
    # a deg/s output would be 57x off, a dropped or shifted window tens of deg/s per window.
    assert np.all(median < 3.0), median     # 1 % of the peak
    assert np.all(rms < 30.0), rms          # 10 % of the peak

    # offline: the same bag, the same windows and settings -> the same estimates
    output = tmp_path / "offline.csv"
    result = subprocess.run([executable("focus-ros"), "estimate", str(bag), "--output", str(output),
                             "--window-events", str(WINDOW_EVENTS)],  # the node's windows
                            capture_output=True, text=True, env=env, timeout=300)
    assert result.returncode == 0, result.stderr
    with open(output) as handle:
        rows = [row for row in csv.DictReader(handle) if row["degenerate"] == "0"]
    assert len(rows) == len(estimates)
    offline_t_ns = np.array([round(float(row["t_ref"]) * 1e9) for row in rows])
    offline = np.array([[float(row["wx"]), float(row["wy"]), float(row["wz"])] for row in rows])
    assert np.all(np.abs(offline_t_ns - t_ns) <= 1000)
    np.testing.assert_allclose(omega, offline, atol=1e-6)


def test_paced_replay_keeps_up_with_windows_larger_than_the_events_lead(simulated_bag, tmp_path, monkeypatch):
    """Windows of many more events than ``--pace-lead-events`` (as the auto windows of a
    1280x720 sensor hold millions of events): the replayer also lets ``--pace-lead-s`` of event
    time run ahead (default 0.25 s: the next estimate needs the next window's end, half a window
    and a stride past the last estimate's stamp, 75 ms here), so every window completes and is
    estimated while the bag plays. With the events bound alone (``--pace-lead-s 0``) each message
    waited for an estimate that could not come before its window was complete (pace_timeout_s,
    2 s, per message: minutes for this bag), and the replay below did not end within its time
    limit."""
    _, recording = simulated_bag
    bag = tmp_path / "small_messages.bag2"  # messages of 1,000 events (~1 ms here, as a driver's): 50 per window
    write_bag(bag, recording, version=2, storage="mcap", events_per_message=1000)
    window_events = 50_000  # about 50 ms of this sequence: 10 times the events lead below
    with client_node("e2e_pace", monkeypatch) as (env, collector, executor):
        estimates, reports = [], []
        collector.create_subscription(TwistStamped, "/angular_velocity", estimates.append, 1000)
        collector.create_subscription(DiagnosticArray, "/diagnostics", reports.append, 10)
        with NodeProcess([executable("angular_velocity_node"), "--ros-args", "--params-file",
                          str(REPOSITORY_ROOT / "config" / "davis240c.yaml"), "-r", "events:=/dvs/events",
                          "-p", "qos_reliability:=reliable", "-p", "queue_policy:=all",
                          "-p", f"window_events:={window_events}"],
                         env, tmp_path / "node.log") as node:
            assert spin_until(executor, lambda: reports, 30.0), node.log()
            with NodeProcess([executable("focus-ros"), "replay", str(bag), "--paced", "--pace-lead-events", "5000"],
                             env, tmp_path / "replay.log") as replay:
                assert spin_until(executor, lambda: not replay.alive(), 90.0), "paced replay stalled: " + replay.log()
                assert replay.process.wait(timeout=1) == 0, replay.log()
            expected_windows = len(recording.events) // window_events

            def estimated_windows():  # published or withheld, from the node's last report
                values = {kv.key: kv.value for status in reports[-1].status for kv in status.values}
                return int(values.get("windows_processed", 0)) + int(values.get("degenerate_windows", 0))
            spin_until(executor, lambda: estimated_windows() >= expected_windows, 30.0)
            assert estimated_windows() == expected_windows, (estimated_windows(), expected_windows, node.log())
    assert len(estimates) >= 1
