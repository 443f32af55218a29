"""The angular velocity node fed as each ROS 2 event-camera driver feeds it: EventPacket
messages of every encoding (evt3 on the camera's own clock, libcaer / libcaer_cmp / mono
on the host clock), and the ecosystem's own evt3 and libcaer bags through replay_node.
Every published stamp must be ROS time: inside the span of the messages' header stamps.

Real processes on loopback, as `ros2 run` starts them (test/ros_harness.py)."""

from __future__ import annotations

import numpy as np
import pytest

rclpy = pytest.importorskip("rclpy")
pytest.importorskip("event_camera_msgs.msg", reason="interface packages not built: run `make setup`")

from event_camera_msgs.msg import EventPacket  # noqa: E402
from geometry_msgs.msg import TwistStamped  # noqa: E402

from conftest import DATASET_WINDOWS, REPOSITORY_ROOT, peer_bag, slice_folder  # noqa: E402
from focus_ros import codecs  # noqa: E402
from focus_ros.events import Events  # noqa: E402
from focus_ros.sources import bags  # noqa: E402
from focus_ros.sources.ecd import read_ecd_folder  # noqa: E402
from ros_harness import node_session, spin_until  # noqa: E402

SECOND = 1_000_000_000
PARAMS_FILE = REPOSITORY_ROOT / "config" / "davis240c.yaml"
#: published contrast-maximisation estimate over the boxes_rotation slice, rad/s
BOXES_REFERENCE = np.array([3.576, 3.945, -1.754])
ROS_START = 1_763_900_000 * SECOND  # the host clock when the recording starts (ns)


@pytest.fixture
def ros(tmp_path, monkeypatch):
    with node_session("driver_test_client", monkeypatch, tmp_path) as session:
        yield session


def start_estimator(ros, *ros_args):
    """The angular velocity node on EventPacket messages at /event_camera/events, reliable QoS."""
    return ros.start("angular_velocity_node", "-r", "events:=/event_camera/events",
                     "-p", "event_message_type:=event_camera_msgs/EventPacket",
                     "-p", "camera_info_timeout_s:=0.5", *DATASET_WINDOWS, *ros_args, params_file=PARAMS_FILE,
                     reliable=True)


def stamp_ns(message) -> int:
    return message.header.stamp.sec * SECOND + message.header.stamp.nanosec


@pytest.mark.parametrize("encoding", codecs.SUPPORTED_PACKET_ENCODINGS)
def test_node_fed_event_packets_of_every_encoding_stamps_in_ros_time(ros, encoding):
    executor = ros.executor
    estimates = ros.collect(TwistStamped, "/angular_velocity")
    process = start_estimator(ros)
    slice_events = read_ecd_folder(slice_folder("boxes_rotation")).events
    # the events in host (ROS) time, whole microseconds (the cameras' resolution)
    t = ROS_START + (slice_events.t - slice_events.t[0]) // 1000 * 1000
    events = Events(slice_events.x, slice_events.y, t, slice_events.p)
    # evt3: the camera's clock reads 3 s since power-up at the first event; the others carry
    # host time in time_base (libcaer_driver) and ignore this
    camera_clock_origin = ROS_START - 3 * SECOND
    publisher = ros.publisher(EventPacket, "/event_camera/events", 100)
    stamps = []
    for seq, begin in enumerate(range(0, len(events), 3000)):
        chunk = events[begin:begin + 3000]
        stamps.append(int(chunk.t[-1]) + 200_000)  # the driver stamps when it sends: a bit later
        publisher.publish(codecs.encode_event_packet(
            chunk, 180, 240, encoding, "event_camera", stamp_ns=stamps[-1], seq=seq,
            sensor_time_offset_ns=camera_clock_origin))
        executor.spin_once(timeout_sec=0.01)
    assert spin_until(executor, lambda: estimates, 60.0), process.log()
    estimate = estimates[0]
    omega = np.array([estimate.twist.angular.x, estimate.twist.angular.y, estimate.twist.angular.z])
    assert np.linalg.norm(omega - BOXES_REFERENCE) < 0.5, omega
    # ROS time: within the messages' header stamps (not the camera's 3 s, not 1970)
    assert stamps[0] - 10_000_000 <= stamp_ns(estimate) <= stamps[-1], (stamp_ns(estimate), stamps)
    if encoding != "evt3":  # host clock: the events' own times; the window lies inside them
        assert events.t[0] <= stamp_ns(estimate) <= events.t[-1]
    assert process.alive()


@pytest.mark.parametrize("relative, width, height", [
    ("event_camera_codecs/test_data_evt3_trigger", 1280, 720),
    ("event_camera_codecs/test_data_libcaer_rollover", 640, 480),
])
def test_peer_bag_replayed_through_the_node_gives_stamps_within_its_header_stamps(
        ros, relative, width, height):
    executor = ros.executor
    estimates = ros.collect(TwistStamped, "/angular_velocity")
    path = peer_bag(relative)
    header_stamps = [info.stamp_ns for _, info in bags.iter_bag_events(path)]
    focal = 0.8 * width
    estimator = start_estimator(
        ros, "-p", f"calibration.width:={width}", "-p", f"calibration.height:={height}",
        "-p", f"calibration.fx:={focal}", "-p", f"calibration.fy:={focal}",
        "-p", f"calibration.cx:={width / 2}", "-p", f"calibration.cy:={height / 2}",
        "-p", "calibration.distortion:=[0.0, 0.0, 0.0, 0.0, 0.0]", "-p", "window_events:=20000",
        # (the peer recordings hardly move: their estimates would be withheld as too little
        # motion or a flat focus; this test is about the stamps)
        "-p", "queue_policy:=all", "-p", "min_motion_px:=0.0", "-p", "min_focus_gain:=0.0")
    replay = ros.start("replay_node", "-p", f"bag:={path}", "-p", "rate:=0.0",
                       "-p", "wait_for_subscribers_s:=20.0", wait_for_report=False)
    assert spin_until(executor, lambda: not replay.alive(), 120.0), replay.log()
    spin_until(executor, lambda: False, 2.0)  # the last estimates on their way
    assert estimates, estimator.log() + replay.log()
    published = np.array([stamp_ns(e) for e in estimates])
    assert min(header_stamps) - 20_000_000 <= published.min(), (published.min(), min(header_stamps))
    assert published.max() <= max(header_stamps), (published.max(), max(header_stamps))
    assert estimator.alive()
