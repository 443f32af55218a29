"""depth_node as `ros2 run` starts it, over real topics: REP-118 depth images that match the
clouds, and bad input (events without poses, poses that stop, poses jumping back, a camera at
rest, malformed messages) logged once, counted, survived; its parameters, those of the params file.
(The loop it shares with `focus-ros depth`, and the same outputs of both on one bag:
test/test_depth_pipeline.py.)"""

from __future__ import annotations

import time

import numpy as np
import pytest

rclpy = pytest.importorskip("rclpy")
pytest.importorskip("dvs_msgs.msg", reason="interface packages not built: run `make setup`")

from dvs_msgs.msg import EventArray  # noqa: E402
from geometry_msgs.msg import PoseStamped  # noqa: E402
from sensor_msgs.msg import Image, PointCloud2  # noqa: E402

from conftest import REPOSITORY_ROOT, flattened_parameters  # noqa: E402
from focus_ros import codecs  # noqa: E402
from focus_ros.events import Events  # noqa: E402
from focus_ros.poses import Trajectory  # noqa: E402
from focus_ros.ros import depth_messages  # noqa: E402
from focus_ros.ros.messages import time_from_ns  # noqa: E402
from ros_harness import check_worker_restart_reported, node_session, spin_until  # noqa: E402

PARAMS_FILE = REPOSITORY_ROOT / "config" / "depth_davis240c.yaml"
SHIFT_NS = 10_000_000_000   # event and pose times start at 10 s, so that poses can jump back
E2E_KEYFRAME_EVENTS = 160_000   # 3 keyframes of the 1.2-s slider (~490 k events) and the rest (~12 k)


# ============================================================================ parameters


def test_params_file_lists_every_parameter_with_its_default():
    """config/depth_davis240c.yaml is the reference list: every declared parameter, nothing
    unknown (rclpy would ignore a misspelt one silently), defaults as declared."""
    import yaml

    from focus_ros.ros.depth_node import SETTINGS_CLASSES
    from focus_ros.ros.estimating_node import RunnerSettings
    from focus_ros.ros.event_input import EventInputSettings
    from focus_ros.settings import declared, to_parameter_value

    listed = flattened_parameters(yaml.safe_load(PARAMS_FILE.read_text())["/**"]["ros__parameters"])
    defaults = {item.parameter: to_parameter_value(item, item.default)
                for settings_class in (EventInputSettings, RunnerSettings, *SETTINGS_CLASSES)
                for item in declared(settings_class) if item.parameter is not None}
    assert sorted(listed) == sorted(defaults)
    assert {name: value for name, value in listed.items() if not name.startswith("calibration.")} == \
        {name: value for name, value in defaults.items() if not name.startswith("calibration.")}


# ============================================================================ through ROS


def slider_recording():
    """1.2 s of the simulated slider (camera sliding at 0.25 m/s in front of panels), times
    shifted to start at 10 s (also test/test_depth_pipeline.py's)."""
    from focus_ros.sources.simulator import simulate_preset

    recording = simulate_preset("slider", duration_s=1.2, seed=1)
    events = recording.events
    recording.events = Events(events.x, events.y, events.t + SHIFT_NS, events.p)
    recording.poses.t = recording.poses.t + SHIFT_NS
    recording.depth_times = recording.depth_times + SHIFT_NS
    return recording


@pytest.fixture(scope="module")
def slider():
    return slider_recording()


@pytest.fixture
def ros(tmp_path, monkeypatch):
    with node_session("depth_test_client", monkeypatch, tmp_path, reports_depth=100) as session:
        yield session


#: keyframes by event count only (keyframe_events), not by parallax, each queued as cut: for the tests that
#: count keyframes
BY_EVENTS = ("-p", "keyframe_baseline_fraction:=0.0", "-p", "keyframe_max_rotation_deg:=0.0",
             "-p", "keyframe_merge_when_busy:=false")


def start_depth_node(ros, *ros_args, by_events=True):
    """depth_node with its params file, the DAVIS and OptiTrack topics, reliable QoS; keyframes by
    event count unless ``by_events`` is false (then by parallax, the default)."""
    return ros.start("depth_node", "-r", "events:=/dvs/events", "-r", "pose:=/optitrack/davis",
                     *(BY_EVENTS if by_events else ()), *ros_args, params_file=PARAMS_FILE, reliable=True)


def last_values(ros):
    """The key/values and the message of the node's latest /diagnostics status."""
    status = [s for s in ros.reports[-1].status if "depth" in s.name][0]
    return {kv.key: kv.value for kv in status.values}, status.message


def publish_events(ros, publisher, events: Events, per_message=20000):
    for start in range(0, len(events), per_message):
        publisher.publish(codecs.encode_event_array(events[start:start + per_message], 180, 240, "dvs"))
        ros.spin(0.005)


def pose_message(t_ns, position, orientation_xyzw) -> PoseStamped:
    message = PoseStamped()
    message.header.stamp = time_from_ns(int(t_ns))
    message.header.frame_id = "world"
    message.pose.position.x, message.pose.position.y, message.pose.position.z = (float(v) for v in position)
    (message.pose.orientation.x, message.pose.orientation.y, message.pose.orientation.z,
     message.pose.orientation.w) = (float(v) for v in orientation_xyzw)
    return message


def publish_poses(ros, publisher, recording, t_first_ns, t_last_ns, position_override=None, every=5):
    poses = recording.poses
    inside = np.flatnonzero((poses.t >= t_first_ns) & (poses.t <= t_last_ns))
    inside = np.union1d(inside[::every], inside[[0, -1]])
    for index in inside:
        position = poses.position[index] if position_override is None else position_override
        publisher.publish(pose_message(poses.t[index], position, poses.orientation[index]))
        if index % 50 == 0:
            ros.spin(0.001)


def events_between(recording, t_first_ns, t_last_ns) -> Events:
    t = recording.events.t
    return recording.events[int(np.searchsorted(t, t_first_ns)):int(np.searchsorted(t, t_last_ns))]


@pytest.mark.parametrize("points_frame", ["world", "camera"])
def test_depth_image_follows_rep118_and_matches_the_cloud(ros, slider, points_frame):
    start_depth_node(ros, "-p", "keyframe_events:=60000", "-p", "camera_info_timeout_s:=0.2",
                     "-p", f"points_frame:={points_frame}")
    clouds = ros.collect(PointCloud2, "/depth/points")
    images = ros.collect(Image, "/depth/image")
    confidences = ros.collect(Image, "/depth/confidence")
    events_out = ros.publisher(EventArray, "/dvs/events", 1000)
    poses_out = ros.publisher(PoseStamped, "/optitrack/davis", 1000)
    t0 = int(slider.events.t[0])
    publish_poses(ros, poses_out, slider, t0 - 5_000_000, t0 + 700_000_000)
    publish_events(ros, events_out, events_between(slider, t0, t0 + 600_000_000))
    assert spin_until(ros.executor, lambda: len(clouds) >= 1 and len(images) >= 1 and len(confidences) >= 1,
                      60.0)
    cloud, image, confidence = clouds[0], images[0], confidences[0]
    assert image.encoding == "32FC1" and (image.height, image.width) == (180, 240)
    assert image.header.stamp == cloud.header.stamp == confidence.header.stamp
    assert image.header.frame_id == "dvs"
    assert cloud.header.frame_id == ("world" if points_frame == "world" else "dvs")
    depth = depth_messages.decode_float_image(image)
    known = np.isfinite(depth)
    fields = depth_messages.decode_point_cloud(cloud)
    # one point per known pixel (NaN = unknown: REP-118), its depth field = the image's value
    assert known.sum() == cloud.width > 100
    assert np.all(depth[known] > 0)
    np.testing.assert_array_equal(np.sort(depth[known]), np.sort(fields["depth"]))
    # every point is the back-projection of one known pixel of the depth image (moved with the
    # reference pose in the world frame): project it back and compare
    calibration = slider.calibration
    stamp_ns = cloud.header.stamp.sec * 1_000_000_000 + cloud.header.stamp.nanosec
    world_from_camera = Trajectory.from_poses(slider.poses).world_from_camera(stamp_ns)
    xyz = np.column_stack([fields["x"], fields["y"], fields["z"]]).astype(np.float64)
    camera = (xyz - world_from_camera[:3, 3]) @ world_from_camera[:3, :3] if points_frame == "world" else xyz
    columns = np.round(calibration.fx * camera[:, 0] / camera[:, 2] + calibration.cx).astype(int)
    rows = np.round(calibration.fy * camera[:, 1] / camera[:, 2] + calibration.cy).astype(int)
    hit = np.zeros_like(known)
    hit[rows, columns] = True
    assert np.array_equal(hit, known) and len(set(zip(rows, columns))) == cloud.width
    np.testing.assert_allclose(camera[:, 2], depth[rows, columns], rtol=1e-5)
    np.testing.assert_allclose(camera[:, 0], (columns - calibration.cx) / calibration.fx * depth[rows, columns],
                               atol=1e-4)
    np.testing.assert_allclose(camera[:, 1], (rows - calibration.cy) / calibration.fy * depth[rows, columns],
                               atol=1e-4)
    # confidence: 32FC1, finite wherever there is a depth
    assert confidence.encoding == "32FC1"
    assert np.all(np.isfinite(depth_messages.decode_float_image(confidence)[known]))


def test_with_sim_time_and_no_clock_the_last_keyframe_is_flushed(ros, slider):
    """use_sim_time true and nothing on /clock (a bag played without --clock): the events left
    when the stream stops still make a keyframe after keyframe_flush_idle_s (the flush timer
    runs on the steady clock; on the node's clock it would wait for simulated time forever)."""
    start_depth_node(ros, "-p", "use_sim_time:=true", "-p", "keyframe_events:=10000000",
                     "-p", "keyframe_flush_idle_s:=0.5", "-p", "camera_info_timeout_s:=0.2")
    clouds = ros.collect(PointCloud2, "/depth/points")
    events_out = ros.publisher(EventArray, "/dvs/events", 1000)
    poses_out = ros.publisher(PoseStamped, "/optitrack/davis", 1000)
    t0 = int(slider.events.t[0])
    publish_poses(ros, poses_out, slider, t0 - 5_000_000, t0 + 500_000_000)
    events = events_between(slider, t0, t0 + 400_000_000)
    publish_events(ros, events_out, events)
    # no keyframe is complete (10 M events each): only the flush after 0.5 s idle makes one
    assert spin_until(ros.executor, lambda: len(clouds) >= 1, 60.0), "no keyframe flushed with use_sim_time"
    assert spin_until(ros.executor, lambda: int(last_values(ros)[0]["keyframes_offered"]) >= 1, 5.0)
    assert int(last_values(ros)[0]["keyframes_offered"]) == 1 and len(clouds) == 1


def test_bad_input_is_logged_once_counted_and_survived(ros, slider):
    """Malformed messages, events without poses, a camera at rest, poses jumping back, out of
    order or not finite, poses that stop: each logged once and counted; later good data still
    yields depth."""
    node = start_depth_node(ros, "-p", "keyframe_events:=30000", "-p", "camera_info_timeout_s:=0.2",
                                 "-p", "pose_timeout_s:=0.5", "-p", "keyframe_flush_idle_s:=0.0")
    clouds = ros.collect(PointCloud2, "/depth/points")
    events_out = ros.publisher(EventArray, "/dvs/events", 1000)
    poses_out = ros.publisher(PoseStamped, "/optitrack/davis", 1000)
    raw_out = ros.node.create_publisher(EventArray, "/dvs/events", 10)
    t0 = int(slider.events.t[0])

    # 1. malformed event messages (truncated CDR), twice
    good = bytes(codecs.encode_event_array(events_between(slider, t0, t0 + 10_000_000), 180, 240, "dvs"))
    for _ in range(2):
        raw_out.publish(good[:37])
    # 2. events without poses: held, reported
    publish_events(ros, events_out, events_between(slider, t0, t0 + 300_000_000))
    count = len(ros.reports)
    assert spin_until(ros.executor, lambda: len(ros.reports) > count + 1 and "no poses" in last_values(ros)[1],
                      10.0), node.log()
    values, _ = last_values(ros)
    assert int(values["malformed_messages"]) == 2
    assert int(values["events_held_for_poses"]) > 0
    # 3. a camera at rest: poses that cover those events but never move -> no depth, said so
    publish_poses(ros, poses_out, slider, t0 - 5_000_000, t0 + 320_000_000,
                  position_override=slider.poses.position[0])
    assert spin_until(ros.executor, lambda: int(last_values(ros)[0]["keyframes_without_depth"]) >= 1, 30.0), \
        node.log()
    assert not clouds
    # 4. poses jumping back in time: the trajectory restarts
    poses_out.publish(pose_message(t0 - 3_000_000_000, slider.poses.position[0], slider.poses.orientation[0]))
    # 5. good data: true poses and events, later in time -> depth; among the poses one 10 ms
    #    out of order and one not finite: each dropped and counted
    publish_poses(ros, poses_out, slider, t0 + 340_000_000, t0 + 900_000_000)
    poses_out.publish(pose_message(t0 + 890_000_000, slider.poses.position[0], slider.poses.orientation[0]))
    poses_out.publish(pose_message(t0 + 905_000_000, [np.nan, 0.0, 0.0], slider.poses.orientation[0]))
    publish_events(ros, events_out, events_between(slider, t0 + 350_000_000, t0 + 850_000_000))
    assert spin_until(ros.executor, lambda: len(clouds) >= 1, 60.0), node.log()
    # 6. poses that stop while events go on
    publish_events(ros, events_out, events_between(slider, t0 + 950_000_000, t0 + 1_150_000_000))
    assert spin_until(ros.executor, lambda: "poses stopped" in last_values(ros)[1], 10.0), node.log()
    values, _ = last_values(ros)
    assert int(values["pose_restarts"]) == 1
    assert int(values["poses_out_of_order"]) == 1 and int(values["poses_invalid"]) == 1
    assert int(values["keyframes_published"]) >= 1
    assert node.alive()
    log = node.log()
    for text in ("event message ignored", "no poses on", "no parallax", "poses jumped back", "poses out of order",
                 "is not finite", "poses stopped"):
        assert log.count(text) == 1, (text, log)
    assert "Traceback" not in log


def test_odometry_of_a_body_with_a_camera_from_body_transform_gives_the_cameras_depth(ros, slider):
    """nav_msgs/Odometry of a body mounted off the camera (camera_from_body parameters): the
    node turns body poses into camera poses; a wrong composition would move the cloud off
    the ground truth by centimetres (the 10 cm offset) and degrees (the 90 deg rotation)."""
    from nav_msgs.msg import Odometry

    from focus_ros.poses import matrix_to_quaternion, pose_matrix, quaternion_to_matrix
    from focus_ros.evaluation.depth import cloud_error_summary, cloud_relative_errors
    from focus_ros.sources.depth_maps import DepthGroundTruth

    translation = [0.05, -0.02, 0.10]                              # m, body origin in camera coordinates
    rotation = [0.0, 0.7071067811865476, 0.0, 0.7071067811865476]   # 90 deg about the camera's y axis
    camera_from_body = pose_matrix(quaternion_to_matrix(np.array(rotation)), translation)
    node = start_depth_node(ros, "-p", f"keyframe_events:={E2E_KEYFRAME_EVENTS}", "-p", "camera_info_timeout_s:=0.2",
                                 "-p", "pose_message_type:=nav_msgs/Odometry", "-r", "odometry:=/vio/odometry",
                                 "-p", f"camera_from_body.translation_m:={translation}",
                                 "-p", f"camera_from_body.rotation_xyzw:={rotation}")
    clouds = ros.collect(PointCloud2, "/depth/points")
    events_out = ros.publisher(EventArray, "/dvs/events", 1000)
    odometry_out = ros.publisher(Odometry, "/vio/odometry", 1000)
    t0 = int(slider.events.t[0])
    poses = slider.poses
    for index in np.flatnonzero((poses.t >= t0 - 5_000_000) & (poses.t <= t0 + 600_000_000))[::5]:
        world_from_body = pose_matrix(quaternion_to_matrix(poses.orientation[index]), poses.position[index]) \
            @ camera_from_body
        message = Odometry()
        message.header.stamp = time_from_ns(int(poses.t[index]))
        message.header.frame_id = "odom"
        message.child_frame_id = "imu"
        p, q = world_from_body[:3, 3], matrix_to_quaternion(world_from_body[:3, :3])
        message.pose.pose.position.x, message.pose.pose.position.y, message.pose.pose.position.z = (float(v) for v in p)
        (message.pose.pose.orientation.x, message.pose.pose.orientation.y, message.pose.pose.orientation.z,
         message.pose.pose.orientation.w) = (float(v) for v in q)
        odometry_out.publish(message)
    publish_events(ros, events_out, events_between(slider, t0, t0 + 550_000_000))
    assert spin_until(ros.executor, lambda: len(clouds) >= 1, 60.0), node.log()
    cloud = clouds[0]
    assert cloud.header.frame_id == "odom"        # the poses' world frame
    stamp = cloud.header.stamp.sec * 1_000_000_000 + cloud.header.stamp.nanosec
    errors = cloud_relative_errors(depth_messages.cloud_points(cloud)[0], stamp,
                                   DepthGroundTruth.from_recording(slider), Trajectory.from_poses(slider.poses),
                                   slider.calibration)
    summary = cloud_error_summary(errors)
    # the bounds of the end-to-end test below (same keyframes, camera poses given directly)
    assert summary["median_relative_error"] < 0.03 and summary["within_5_percent"] > 0.5, summary


def node_env(ros) -> dict:
    """The environment of this test's ROS domain, for the processes it starts."""
    import os

    return {**os.environ, "PYTHONUNBUFFERED": "1"}


def _depth_values(reports, node_name: str) -> dict:
    """The key/values of ``node_name``'s latest /diagnostics status ({} before its first)."""
    for report in reversed(reports):
        for status in report.status:
            if status.name.startswith(node_name + ":"):
                return {kv.key: kv.value for kv in status.values}
    return {}


def prime_pose_topic(ros, publisher, recording, before_ns: int, node_names, timeout_s: float = 30.0) -> None:
    """Publish the recording's first pose, stamped a second before ``before_ns`` and a millisecond
    later each time, until every node of ``node_names`` counts a pose received in its /diagnostics.
    The nodes subscribe to poses best effort (as mocap publishes them), and Fast DDS matches the
    two ends one after the other: a sample sent after the publisher matched a node but before the
    node matched the publisher is dropped. Under load that lost the first poses of a burst, so the
    events before the first pose received were not used and that node's first keyframe started a
    few ms later than its twin's (CI, test_depth_node_tf: 10.2011 s against 10.1979 s). The primer
    lies before every event, so the clouds are as without it."""
    poses = recording.poses
    stamp_ns = before_ns - 1_000_000_000
    deadline = time.monotonic() + timeout_s
    while not all(int(_depth_values(ros.reports, name).get("poses_received", 0)) > 0 for name in node_names):
        assert time.monotonic() < deadline, f"{node_names}: no primer pose counted in {timeout_s} s"
        publisher.publish(pose_message(stamp_ns, poses.position[0], poses.orientation[0]))
        stamp_ns += 1_000_000
        ros.spin(0.25)


def test_estimator_process_and_thread_give_the_same_depth_and_a_killed_worker_is_restarted(ros, slider):
    """Two depth nodes on the same events and poses: one builds the keyframes in a process of
    its own (the default: a keyframe's events through shared memory, its poses pickled), one
    in a thread of the node (estimator_process false). Same code on the same keyframes, so the
    clouds and depth images must be byte-identical: any difference would mean events or poses
    lost or altered on the way. Then the process is killed: logged, restarted, counted in
    /diagnostics, and the next keyframes get depth again."""
    import os
    import signal

    nodes, clouds, images = {}, {}, {}
    for name, in_process in (("process", "true"), ("thread", "false")):
        nodes[name] = start_depth_node(
            ros, "-r", f"__node:=depth_{name}", "-r", f"depth/points:=/{name}/points",
            "-r", f"depth/image:=/{name}/image", "-p", f"estimator_process:={in_process}",
            "-p", "keyframe_events:=60000", "-p", "camera_info_timeout_s:=0.2",
            "-p", "keyframe_flush_idle_s:=0.0", "-p", "max_pending_keyframes:=100")
        clouds[name] = ros.collect(PointCloud2, f"/{name}/points")
        images[name] = ros.collect(Image, f"/{name}/image")
    assert spin_until(ros.executor, lambda: all(_depth_values(ros.reports, f"depth_{name}") for name in nodes),
                      30.0)
    events_out = ros.node.create_publisher(EventArray, "/dvs/events", 1000)
    poses_out = ros.node.create_publisher(PoseStamped, "/optitrack/davis", 1000)
    assert spin_until(ros.executor, lambda: events_out.get_subscription_count() >= 2 and
                      poses_out.get_subscription_count() >= 2, 20.0)
    t0 = int(slider.events.t[0])
    prime_pose_topic(ros, poses_out, slider, t0 - 5_000_000, [f"depth_{name}" for name in nodes])
    publish_poses(ros, poses_out, slider, t0 - 5_000_000, t0 + 1_150_000_000)
    publish_events(ros, events_out, events_between(slider, t0, t0 + 500_000_000))
    assert spin_until(ros.executor, lambda: min(len(clouds[n]) for n in nodes) >= 2 and
                      min(len(images[n]) for n in nodes) >= 2, 60.0), nodes["process"].log() + nodes["thread"].log()
    ros.spin(0.5)
    assert len(clouds["process"]) == len(clouds["thread"])
    for from_process, from_thread in zip(clouds["process"], clouds["thread"]):
        assert from_process.header.stamp == from_thread.header.stamp and from_process.width > 100
        assert bytes(from_process.data) == bytes(from_thread.data)
    for from_process, from_thread in zip(images["process"], images["thread"]):
        assert bytes(from_process.data) == bytes(from_thread.data)

    values = _depth_values(ros.reports, "depth_process")
    pid = int(values["estimator_process_pid"])
    assert pid not in (0, nodes["process"].process.pid)
    assert int(_depth_values(ros.reports, "depth_thread")["estimator_process_pid"]) == 0
    os.kill(pid, signal.SIGKILL)
    count = len(clouds["process"])
    publish_events(ros, events_out, events_between(slider, t0 + 500_000_000, t0 + 1_100_000_000))
    assert spin_until(ros.executor, lambda: len(clouds["process"]) >= count + 1, 60.0), nodes["process"].log()
    ros.reports.clear()
    assert spin_until(ros.executor, lambda: _depth_values(ros.reports, "depth_process"), 5.0)
    check_worker_restart_reported(pid, _depth_values(ros.reports, "depth_process"), nodes["process"])
