"""depth_node under the motion a robot makes, as `ros2 run` starts it, over real topics (issue 25):
a 6-DoF bag replayed into it gives clouds and a fused map (depth/map) within the offline
evaluation's bounds, with keyframes by parallax (the default); the map stays within its bound
over a long stream; a pure rotation gives "no parallax", not a cloud; and (issue 23 item 5) a
node that drops its events says so in /diagnostics with the reason, instead of OK."""

from __future__ import annotations

import re

import numpy as np
import pytest

rclpy = pytest.importorskip("rclpy")
pytest.importorskip("dvs_msgs.msg", reason="interface packages not built: run `make setup`")

from dvs_msgs.msg import EventArray  # noqa: E402
from geometry_msgs.msg import PoseStamped  # noqa: E402
from sensor_msgs.msg import PointCloud2  # noqa: E402

from focus_ros.events import Events  # noqa: E402
from focus_ros.poses import Trajectory  # noqa: E402
from focus_ros.ros import depth_messages  # noqa: E402
from ros_harness import NodeProcess, executable, spin_until  # noqa: E402
import test_depth_node  # noqa: E402
from test_depth_node import (SHIFT_NS, events_between, last_values, node_env, pose_message,  # noqa: E402
                             publish_events, start_depth_node)

ros = test_depth_node.ros          # the session fixture (client node, processes stopped at the end)
slider = test_depth_node.slider    # 1.2 s of the simulated slider, times from 10 s


@pytest.fixture(scope="module")
def six_dof():
    """0.8 s of a 6-DoF motion (translation up to 0.1 m, rotation up to 60 deg/s) in front of
    the slider's panels at 0.55-2.3 m (seeded), times shifted to start at 10 s."""
    from focus_ros.sources.simulator import simulate_preset

    recording = simulate_preset("six_dof_near", 0.8, seed=3)
    events = recording.events
    recording.events = Events(events.x, events.y, events.t + SHIFT_NS, events.p)
    recording.poses.t = recording.poses.t + SHIFT_NS
    recording.depth_times = recording.depth_times + SHIFT_NS
    return recording


def _stamp_ns(message) -> int:
    return message.header.stamp.sec * 1_000_000_000 + message.header.stamp.nanosec


def test_a_6dof_bag_replayed_gives_clouds_and_a_map_within_the_offline_bounds(ros, six_dof, tmp_path):
    """Offline (`focus-ros depth` with its defaults, the same sequence unshifted, 2026-11-25):
    4 keyframes by parallax, 9,567 points, median relative error 1.6 %, 78 % within 5 % (each
    cloud judged from the ground-truth map nearest its reference time); the fused map (agreement
    within 2 % of the depth, from the looser map_support_neighbours, agreeing estimates
    averaged) 6,191 points, median 1.2 %, 87 % within 5 %. Bounds with margin for the keyframes the node cuts
    (the scene depth it tracks arrives with each result, and keyframes completed while the
    estimator is busy are merged, so its keyframes can end at other events than offline). A
    defect through ROS (poses from the wrong time, the map in another frame, keyframes mixed
    up) moves points by tens of percent."""
    from focus_ros.evaluation.depth import cloud_error_summary, cloud_relative_errors, map_relative_errors
    from focus_ros.sources.bags import read_bag_depth, write_bag

    bag = tmp_path / "six_dof.bag2"
    write_bag(bag, six_dof, version=2, storage="mcap")
    node = start_depth_node(ros, "-p", "max_pending_keyframes:=100", "-p", "keyframe_flush_idle_s:=5.0",
                            by_events=False)
    clouds = ros.collect(PointCloud2, "/depth/points")
    maps = ros.collect(PointCloud2, "/depth/map")
    replay = NodeProcess([executable("focus-ros"), "replay", str(bag), "--rate", "0.5", "--topics", "/dvs/events",
                          "/dvs/camera_info", "/optitrack/davis"], node_env(ros), tmp_path / "replay.log")
    spin_until(ros.executor, lambda: not replay.alive(), 120.0)
    assert replay.process.wait(timeout=1) == 0, replay.log()
    assert spin_until(ros.executor, lambda: len(clouds) >= 3 and len(maps) == len(clouds), 90.0), \
        (len(clouds), len(maps), node.log())
    ros.spin(6.0)  # the rest of the stream makes a keyframe after keyframe_flush_idle_s
    values, message = last_values(ros)
    assert int(values["keyframes_dropped"]) == 0 and message == "estimating depth", (values, message)
    assert node.alive() and "Traceback" not in node.log()

    ground_truth = read_bag_depth(bag)
    trajectory = Trajectory.from_poses(six_dof.poses)
    calibration = six_dof.calibration
    stamps = [_stamp_ns(c) for c in clouds]
    errors = np.concatenate([cloud_relative_errors(depth_messages.cloud_points(c)[0], t, ground_truth, trajectory,
                                                   calibration) for c, t in zip(clouds, stamps)])
    clouds_summary = cloud_error_summary(errors)
    assert clouds_summary["points"] > 4000, clouds_summary
    assert clouds_summary["median_relative_error"] < 0.03 and clouds_summary["within_5_percent"] > 0.65, \
        clouds_summary
    # the map: world frame, transient local, the last one holds every point keyframes agree on
    fused = maps[-1]
    assert fused.header.frame_id == clouds[-1].header.frame_id == "world"
    map_points = depth_messages.cloud_points(fused)[0]
    assert len(map_points) > 2000
    map_summary = cloud_error_summary(map_relative_errors(map_points, stamps, ground_truth, trajectory, calibration))
    assert map_summary["median_relative_error"] < 0.025 and map_summary["within_5_percent"] > 0.8, map_summary
    assert map_summary["within_5_percent"] > clouds_summary["within_5_percent"], (map_summary, clouds_summary)
    # a subscriber that comes late gets the map as it stands (transient local)
    from rclpy.qos import DurabilityPolicy, QoSProfile

    late = []
    ros.node.create_subscription(PointCloud2, "/depth/map", late.append,
                                 QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL))
    assert spin_until(ros.executor, lambda: late, 10.0)
    assert late[0].width == fused.width


def test_the_map_stays_bounded_over_a_long_stream_and_a_rotation_gives_no_parallax(ros, slider):
    """Six passes of the slider, each further along the world x axis (5 m apart, times going on),
    into a node whose map may hold 2,000 points: every map message stays within the bound and
    the last one holds the newest pass's ground. Before them, a pure rotation (the camera turning
    without moving): keyframes by rotation, each "no parallax", no cloud."""
    node = start_depth_node(ros, "-p", "map_max_points:=2000", "-p", "map_min_keyframes:=1",
                            "-p", "max_pending_keyframes:=100", "-p", "keyframe_flush_idle_s:=0.0",
                            "-p", "camera_info_timeout_s:=0.2", by_events=False)
    clouds = ros.collect(PointCloud2, "/depth/points")
    maps = ros.collect(PointCloud2, "/depth/map")
    events_out = ros.publisher(EventArray, "/dvs/events", 1000)
    poses_out = ros.publisher(PoseStamped, "/optitrack/davis", 1000)
    t0 = int(slider.events.t[0])
    span = int(slider.events.t[-1]) - t0 + 10_000_000

    # 1. a pure rotation: the slider's events with poses that turn at 1 rad/s about the camera's y axis
    from scipy.spatial.transform import Rotation
    base = Rotation.from_quat(slider.poses.orientation[0])
    for t in range(t0 - 5_000_000, t0 + span, 5_000_000):
        turn = Rotation.from_rotvec([0.0, (t - t0) / 1e9, 0.0])
        poses_out.publish(pose_message(t, slider.poses.position[0], (base * turn).as_quat()))
    publish_events(ros, events_out, events_between(slider, t0, t0 + span))
    assert spin_until(ros.executor, lambda: int(last_values(ros)[0]["keyframes_without_depth"]) >= 2, 60.0), \
        node.log()
    assert not clouds and "no parallax" in node.log()

    # 2. six passes along the slider, each 5 m further and later
    for passes in range(1, 7):
        shift_ns = passes * (span + 1_000_000_000)
        poses = slider.poses
        for index in range(0, len(poses.t), 5):
            poses_out.publish(pose_message(poses.t[index] + shift_ns, poses.position[index] + [5.0 * passes, 0, 0],
                                           poses.orientation[index]))
            if index % 100 == 0:
                ros.spin(0.001)
        events = slider.events
        publish_events(ros, events_out, Events(events.x, events.y, events.t + shift_ns, events.p))
        assert spin_until(ros.executor, lambda: len(clouds) >= 2 * passes, 90.0), (len(clouds), node.log())
    ros.spin(3.0)
    assert maps and all(m.width <= 2000 for m in maps), [m.width for m in maps]
    values, _ = last_values(ros)
    assert int(values["map_points_held"]) <= 2000
    last = depth_messages.cloud_points(maps[-1])[0]
    # the newest pass's ground: around x = 30 m (the first poses' world x plus 5 m per pass)
    assert np.median(last[:, 0]) > slider.poses.position[:, 0].min() + 5.0 * 6 - 3.0
    assert node.alive() and "Traceback" not in node.log()


def test_poses_far_ahead_of_the_events_make_the_node_report_an_error_with_the_reason(ros, slider):
    """Poses 1000 s ahead of the events: every event precedes the first pose and is dropped. The
    node used to say OK "estimating depth"; now /diagnostics is ERROR and says why."""
    from diagnostic_msgs.msg import DiagnosticStatus

    node = start_depth_node(ros, "-p", "camera_info_timeout_s:=0.2")
    events_out = ros.publisher(EventArray, "/dvs/events", 1000)
    poses_out = ros.publisher(PoseStamped, "/optitrack/davis", 1000)
    t0 = int(slider.events.t[0])
    ahead_ns = 1000 * 1_000_000_000
    poses = slider.poses
    for index in range(0, len(poses.t), 5):
        poses_out.publish(pose_message(poses.t[index] + ahead_ns, poses.position[index], poses.orientation[index]))
    ros.spin(0.5)

    def erroring():
        status = [s for s in ros.reports[-1].status if "depth" in s.name][0] if ros.reports else None
        return status is not None and status.level == DiagnosticStatus.ERROR and "dropping all" in status.message

    for start in range(0, 600_000_000, 100_000_000):  # events keep coming for a few reports
        publish_events(ros, events_out, events_between(slider, t0 + start, t0 + start + 100_000_000))
        ros.spin(0.5)
        if erroring():
            break
    assert spin_until(ros.executor, erroring, 10.0), (last_values(ros), node.log())
    _, message = last_values(ros)
    assert "earlier than the first pose" in message and "pose_time_offset_s" in message
    # how far ahead: 1000 s minus the 0.1-0.6 s of events sent so far
    assert re.search(r"the first pose is 999\.[4-9]\d\d s after the newest event", message), message
    assert node.alive() and "Traceback" not in node.log()
