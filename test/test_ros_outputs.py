"""What robots consume from the angular velocity node, and what keeps it answering, over real topics.

The node runs as `ros2 run` starts it (console-script entry point, --ros-args, params file); the
test is a real rclpy node on loopback. Checked here (issues 22 and 23):

- ``imu`` (sensor_msgs/Imu, REP-145) and ``twist`` (TwistWithCovarianceStamped) carry the
  estimate of ``angular_velocity`` with a finite, symmetric, positive definite covariance, the
  parts not estimated marked absent (Imu) or unknown (twist), in the events' frame or the
  ``frame_id`` parameter's;
- with ``use_sim_time`` true and nothing on /clock the node still estimates and reports on
  /diagnostics (its timers run on the steady clock);
- an estimator process killed while no events flow is reported on /diagnostics without waiting
  for events, restarted, and the node estimates again (how soon it is reported:
  benchmarks/bench_dead_worker.py).
"""

from __future__ import annotations

import os
import re
import signal

import numpy as np
import pytest

rclpy = pytest.importorskip("rclpy")
pytest.importorskip("dvs_msgs.msg", reason="interface packages not built: run `make setup`")

from diagnostic_msgs.msg import DiagnosticArray  # noqa: E402
from dvs_msgs.msg import EventArray  # noqa: E402
from geometry_msgs.msg import TwistStamped, TwistWithCovarianceStamped  # noqa: E402
from sensor_msgs.msg import Imu  # noqa: E402

from conftest import DATASET_WINDOWS, REPOSITORY_ROOT, slice_events  # noqa: E402
from focus_ros import codecs  # noqa: E402
from focus_ros.events import Events  # noqa: E402
from ros_harness import check_worker_restart_reported, node_session, spin_until  # noqa: E402

PARAMS_FILE = REPOSITORY_ROOT / "config" / "davis240c.yaml"


@pytest.fixture
def ros(tmp_path, monkeypatch):
    with node_session("outputs_client", monkeypatch, tmp_path, subscriber_settle_s=0.3) as session:
        yield session


def publish_event_array(ros, events: Events, frame_id: str = "dvs", per_message: int = 5000, copies: int = 1) -> None:
    """The events, then ``copies - 1`` more times each shifted past the previous copy in time."""
    publisher = ros.publisher(EventArray, "/dvs/events", 100)
    shift = int(events.t[-1] - events.t[0]) + 1000
    for copy in range(copies):
        moved = Events(events.x, events.y, events.t + copy * shift, events.p)
        for start in range(0, len(moved), per_message):
            publisher.publish(codecs.encode_event_array(moved[start:start + per_message], 180, 240, frame_id))
            ros.executor.spin_once(timeout_sec=0.01)


def start_node(ros, *ros_args, window_events=10000, wait_for_report=True):
    return ros.start("angular_velocity_node", "-r", "events:=/dvs/events", "-p", "camera_info_timeout_s:=0.3",
                     "-p", f"window_events:={window_events}", "-p", "queue_policy:=all", *ros_args,
                     params_file=PARAMS_FILE, reliable=True, wait_for_report=wait_for_report)


def stamp_ns(header) -> int:
    return header.stamp.sec * 1_000_000_000 + header.stamp.nanosec


def latest_values(reports) -> dict:
    return {kv.key: kv.value for kv in reports[-1].status[0].values} if reports else {}


def check_covariance(matrix: np.ndarray) -> None:
    """Finite, symmetric and positive definite: what a filter can fuse."""
    assert np.all(np.isfinite(matrix)), matrix
    np.testing.assert_allclose(matrix, matrix.T, rtol=0, atol=1e-12 * np.abs(matrix).max())
    assert np.all(np.linalg.eigvalsh(matrix) > 0), matrix


@pytest.mark.parametrize("frame_parameter", ["", "camera_optical"])
def test_imu_and_twist_with_covariance_carry_the_estimate(ros, frame_parameter):
    """Each window's estimate comes on angular_velocity, imu and twist with one stamp and frame
    (the events' frame, or the frame_id parameter); Imu: REP-145 absent orientation and linear
    acceleration (element 0 of their covariances -1), the angular velocity's covariance from the
    estimate; twist: the same angular block, the linear part unknown (variance >= 1e3 (m/s)^2,
    no correlation with the angular part)."""
    extra = ("-p", f"frame_id:={frame_parameter}") if frame_parameter else ()
    events = slice_events("boxes_rotation")
    node = start_node(ros, *extra, window_events=len(events))  # one window of the node's default size per copy
    twists = ros.collect(TwistStamped, "/angular_velocity")
    imus = ros.collect(Imu, "/imu")
    covariant = ros.collect(TwistWithCovarianceStamped, "/twist")
    publish_event_array(ros, events, frame_id="dvs", copies=4)
    assert spin_until(ros.executor, lambda: len(twists) >= 3 and len(imus) >= 3 and len(covariant) >= 3, 60.0), \
        node.log()
    spin_until(ros.executor, lambda: False, 0.5)
    expected_frame = frame_parameter or "dvs"
    by_stamp = {stamp_ns(t.header): t for t in twists}
    covariances = []
    for imu, twist in zip(imus, covariant):
        assert imu.header.frame_id == twist.header.frame_id == expected_frame
        assert stamp_ns(imu.header) == stamp_ns(twist.header) and stamp_ns(imu.header) in by_stamp
        plain = by_stamp[stamp_ns(imu.header)].twist.angular
        omega = np.array([plain.x, plain.y, plain.z])
        np.testing.assert_array_equal([imu.angular_velocity.x, imu.angular_velocity.y, imu.angular_velocity.z], omega)
        angular = twist.twist.twist.angular
        np.testing.assert_array_equal([angular.x, angular.y, angular.z], omega)
        assert imu.orientation_covariance[0] == -1.0 and imu.linear_acceleration_covariance[0] == -1.0
        linear = twist.twist.twist.linear
        assert (linear.x, linear.y, linear.z) == (0.0, 0.0, 0.0)
        imu_covariance = np.array(imu.angular_velocity_covariance).reshape(3, 3)
        check_covariance(imu_covariance)
        full = np.array(twist.twist.covariance).reshape(6, 6)
        np.testing.assert_array_equal(full[3:, 3:], imu_covariance)
        assert np.all(np.diag(full)[:3] >= 1e3) and not full[:3, 3:].any() and not full[3:, :3].any()
        covariances.append(imu_covariance)
    # the focus of a whole window pins omega down on every axis: standard deviations a small
    # fraction of the motion (~5.5 rad/s here), none at the "no information" bound
    # (max_angular_velocity = 50 rad/s)
    assert all(np.sqrt(np.linalg.eigvalsh(c).max()) < 0.5 for c in covariances), covariances


def test_with_sim_time_and_no_clock_the_node_estimates_and_reports(ros):
    """use_sim_time true, nothing on /clock (a bag played without --clock, a live driver): the
    calibration comes from the parameters after camera_info_timeout_s, windows are estimated,
    and /diagnostics comes once a second (timers on the steady clock)."""
    node = start_node(ros, "-p", "use_sim_time:=true", wait_for_report=False)
    twists = ros.collect(TwistStamped, "/angular_velocity")
    assert spin_until(ros.executor, lambda: len(ros.reports) >= 2, 30.0), \
        "no /diagnostics with use_sim_time and no /clock:\n" + node.log()
    publish_event_array(ros, slice_events("boxes_rotation"))
    assert spin_until(ros.executor, lambda: len(twists) >= 2, 60.0), node.log()
    before = len(ros.reports)
    assert spin_until(ros.executor, lambda: len(ros.reports) >= before + 2, 5.0), node.log()
    assert latest_values(ros.reports)["calibration_source"] != "none"


def test_an_estimator_killed_while_no_events_flow_is_reported_at_once(ros):
    """Kill the estimator process of an idle node (no events since it started, none sent until
    it is reported): /diagnostics counts the restart and names a new process, the log says which
    process stopped and how; events sent afterwards are estimated by the new one. How soon
    after the kill it is reported (about 1 s) is measured by benchmarks/bench_dead_worker.py."""
    node = start_node(ros)
    diagnostics = ros.collect(DiagnosticArray, "/diagnostics")
    assert spin_until(ros.executor, lambda: int(latest_values(diagnostics).get("estimator_process_pid", 0)) > 0,
                      30.0), node.log()
    pid = int(latest_values(diagnostics)["estimator_process_pid"])
    spin_until(ros.executor, lambda: False, 1.0)  # the node idles: nothing in flight, nothing queued
    os.kill(pid, signal.SIGKILL)
    assert spin_until(ros.executor, lambda: int(latest_values(diagnostics).get("worker_restarts", 0)) >= 1, 10.0), \
        node.log()
    assert spin_until(ros.executor, lambda: int(latest_values(diagnostics)["estimator_process_pid"]) != pid, 30.0)
    check_worker_restart_reported(pid, latest_values(diagnostics), node)
    twists = ros.collect(TwistStamped, "/angular_velocity")
    publish_event_array(ros, slice_events("boxes_rotation"))
    assert spin_until(ros.executor, lambda: len(twists) >= 2, 60.0), node.log()


@pytest.fixture(scope="module")
def one_second_bag(tmp_path_factory):
    """1 s of the simulator's short rotation (DAVIS240C, about 37 windows of 30,000 events), as a
    ROS 2 bag of 4,000-event messages (about 1 ms each, as a driver publishes) with camera_info;
    and the bag's event times (ns)."""
    from focus_ros.sources.bags import write_bag
    from focus_ros.sources.simulator import simulate_preset

    recording = simulate_preset("rotation_short", duration_s=1.0, seed=5)
    path = tmp_path_factory.mktemp("cold") / "one_second.bag2"
    write_bag(path, recording, version=2, storage="mcap", events_per_message=4000)
    return path, np.asarray(recording.events.t, dtype=np.int64)


def test_a_bag_played_the_moment_the_node_starts_is_estimated_from_its_first_window(
        one_second_bag, tmp_path, monkeypatch):
    """`ros2 run` the node and, at the same moment, play a 1-s bag at real time (the README's
    replay): the events come while the node's estimator process is still starting (ready about
    1.5 s after the node's start: bench_first_output.py), and the node is ready from the first
    event — the first estimate it publishes, said in its log, is of the bag's first window (30,000
    events, live policy ``newest``), and every window cut is accounted for on /diagnostics. How
    many of the later windows a machine keeps up with at real time is its speed (the live policy
    drops what it cannot estimate in time): measured by bench_first_output.py, not asserted here.
    Read from the node's log, not from /angular_velocity: a subscriber's discovery of the topic
    can take longer than the bag (about 2 s with Fast DDS here)."""
    from ros_harness import NodeProcess, client_node, executable

    bag, event_times_ns = one_second_bag
    window_events = 30000
    with client_node("cold_start_client", monkeypatch) as (env, client, executor):
        reports = []
        client.create_subscription(DiagnosticArray, "/diagnostics", reports.append, 10)
        node = NodeProcess([executable("angular_velocity_node"), "--ros-args", "--params-file", str(PARAMS_FILE),
                            "-r", "events:=/dvs/events", "-p", "qos_reliability:=reliable", *DATASET_WINDOWS],
                           env, tmp_path / "node.log")
        # as `ros2 bag play` started with the node, but without losing what goes before the node has
        # subscribed (that is discovery, not the node's readiness): the replay waits for the subscription
        replay = NodeProcess([executable("focus-ros"), "replay", str(bag), "--rate", "1",
                              "--wait-for-subscribers", "60"], env, tmp_path / "replay.log")
        with node, replay:
            assert spin_until(executor, lambda: not replay.alive(), 120.0), replay.log()
            assert replay.process.wait(timeout=1) == 0, replay.log()

            def accounted(values):  # every window cut is estimated, withheld, dropped, lost or failed
                return sum(int(values.get(key, 0)) for key in ("windows_processed", "degenerate_windows",
                                                               "windows_dropped", "windows_lost", "windows_failed"))

            def completed():
                values = latest_values(reports)
                return int(values.get("windows_completed", 0)) > 0 and accounted(values) == int(
                    values["windows_completed"]) and int(values.get("windows_pending", 1)) == 0

            assert spin_until(executor, completed, 30.0), (latest_values(reports), node.log())
            spin_until(executor, lambda: False, 2.5)  # the last window's result and one more report
            values = latest_values(reports)
    # the whole bag reached the node, its windows cut as in the bag
    assert int(values["events_received"]) == len(event_times_ns), values
    assert int(values["windows_completed"]) == len(event_times_ns) // window_events, values
    first = re.search(r"first estimate published \(stamp (\d+) ns\)", node.log())
    assert first is not None, node.log()
    assert event_times_ns[0] <= int(first.group(1)) <= event_times_ns[window_events - 1], \
        (f"the first estimate published is not of the bag's first window ({event_times_ns[0]}-"
         f"{event_times_ns[window_events - 1]} ns)", values, node.log())
