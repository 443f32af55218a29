"""depth_node with its camera poses from TF (/tf, /tf_static), over real topics: the same clouds
as from a PoseStamped topic, and TF's failures (a frame missing, transforms late, time jumping
back) said once, counted, survived."""

from __future__ import annotations

import numpy as np
import pytest

rclpy = pytest.importorskip("rclpy")
pytest.importorskip("dvs_msgs.msg", reason="interface packages not built: run `make setup`")
pytest.importorskip("tf2_msgs.msg", reason="interface packages not built: run `make setup`")

from dvs_msgs.msg import EventArray  # noqa: E402
from geometry_msgs.msg import PoseStamped, TransformStamped  # noqa: E402
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy  # noqa: E402
from sensor_msgs.msg import PointCloud2  # noqa: E402
from tf2_msgs.msg import TFMessage  # noqa: E402

from focus_ros.poses import matrix_to_quaternion, pose_matrix, quaternion_to_matrix  # noqa: E402
from focus_ros.ros import depth_messages  # noqa: E402
from focus_ros.ros.messages import time_from_ns  # noqa: E402
from ros_harness import node_session, spin_until  # noqa: E402
from test_depth_node import (BY_EVENTS, E2E_KEYFRAME_EVENTS, PARAMS_FILE, events_between, last_values,  # noqa: E402
                             prime_pose_topic, publish_events, publish_poses, slider_recording)

#: how the camera sits on the rig: 90 deg about z, then 10 deg about x, 8 cm off (rig_from_camera)
RIG_FROM_CAMERA = pose_matrix(
    quaternion_to_matrix(np.array([0.0, 0.0, np.sin(np.pi / 4), np.cos(np.pi / 4)]))
    @ quaternion_to_matrix(np.array([np.sin(np.radians(5)), 0.0, 0.0, np.cos(np.radians(5))])),
    [0.03, -0.08, 0.02])
STATIC_QOS = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL)


def start_depth_node(ros, *ros_args, pose_topic="/optitrack/davis"):
    """depth_node with its params file, keyframes by event count, the DAVIS topic and ``pose_topic``."""
    return ros.start("depth_node", "-r", "events:=/dvs/events", "-r", f"pose:={pose_topic}", *BY_EVENTS, *ros_args,
                     params_file=PARAMS_FILE, reliable=True)


@pytest.fixture(scope="module")
def slider():
    return slider_recording()


@pytest.fixture
def ros(tmp_path, monkeypatch):
    with node_session("depth_tf_test_client", monkeypatch, tmp_path, reports_depth=100) as session:
        yield session


def transform_message(t_ns: int, parent: str, child: str, parent_from_child: np.ndarray) -> TransformStamped:
    item = TransformStamped()
    item.header.stamp = time_from_ns(int(t_ns))
    item.header.frame_id, item.child_frame_id = parent, child
    translation, rotation = parent_from_child[:3, 3], matrix_to_quaternion(parent_from_child[:3, :3])
    item.transform.translation.x, item.transform.translation.y, item.transform.translation.z = \
        (float(v) for v in translation)
    (item.transform.rotation.x, item.transform.rotation.y, item.transform.rotation.z,
     item.transform.rotation.w) = (float(v) for v in rotation)
    return item


def publish_static(ros, camera_frame="dvs"):
    """rig -> camera on /tf_static (transient local, as tf2's static broadcaster); kept alive by the session."""
    publisher = ros.node.create_publisher(TFMessage, "/tf_static", STATIC_QOS)
    publisher.publish(TFMessage(transforms=[transform_message(0, "rig", camera_frame, RIG_FROM_CAMERA)]))
    return publisher


def publish_rig_poses(ros, publisher, recording, t_first_ns, t_last_ns, every=5, shift_ns=0):
    """world -> rig on /tf at the stamps publish_poses uses (200 Hz of the 1 kHz poses): the
    camera's poses composed with the inverse of its mounting."""
    poses = recording.poses
    inside = np.flatnonzero((poses.t >= t_first_ns) & (poses.t <= t_last_ns))
    inside = np.union1d(inside[::every], inside[[0, -1]])
    camera_from_rig = np.linalg.inv(RIG_FROM_CAMERA)
    for index in inside:
        world_from_rig = pose_matrix(quaternion_to_matrix(poses.orientation[index]), poses.position[index]) \
            @ camera_from_rig
        publisher.publish(TFMessage(transforms=[transform_message(poses.t[index] + shift_ns, "world", "rig",
                                                                  world_from_rig)]))
        if index % 50 == 0:
            ros.spin(0.001)


def test_poses_from_tf_give_the_clouds_of_the_pose_topic(ros, slider):
    """Two depth nodes on the same events: one takes PoseStamped camera poses, the other (pose
    source auto, nothing on its pose topic) a dynamic world -> rig at 200 Hz and a static rig ->
    camera with a rotation and an 8-cm offset. The camera poses are the same up to rounding, so
    the clouds must agree: same count within 1 %, every point within 1 mm of its twin. A wrong direction or
    order of the composition would move them by centimetres."""
    nodes, clouds = {}, {}
    for name, pose_topic, args in (("topic", "/optitrack/davis", ("-p", "pose_source:=topic")),
                                   ("tf", "/no_poses_here", ())):
        nodes[name] = start_depth_node(ros, "-r", f"__node:=depth_{name}", "-r", f"depth/points:=/{name}/points",
                                       "-p", f"keyframe_events:={E2E_KEYFRAME_EVENTS}",
                                       "-p", "camera_info_timeout_s:=0.2", *args, pose_topic=pose_topic)
        clouds[name] = ros.collect(PointCloud2, f"/{name}/points")
    events_out = ros.publisher(EventArray, "/dvs/events", 1000, count=2)
    poses_out = ros.publisher(PoseStamped, "/optitrack/davis", 1000)
    tf_out = ros.publisher(TFMessage, "/tf", 1000)
    static_out = publish_static(ros)  # noqa: F841 - kept alive for transient local
    t0 = int(slider.events.t[0])
    prime_pose_topic(ros, poses_out, slider, t0 - 5_000_000, ["depth_topic"])
    publish_poses(ros, poses_out, slider, t0 - 5_000_000, t0 + 1_000_000_000)
    publish_rig_poses(ros, tf_out, slider, t0 - 5_000_000, t0 + 1_000_000_000)
    publish_events(ros, events_out, events_between(slider, t0, t0 + 950_000_000))
    assert spin_until(ros.executor, lambda: all(len(c) >= 2 for c in clouds.values()), 120.0), \
        nodes["tf"].log() + nodes["topic"].log()
    assert "camera poses from TF, 'world' -> 'dvs' (pose_source auto)" in nodes["tf"].log()
    for topic_cloud, tf_cloud in zip(clouds["topic"][:2], clouds["tf"][:2]):
        assert topic_cloud.header.stamp == tf_cloud.header.stamp
        assert topic_cloud.header.frame_id == tf_cloud.header.frame_id == "world"
        a, b = depth_messages.cloud_points(topic_cloud)[0], depth_messages.cloud_points(tf_cloud)[0]
        assert len(a) > 1000 and abs(len(a) - len(b)) <= 0.01 * len(a), (len(a), len(b))
        if len(a) == len(b):
            distances = np.linalg.norm(np.sort(a, axis=0) - np.sort(b, axis=0), axis=1)
        else:  # nearest neighbours both ways
            from scipy.spatial import cKDTree
            distances = np.concatenate([cKDTree(b).query(a)[0], cKDTree(a).query(b)[0]])
        assert distances.max() < 1e-3, np.quantile(distances, [0.5, 0.99, 1.0])


def test_tf_failures_are_said_once_counted_and_survived(ros, slider):
    """With poses from TF only: the camera's frame missing from the tree (held, the known
    frames named), then its static transform arriving (the held events give depth); transforms
    stopping longer than pose_timeout_s (said, counted) and coming back (depth again); time
    jumping back (forgotten, restarted). Each said once, no traceback, the node alive."""
    node = start_depth_node(ros, "-p", "pose_source:=tf", "-p", "keyframe_events:=60000",
                            "-p", "camera_info_timeout_s:=0.2", "-p", "pose_timeout_s:=0.5",
                            "-p", "keyframe_flush_idle_s:=0.0")
    clouds = ros.collect(PointCloud2, "/depth/points")
    events_out = ros.publisher(EventArray, "/dvs/events", 1000)
    tf_out = ros.publisher(TFMessage, "/tf", 1000)
    t0 = int(slider.events.t[0])

    # 1. the rig moves on /tf, but nothing says where the camera sits on it
    publish_rig_poses(ros, tf_out, slider, t0 - 5_000_000, t0 + 400_000_000)
    publish_events(ros, events_out, events_between(slider, t0, t0 + 350_000_000))
    missing = "no transform to 'dvs': 'dvs' is unknown; known frames: rig, world"
    assert spin_until(ros.executor, lambda: missing in last_values(ros)[1], 15.0), node.log()
    values, _ = last_values(ros)
    assert int(values["events_held_for_poses"]) > 0 and int(values["pose_timeouts"]) == 1
    assert not clouds
    # 2. the static transform comes (late, as from a robot_state_publisher started last), and
    #    the rig's transforms go on: the held events give depth
    static_out = publish_static(ros)  # noqa: F841
    publish_rig_poses(ros, tf_out, slider, t0 + 405_000_000, t0 + 420_000_000)
    assert spin_until(ros.executor, lambda: len(clouds) >= 1, 60.0), node.log()
    # 3. the transforms stop while events go on: said after pose_timeout_s, counted; then they
    #    come back and the events waiting for them give depth (nothing lost)
    published = int(last_values(ros)[0]["keyframes_published"])
    publish_events(ros, events_out, events_between(slider, t0 + 420_000_000, t0 + 700_000_000))
    assert spin_until(ros.executor, lambda: "poses stopped" in last_values(ros)[1], 10.0), node.log()
    assert int(last_values(ros)[0]["pose_timeouts"]) == 2
    publish_rig_poses(ros, tf_out, slider, t0 + 425_000_000, t0 + 750_000_000)
    assert spin_until(ros.executor, lambda: int(last_values(ros)[0]["keyframes_published"]) >= published + 3,
                      60.0), node.log()
    # 4. time jumps back (a bag played again): the moving transforms are forgotten, the poses restart
    publish_rig_poses(ros, tf_out, slider, t0, t0 + 300_000_000, shift_ns=-3_000_000_000)
    assert spin_until(ros.executor, lambda: int(last_values(ros)[0].get("time_jumps_back", 0)) == 1, 10.0), \
        node.log()
    values, _ = last_values(ros)
    assert int(values["pose_restarts"]) == 1
    assert node.alive()
    log = node.log()
    for text in (missing, "poses jumped back in time by", "poses stopped"):
        assert log.count(text) == 1, (text, log)
    assert "Traceback" not in log
