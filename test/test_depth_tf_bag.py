"""Bags from robots: the camera's poses as a TF tree (/tf and /tf_static, issue 34), read into the
trajectory `focus-ros depth` uses (focus_ros.sources.trajectory_readers.read_bag_tf_trajectory) and
listed by `focus-ros info`.

The simulated slider sequence is written twice as real bags (rosbags): once with the camera's poses
on a PoseStamped topic, once as a robot would record them: a dynamic ``world -> rig`` at 200 Hz and
a static ``rig -> dvs`` (the camera's mounting: turned 90 deg about x then 10 deg about z, 5-7 cm
off the rig's origin), ``dvs`` being the events' frame_id. Composed back, the TF gives the camera
poses the topic holds, so the depth clouds must agree.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy.spatial import cKDTree
from scipy.spatial.transform import Rotation

from focus_ros.cli import main
from focus_ros.depth.ply import read_ply
from focus_ros.events import Events
from focus_ros.poses import matrix_to_quaternion, pose_matrix, quaternion_to_matrix
from focus_ros.sources.bags import LEGACY_TF_MESSAGE_TYPE, BagTransforms, read_bag_transforms, write_bag
from focus_ros.sources.recording import Poses, Recording
from focus_ros.sources.trajectory_readers import bag_pose_source, read_bag_tf_trajectory, read_bag_trajectory
from focus_ros.poses.transforms import StampedTransform

#: the camera's mounting on the rig: rig_from_camera (the static edge rig -> dvs)
MOUNT_ROTATION = Rotation.from_euler("xz", [90.0, 10.0], degrees=True)
MOUNT_TRANSLATION_M = (0.05, -0.02, 0.04)
#: the dynamic edge's rate (Hz): the simulator's 1 kHz poses, every 5th
TF_STEP = 5
#: --max-keyframes and the options both runs share (keyframes by parallax, the default)
DEPTH_ARGUMENTS = ["--no-pictures", "--max-keyframes", "4"]


def _rig_from_camera() -> np.ndarray:
    return pose_matrix(MOUNT_ROTATION.as_matrix(), np.array(MOUNT_TRANSLATION_M))


def _camera_poses_at_200_hz(recording: Recording) -> Poses:
    poses = recording.poses
    return Poses(poses.t[::TF_STEP].copy(), poses.position[::TF_STEP].copy(), poses.orientation[::TF_STEP].copy())


def _tf_of(poses: Poses, camera_frame: str = "dvs") -> BagTransforms:
    """The camera poses as a robot's TF: world -> rig (dynamic, world_from_rig = world_from_camera ·
    camera_from_rig), rig -> camera_frame (static, the mounting), and an edge off the way (rig ->
    imu_link, static) as robots have."""
    camera_from_rig = np.linalg.inv(_rig_from_camera())
    dynamic = []
    for t_ns, position, orientation in zip(poses.t.tolist(), poses.position, poses.orientation):
        world_from_rig = pose_matrix(quaternion_to_matrix(orientation), position) @ camera_from_rig
        dynamic.append(StampedTransform(t_ns, "world", "rig", tuple(world_from_rig[:3, 3]),
                                        tuple(matrix_to_quaternion(world_from_rig[:3, :3]))))
    t0 = int(poses.t[0])
    static = [StampedTransform(t0, "rig", camera_frame, MOUNT_TRANSLATION_M, tuple(MOUNT_ROTATION.as_quat())),
              StampedTransform(t0, "rig", "imu_link", (0.0, 0.0, 0.01), (0.0, 0.0, 0.0, 1.0))]
    return BagTransforms(static=static, dynamic=dynamic)


@pytest.fixture(scope="module")
def slider_bags(tmp_path_factory):
    """(the bag with a PoseStamped topic, the bag with TF) of 0.8 s of the slider, ROS 2 mcap."""
    from focus_ros.sources.simulator import simulate_preset

    folder = tmp_path_factory.mktemp("slider_tf")
    recording = simulate_preset("slider", duration_s=0.8, seed=1)
    poses = _camera_poses_at_200_hz(recording)
    with_topic = Recording(recording.events, recording.calibration, poses=poses)
    with_tf = Recording(recording.events, recording.calibration)
    write_bag(folder / "topic", with_topic)
    write_bag(folder / "tf", with_tf, transforms=_tf_of(poses))
    return folder / "topic", folder / "tf"


def _small_recording(frame_poses: Poses) -> Recording:
    """A few events over the poses' span: enough for a bag that `focus-ros info` reads."""
    from focus_ros.camera import Calibration

    t = np.linspace(frame_poses.t[0], frame_poses.t[-1], 200).astype(np.int64)
    return Recording(Events.from_arrays(np.arange(200) % 240, np.arange(200) % 180, t, np.arange(200) % 2),
                     Calibration.davis240c())


def _nearest_distances_m(points: np.ndarray, others: np.ndarray) -> np.ndarray:
    return cKDTree(others).query(points)[0]


def test_the_tf_bag_gives_the_clouds_of_the_pose_topic_bag(slider_bags, tmp_path, capsys):
    topic_bag, tf_bag = slider_bags
    assert main(["depth", str(topic_bag), "-o", str(tmp_path / "topic"), "--quiet", *DEPTH_ARGUMENTS]) == 0
    # not --quiet: the one line saying where the poses came from (auto: the bag has TF and no pose topic)
    assert main(["depth", str(tf_bag), "-o", str(tmp_path / "tf"), *DEPTH_ARGUMENTS]) == 0
    error = capsys.readouterr().err
    assert f"focus-ros depth: poses from {tf_bag}: /tf 'world' -> 'dvs' (161 poses)" in error
    for name in ("points.ply", "map.ply"):
        from_topic, from_tf = read_ply(tmp_path / "topic" / name), read_ply(tmp_path / "tf" / name)
        a = np.column_stack([from_topic[axis] for axis in "xyz"])
        b = np.column_stack([from_tf[axis] for axis in "xyz"])
        assert len(a) > 1000 and abs(len(b) - len(a)) <= 0.01 * len(a), (name, len(a), len(b))
        # the same points, in the world frame (not the rig's, not the camera's): each within 1 mm of one
        # of the other cloud's
        assert _nearest_distances_m(b, a).max() < 1e-3 and _nearest_distances_m(a, b).max() < 1e-3, name
    np.testing.assert_allclose(np.loadtxt(tmp_path / "tf" / "keyframes.csv", delimiter=",", skiprows=1,
                                          usecols=range(1, 9)),
                               np.loadtxt(tmp_path / "topic" / "keyframes.csv", delimiter=",", skiprows=1,
                                          usecols=range(1, 9)), atol=1e-6)


def test_a_ros1_bag_with_tf_messages_gives_the_pose_topics_trajectory(tmp_path):
    """ROS 1, TF recorded as the older tf/tfMessage, beside the same poses on a PoseStamped topic."""
    t = np.arange(0, 400_000_000, 5_000_000, dtype=np.int64) + 10_000_000_000
    angle = np.linspace(0.0, 1.5, len(t))
    rotation = Rotation.from_rotvec(np.column_stack([0.3 * angle, -angle, 0.5 * angle]))
    poses = Poses(t, np.column_stack([np.sin(angle), 0.2 * angle, np.cos(angle)]), rotation.as_quat())
    transforms = _tf_of(poses)
    transforms.message_type = LEGACY_TF_MESSAGE_TYPE
    # another robot's edge with a broken quaternion: ignored, and told
    transforms.dynamic.append(StampedTransform(int(t[3]), "world", "drone", (0.0, 0.0, 0.0), (0.0, 0.0, 0.0, 2.0)))
    recording = _small_recording(poses)
    recording.poses = poses
    write_bag(tmp_path / "robot.bag", recording, version=1, transforms=transforms)

    assert read_bag_transforms(tmp_path / "robot.bag").message_type == LEGACY_TF_MESSAGE_TYPE
    problems = []
    from_tf = read_bag_tf_trajectory(tmp_path / "robot.bag", "world", "dvs", on_problem=problems.append)
    assert problems == [f"{tmp_path / 'robot.bag'}: 1 TF problem, the first: transform ignored: transform 'world' "
                        f"-> 'drone' at {t[3] / 1e9:.6f} s: rotation of norm 2, not a unit quaternion"]
    from_topic = read_bag_trajectory(tmp_path / "robot.bag")
    assert from_tf.source == f"{tmp_path / 'robot.bag'}: /tf 'world' -> 'dvs'"
    np.testing.assert_array_equal(from_tf.t_ns, from_topic.t_ns)
    np.testing.assert_allclose(from_tf.position_m, from_topic.position_m, rtol=0, atol=1e-9)
    angles = (Rotation.from_quat(from_tf.orientation_xyzw).inv() * Rotation.from_quat(from_topic.orientation_xyzw))
    assert angles.magnitude().max() < 1e-9
    # the world frame by default: the root of the camera frame's tree
    assert read_bag_tf_trajectory(tmp_path / "robot.bag", "", "dvs").source.endswith("/tf 'world' -> 'dvs'")
    # `focus-ros depth`'s choice in a bag with both: the pose topic, unless frames are named
    assert bag_pose_source(tmp_path / "robot.bag") == "topic"
    assert bag_pose_source(tmp_path / "robot.bag", prefer_tf=True) == "tf"
    assert bag_pose_source(tmp_path / "robot.bag", "tf") == "tf"


def _error_line(capsys, argv) -> str:
    assert main(argv) == 1
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1 and "Traceback" not in error[0], error
    return error[0]


def test_a_tf_without_the_camera_frame_is_one_line_naming_the_known_frames(tmp_path, capsys):
    poses = Poses(np.arange(0, 200_000_000, 5_000_000, dtype=np.int64), np.zeros((40, 3)),
                  np.tile([0, 0, 0, 1.0], (40, 1)))
    # the mounting names the camera 'camera_link'; the events' frame_id is 'dvs'
    write_bag(tmp_path / "robot", _small_recording(poses), transforms=_tf_of(poses, camera_frame="camera_link"))
    out = str(tmp_path / "out")
    line = _error_line(capsys, ["depth", str(tmp_path / "robot"), "-o", out, "--quiet"])
    assert line.startswith(f"focus-ros depth: error: {tmp_path / 'robot'}: no transform ")
    assert line.endswith("'dvs' is unknown; known frames: camera_link, imu_link, rig, world")
    line = _error_line(capsys, ["depth", str(tmp_path / "robot"), "-o", out, "--quiet", "--world-frame", "world"])
    assert "no transform from 'world' to 'dvs': 'dvs' is unknown; known frames: camera_link, imu_link, rig" in line
    # a world frame below the moving edge: the camera does not move in it
    line = _error_line(capsys, ["depth", str(tmp_path / "robot"), "-o", out, "--quiet", "--world-frame", "rig",
                                "--camera-frame", "camera_link"])
    assert "only static transforms between 'rig' and 'camera_link'" in line
    # a bag with neither a pose topic nor TF: what it holds instead
    write_bag(tmp_path / "bare", _small_recording(poses))
    line = _error_line(capsys, ["depth", str(tmp_path / "bare"), "-o", out, "--quiet"])
    assert "no poses (no geometry_msgs/PoseStamped or nav_msgs/Odometry topic, no /tf); the bag holds " \
           "/dvs/camera_info (sensor_msgs/msg/CameraInfo, 1 message), /dvs/events" in line
    line = _error_line(capsys, ["depth", str(tmp_path / "bare"), "-o", out, "--quiet", "--pose-source", "tf"])
    assert "no TF (no /tf or /tf_static topic); the bag holds /dvs/camera_info" in line


def test_info_lists_the_tf_frames_and_their_parents(tmp_path, capsys):
    poses = Poses(np.arange(0, 1_200_000_000, 5_000_000, dtype=np.int64), np.zeros((240, 3)),
                  np.tile([0, 0, 0, 1.0], (240, 1)))
    write_bag(tmp_path / "robot", _small_recording(poses), transforms=_tf_of(poses))
    assert main(["info", str(tmp_path / "robot"), "--quiet"]) == 0
    text = capsys.readouterr().out
    lines = text[text.index("tf frames:"):].splitlines()
    assert lines == ["tf frames:", "  world -> rig (dynamic, 240 transforms, 200.0 Hz)", "  rig -> dvs (static)",
                     "  rig -> imu_link (static)"]
    assert main(["info", str(tmp_path / "robot"), "--quiet", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["tf_frames"] == [
        {"parent": "world", "child": "rig", "static": False, "transforms": 240, "rate_hz": pytest.approx(200.0)},
        {"parent": "rig", "child": "dvs", "static": True, "transforms": 1, "rate_hz": 0.0},
        {"parent": "rig", "child": "imu_link", "static": True, "transforms": 1, "rate_hz": 0.0}]
    # a bag without TF: nothing said
    write_bag(tmp_path / "bare", _small_recording(poses))
    assert main(["info", str(tmp_path / "bare"), "--quiet"]) == 0
    assert "tf frames" not in capsys.readouterr().out
    assert main(["info", str(tmp_path / "bare"), "--quiet", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["tf_frames"] == []


def _robot_bag(tmp_path, version: int) -> tuple:
    """A small bag with TF (ROS 1: the older tf/tfMessage) and the transforms written into it."""
    poses = Poses(np.arange(0, 300_000_000, 5_000_000, dtype=np.int64) + 10_000_000_000,
                  np.column_stack([np.linspace(0, 0.3, 60), np.zeros(60), np.zeros(60)]),
                  Rotation.from_rotvec(np.column_stack([np.zeros(60), np.linspace(0, 0.5, 60), np.zeros(60)]))
                  .as_quat())
    transforms = _tf_of(poses)
    if version == 1:
        transforms.message_type = LEGACY_TF_MESSAGE_TYPE
    path = tmp_path / ("robot.bag" if version == 1 else "robot")
    write_bag(path, _small_recording(poses), version=version, transforms=transforms)
    return path, transforms


def _as_tuples(transforms) -> list:
    return [(t.t_ns, t.parent, t.child, tuple(np.round(t.translation_m, 12)), tuple(np.round(t.rotation_xyzw, 12)))
            for t in transforms]


@pytest.mark.parametrize("version", [1, 2])
def test_replay_republishes_tf_as_tf2_messages(tmp_path, version):
    """`focus-ros replay`'s messages of a robot bag: /tf and /tf_static as tf2_msgs/TFMessage CDR (a
    ROS 1 tf/tfMessage converted), their transforms those written."""
    from focus_ros.sources.bags import open_bag_messages, typestore_with_event_types
    from focus_ros.sources.bags.messages import transforms_from_tf_message

    path, written = _robot_bag(tmp_path, version)
    source = open_bag_messages(path)
    assert source.topics["/tf"] == source.topics["/tf_static"] == "tf2_msgs/msg/TFMessage"
    store = typestore_with_event_types(2)
    replayed = {"/tf": [], "/tf_static": []}
    for topic, msgtype, _, payload, _, _ in source.messages():
        if topic in replayed:
            assert msgtype == "tf2_msgs/msg/TFMessage"
            replayed[topic] += transforms_from_tf_message(store.deserialize_cdr(payload, msgtype))
    assert _as_tuples(replayed["/tf"]) == _as_tuples(written.dynamic)
    assert _as_tuples(replayed["/tf_static"]) == _as_tuples(written.static)


def test_replay_node_publishes_tf_static_transient_local(tmp_path, monkeypatch):
    """A node started after the replay began still gets the static transforms: /tf_static goes out
    transient local, as tf2's static broadcaster publishes it; /tf volatile."""
    pytest.importorskip("rclpy")
    pytest.importorskip("tf2_msgs.msg", reason="interface packages not built: run `make setup`")
    from rclpy.qos import DurabilityPolicy

    from ros_harness import client_node, spin_until
    from focus_ros.ros.replay_node import BagReplayer

    path, _ = _robot_bag(tmp_path, 2)
    with client_node("tf_replay_test", monkeypatch) as (_, node, executor):
        replayer = BagReplayer(bag=str(path), rate=1.0, context=node.context)
        try:
            assert spin_until(executor, lambda: node.get_publishers_info_by_topic("/tf_static"), 10.0)
            durability = {topic: {info.qos_profile.durability for info in node.get_publishers_info_by_topic(topic)}
                          for topic in ("/tf", "/tf_static")}
            assert durability == {"/tf": {DurabilityPolicy.VOLATILE}, "/tf_static": {DurabilityPolicy.TRANSIENT_LOCAL}}
        finally:
            replayer.destroy_node()
