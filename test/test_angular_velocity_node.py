"""The angular velocity node as `ros2 run` starts it, talking to this test over real topics.

The node runs in a subprocess (its console-script entry point with --ros-args and a
params file); the test is a real rclpy node on loopback that publishes serialized event
messages and listens to what comes back. Nothing in between is a stand-in.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

rclpy = pytest.importorskip("rclpy")
pytest.importorskip("dvs_msgs.msg", reason="interface packages not built: run `make setup`")

from diagnostic_msgs.msg import DiagnosticArray  # noqa: E402
from dvs_msgs.msg import EventArray  # noqa: E402
from event_camera_msgs.msg import EventPacket  # noqa: E402
from geometry_msgs.msg import TwistStamped  # noqa: E402
from sensor_msgs.msg import CameraInfo, Image  # noqa: E402

from conftest import DATASET_WINDOWS, REPOSITORY_ROOT, slice_events  # noqa: E402
from focus_ros import codecs  # noqa: E402
from focus_ros.camera import Calibration  # noqa: E402
from focus_ros.events import Events  # noqa: E402
from ros_harness import check_worker_restart_reported, executable, node_session, spin_until  # noqa: E402

#: published contrast-maximisation estimate over the boxes_rotation slice (its README), rad/s
BOXES_REFERENCE = np.array([3.576, 3.945, -1.754])
PARAMS_FILE = REPOSITORY_ROOT / "config" / "davis240c.yaml"


@pytest.fixture
def ros(tmp_path, monkeypatch):
    """A ROS domain of this test's own, and a client node in the test process."""
    with node_session("test_client", monkeypatch, tmp_path, subscriber_settle_s=0.3) as session:
        yield session


def start_node(ros, *ros_args, params_file=PARAMS_FILE, reliable=True):
    """The angular velocity node with the DAVIS240C params file and the dataset's 30,000-event windows
    (a later ``-p window_events:=`` in ros_args overrides them; another params file sets its own:
    a ``-p`` would override the file's); reliable QoS unless told."""
    windows = DATASET_WINDOWS if params_file == PARAMS_FILE else ()
    return ros.start("angular_velocity_node", *windows, *ros_args, params_file=params_file, reliable=reliable)


def publish_event_array(ros, events: Events, topic="/dvs/events", per_message=5000, frame_id="dvs"):
    publisher = ros.publisher(EventArray, topic, 100)
    for start in range(0, len(events), per_message):
        publisher.publish(codecs.encode_event_array(events[start:start + per_message], 180, 240, frame_id))
        ros.executor.spin_once(timeout_sec=0.01)
    return publisher


def test_node_estimates_real_events_from_event_array(ros):
    """Started like `ros2 run` (entry point, --ros-args, params file), fed real DAVIS events."""
    # default QoS (best effort, as live drivers publish); the slice is sent twice in case
    # the first messages go while discovery settles
    node = start_node(ros, "-r", "events:=/dvs/events", "-p", "camera_info_timeout_s:=0.5", reliable=False)
    estimates = ros.collect(TwistStamped, "/angular_velocity")
    events = slice_events("boxes_rotation")
    publish_event_array(ros, events)
    shift = int(events.t[-1] - events.t[0]) + 1000
    publish_event_array(ros, Events(events.x, events.y, events.t + shift, events.p))
    assert spin_until(ros.executor, lambda: len(estimates) >= 1, 60.0), node.log()
    estimate = estimates[0]
    omega = np.array([estimate.twist.angular.x, estimate.twist.angular.y, estimate.twist.angular.z])
    # rad/s, not deg/s: the reference is ~5.5 rad/s in norm (315 deg/s)
    assert np.linalg.norm(omega - BOXES_REFERENCE) < 0.5, omega
    assert estimate.header.frame_id == "dvs"
    stamp_ns = estimate.header.stamp.sec * 1_000_000_000 + estimate.header.stamp.nanosec
    assert events.t[0] <= stamp_ns <= events.t[-1] + shift
    assert "using intrinsics from the calibration parameters" in node.log()
    assert node.alive()


def test_node_decodes_event_packets_evt3(ros):
    node = start_node(ros, "-r", "events:=/event_camera/events", "-p", "camera_info_timeout_s:=0.5",
                           "-p", "event_message_type:=event_camera_msgs/EventPacket")
    estimates = ros.collect(TwistStamped, "/angular_velocity")
    events = slice_events("boxes_rotation")
    # EVT3 carries microseconds; the dataset's times are microseconds written as 49.006624999 s
    events = Events(events.x, events.y, (events.t + 500) // 1000 * 1000, events.p)
    publisher = ros.publisher(EventPacket, "/event_camera/events", 100)
    time_offset_ns = (int(events.t[0]) // 1000) * 1000
    for seq, start in enumerate(range(0, len(events), 6000)):
        publisher.publish(codecs.encode_event_packet(events[start:start + 6000], 180, 240, "evt3",
                                                        frame_id="event_camera", seq=seq,
                                                        evt3_time_offset_ns=time_offset_ns))
        ros.executor.spin_once(timeout_sec=0.01)
    assert spin_until(ros.executor, lambda: len(estimates) >= 1, 60.0), node.log()
    omega = np.array([estimates[0].twist.angular.x, estimates[0].twist.angular.y, estimates[0].twist.angular.z])
    assert np.linalg.norm(omega - BOXES_REFERENCE) < 0.5, omega
    assert estimates[0].header.frame_id == "event_camera"


def test_compensated_image_is_sharper_than_uncompensated(ros):
    node = start_node(ros, "-r", "events:=/dvs/events", "-p", "camera_info_timeout_s:=0.5",
                           "-p", "window_events:=15000", "-p", "image_rate_hz:=100.0")
    before = ros.collect(Image, "/iwe/uncompensated")
    after = ros.collect(Image, "/iwe/compensated")
    estimates = ros.collect(TwistStamped, "/angular_velocity")
    # the node only renders images while someone subscribes: let it see the subscriptions
    spin_until(ros.executor, lambda: False, 1.0)
    publish_event_array(ros, slice_events("boxes_rotation"))
    assert spin_until(ros.executor, lambda: before and after, 60.0), node.log()
    # the estimate is published just before its images, on another topic: it may be delivered later
    assert spin_until(ros.executor, lambda: estimates, 10.0), node.log()

    def edge_energy(message: Image) -> float:
        """Mean squared gray-level difference between neighbouring pixels: sharp edges score high."""
        assert message.encoding == "rgb8" and (message.height, message.width) == (180, 240)
        gray = np.frombuffer(bytes(message.data), np.uint8).reshape(180, 240, 3).astype(float).mean(axis=2)
        return float(np.mean(np.diff(gray, axis=0) ** 2) + np.mean(np.diff(gray, axis=1) ** 2))

    # both pictures share one intensity scale; compensation concentrates the events on the
    # edges (offline, the edge energy of these pictures grows 1.6x with the default 1-px blur)
    assert edge_energy(after[0]) > 1.3 * edge_energy(before[0])


def test_bad_input_is_logged_once_and_good_data_still_estimated(ros):
    node = start_node(ros, "-r", "events:=/dvs/events", "-p", "camera_info_timeout_s:=0.5",
                           "-p", "window_events:=10000")
    estimates = ros.collect(TwistStamped, "/angular_velocity")
    diagnostics = ros.collect(DiagnosticArray, "/diagnostics")
    publisher = ros.publisher(EventArray, "/dvs/events", 100)
    spin_until(ros.executor, lambda: False, 1.0)  # fallback calibration in place
    events = slice_events("boxes_rotation")
    good = codecs.encode_event_array(events[:2000], 180, 240, "dvs")
    bad_messages = [
        codecs.encode_event_array(Events.empty(), 180, 240, "dvs"),                  # empty
        codecs.encode_event_array(Events.empty(), 180, 240, "dvs"),                  # empty again
        good[: len(good) // 2],                                                          # truncated
        codecs.encode_event_array(events[:100], 260, 346, "dvs"),                     # wrong size
        _raw_event_array(events[:50], 0, 0),                                             # size 0x0
        good[: len(good) // 3],                                                          # truncated again
    ]
    for message in bad_messages:
        publisher.publish(message)
        ros.executor.spin_once(timeout_sec=0.05)
    # coordinates out of range (declared 240x180, x up to 400)
    out_of_range = Events.from_arrays(np.arange(300, 400), np.zeros(100), events.t[100:200], events.p[:100])
    publisher.publish(_raw_event_array(out_of_range, 180, 240))
    # a burst far larger than a window: 120,000 events (12 windows) in 24 messages back to back
    burst = Events.concatenate([Events(events.x, events.y, events.t + k * 10_000_000 + 1_000_000_000, events.p)
                                for k in range(4)])
    for start in range(0, len(burst), 5000):
        publisher.publish(codecs.encode_event_array(burst[start:start + 5000], 180, 240, "dvs"))
    assert spin_until(ros.executor, lambda: len(estimates) >= 1, 60.0), node.log()
    # timestamps jumping back by a second (a bag looping, a driver reset): the stream restarts
    publisher.publish(codecs.encode_event_array(events[:500], 180, 240, "dvs"))
    assert node.alive()
    # later good data is still estimated
    count = len(estimates)
    later = Events(events.x, events.y, events.t + 2_000_000_000, events.p)
    for start in range(0, len(later), 5000):
        publisher.publish(codecs.encode_event_array(later[start:start + 5000], 180, 240, "dvs"))
        ros.executor.spin_once(timeout_sec=0.01)
    assert spin_until(ros.executor, lambda: len(estimates) >= count + 2, 60.0), node.log()
    omega = np.array([estimates[-1].twist.angular.x, estimates[-1].twist.angular.y, estimates[-1].twist.angular.z])
    assert np.all(np.isfinite(omega))
    diagnostics.clear()  # a report made after everything above was processed
    assert spin_until(ros.executor, lambda: diagnostics, 5.0)
    log = node.log()
    # the 0x0 message (size not declared) is kept, its events inside the sensor; the events
    # outside the declared 240x180 are dropped alone (test_bad_input_node.py has the details)
    for pattern in ("empty event message", "only [0-9]+ bytes remain", "346x260",
                    "events outside the 240x180 px sensor dropped", "timestamps jumped back"):
        assert len(re.findall(pattern, log)) == 1, (pattern, log)
    assert "Traceback" not in log
    values = {kv.key: kv.value for kv in diagnostics[-1].status[0].values}
    assert int(values["malformed_messages"]) == 2 and int(values["out_of_range_events"]) == 100
    assert int(values["windows_dropped"]) >= 1  # the burst held more windows than could be processed
    # windows after the jump back start cold, and a cold window is always checked again
    assert int(values["windows_recovered"]) >= 1
    assert 0 <= int(values["windows_accelerated"]) <= int(values["windows_processed"])


def _raw_event_array(events: Events, height: int, width: int) -> bytes:
    """An EventArray serialized by rclpy itself, whatever its coordinates (the codec refuses
    events outside the declared size, a driver with a bug would not)."""
    from builtin_interfaces.msg import Time
    from dvs_msgs.msg import Event
    from rclpy.serialization import serialize_message

    message = EventArray(height=height, width=width)
    message.header.frame_id = "dvs"
    message.events = [Event(x=int(x), y=int(y), ts=Time(sec=int(t) // 10**9, nanosec=int(t) % 10**9),
                            polarity=bool(p > 0)) for x, y, t, p in zip(events.x, events.y, events.t, events.p)]
    return serialize_message(message)


def test_without_camera_info_or_fallback_node_waits_then_uses_camera_info(ros, tmp_path):
    params = tmp_path / "no_calibration.yaml"
    params.write_text("/**:\n  ros__parameters:\n    camera_info_timeout_s: 0.3\n    window_events: 10000\n")
    node = start_node(ros, "-r", "events:=/dvs/events", params_file=params)
    estimates = ros.collect(TwistStamped, "/angular_velocity")
    events = slice_events("boxes_rotation")
    publish_event_array(ros, events[:10000])
    spin_until(ros.executor, lambda: False, 2.0)
    assert not estimates
    assert node.alive()
    assert "no calibration" in node.log()
    calibration = Calibration.davis240c()
    info = CameraInfo(width=240, height=180, distortion_model="plumb_bob")
    info.k = [calibration.fx, 0.0, calibration.cx, 0.0, calibration.fy, calibration.cy, 0.0, 0.0, 1.0]
    info.d = list(calibration.distortion)
    info_publisher = ros.publisher(CameraInfo, "/dvs/camera_info", 10)
    info_publisher.publish(info)
    spin_until(ros.executor, lambda: "using intrinsics from camera_info" in node.log(), 10.0)
    publish_event_array(ros, events[10000:])
    assert spin_until(ros.executor, lambda: len(estimates) >= 2, 60.0), node.log()
    assert "using intrinsics from camera_info" in node.log()


def test_loss_and_window_size_change_at_run_time(ros):
    """`ros2 param set` equivalent over the node's parameter service; a bad value is refused."""
    from rclpy.parameter import Parameter
    from rclpy.parameter_client import AsyncParameterClient

    node = start_node(ros, "-r", "events:=/dvs/events", "-p", "camera_info_timeout_s:=0.3", "-p", "queue_policy:=all")
    estimates = ros.collect(TwistStamped, "/angular_velocity")
    client = AsyncParameterClient(ros.node, "angular_velocity_node")
    assert client.wait_for_services(timeout_sec=20.0)

    def set_parameters(*parameters):
        future = client.set_parameters(list(parameters))
        assert spin_until(ros.executor, future.done, 20.0)
        return future.result().results

    refused = set_parameters(Parameter("loss", value="sharpest_possible"))
    assert not refused[0].successful and "variance" in refused[0].reason  # lists the valid names
    # a valid loss with a polarity mode it does not support (Table 2's "-") is refused too
    # (parameters are set one at a time: the loss alone is fine, then polarity is refused)
    loss_set, polarity_refused = set_parameters(Parameter("loss", value="mean_timestamp"),
                                                Parameter("use_polarity", value=True))
    assert loss_set.successful and not polarity_refused.successful
    assert "mean_timestamp" in polarity_refused.reason and "polarity" in polarity_refused.reason
    accepted = set_parameters(Parameter("loss", value="gradient_magnitude"),
                              Parameter("window_events", value=10000))
    assert all(result.successful for result in accepted)
    events = slice_events("boxes_rotation")
    publish_event_array(ros, events)
    assert spin_until(ros.executor, lambda: len(estimates) >= 3, 60.0), node.log()  # 30,000 / 10,000
    assert "estimating with loss 'gradient_magnitude'" in node.log()
    assert "windows of 10000 events" in node.log()
    omega = np.array([[m.twist.angular.x, m.twist.angular.y, m.twist.angular.z] for m in estimates])
    # the node now computes what the offline estimator computes with the new settings
    from focus_ros.estimators.angular_velocity import AngularVelocityEstimator, real_time_settings
    offline = AngularVelocityEstimator(Calibration.davis240c(), real_time_settings(loss="gradient_magnitude"))
    expected = np.array([offline.estimate(events[start:start + 10000]).angular_velocity
                         for start in range(0, 30000, 10000)])
    np.testing.assert_allclose(omega, expected, atol=1e-9)


@pytest.mark.parametrize("argument, words", [
    ("loss:=sharpness", ["loss 'sharpness' is not one of", "gradient_magnitude"]),
    ("estimator_cpus:=4096", ["estimator_cpus: CPU list '4096': CPU 4096 is not on this machine (CPUs 0-"]),
    ("estimator_cpus:=first", ["estimator_cpus: CPU list 'first': 'first' is not a CPU number"]),
    # outside a declared range, of the wrong type: rclpy's own refusals, also in one line
    ("window_rotation_deg:=-5.0", ["window_rotation_deg", "out of range", "-5.0"]),
    ("max_iterations:=many", ["max_iterations", "many"])])
def test_unusable_parameters_stop_the_node_with_one_line(tmp_path, argument, words):
    """A typo in a launch file: one line naming the parameter and the valid values, exit 1."""
    import subprocess

    from ros_harness import ros_environment

    result = subprocess.run([executable("angular_velocity_node"), "--ros-args", "--params-file",
                             str(PARAMS_FILE), "-p", argument],
                            env=ros_environment(), capture_output=True, text=True, timeout=60)
    assert result.returncode == 1
    assert "Traceback" not in result.stderr + result.stdout
    error_lines = [line for line in result.stderr.splitlines() if "error" in line]
    assert len(error_lines) == 1 and all(word in error_lines[0] for word in words), result.stderr


def test_a_dead_estimator_process_is_reported_and_restarted(ros):
    """The estimator runs in a process of its own: killed, it is restarted, the node says so
    in its log and /diagnostics, and later windows are estimated again. Pinned to a CPU
    (``estimator_cpus``), it runs there, and so does its successor."""
    import os
    import signal

    cpu = max(os.sched_getaffinity(0))
    node = start_node(ros, "-r", "events:=/dvs/events", "-p", "camera_info_timeout_s:=0.3",
                      "-p", "window_events:=10000", "-p", "queue_policy:=all", "-p", f"estimator_cpus:={cpu}")
    estimates = ros.collect(TwistStamped, "/angular_velocity")
    diagnostics = ros.collect(DiagnosticArray, "/diagnostics")
    events = slice_events("boxes_rotation")
    publish_event_array(ros, events)
    assert spin_until(ros.executor, lambda: len(estimates) >= 3, 60.0), node.log()

    def values():
        return {kv.key: kv.value for kv in diagnostics[-1].status[0].values} if diagnostics else {}

    diagnostics.clear()
    assert spin_until(ros.executor, lambda: int(values().get("estimator_process_pid", 0)) > 0, 5.0)
    pid = int(values()["estimator_process_pid"])
    assert pid != node.process.pid
    assert os.sched_getaffinity(pid) == {cpu} and values()["estimator_cpus"] == str(cpu)
    os.kill(pid, signal.SIGKILL)
    later = Events(events.x, events.y, events.t + 1_000_000_000, events.p)
    count = len(estimates)
    for _ in range(3):  # the window in progress when the worker died may be lost
        publish_event_array(ros, later)
        later = Events(later.x, later.y, later.t + 1_000_000_000, later.p)
        if spin_until(ros.executor, lambda: len(estimates) >= count + 2, 30.0):
            break
    assert len(estimates) >= count + 2, node.log()
    diagnostics.clear()
    assert spin_until(ros.executor, lambda: diagnostics, 5.0)
    check_worker_restart_reported(pid, values(), node)
    assert os.sched_getaffinity(int(values()["estimator_process_pid"])) == {cpu}
