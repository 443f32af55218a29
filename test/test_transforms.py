"""The TF buffer (focus_ros.poses.transforms) against independent formulas: chains composed with
scipy's rotations, interpolation against scipy's Slerp, and each failure's one line."""

import numpy as np
import pytest
from scipy.spatial.transform import Rotation, Slerp

from focus_ros.poses.transforms import (CameraPoses, ExtrapolationError, NotConnectedError, StampedTransform,
                                  TransformBuffer, UnknownFrameError)

MS = 1_000_000


def stamped(t_ns, parent, child, translation, rotation: Rotation) -> StampedTransform:
    return StampedTransform(int(t_ns), parent, child, tuple(translation), tuple(rotation.as_quat()))


def apply(translation, rotation: Rotation, points):
    """child -> parent coordinates: R·X + t (the reference formula)."""
    return rotation.apply(points) + np.asarray(translation)


ROBOT = {  # a small robot: map -> odom (static here) -> base_link (dynamic) -> camera_link -> dvs (static)
    "odom": ("map", (1.0, -2.0, 0.0), Rotation.from_euler("z", 30, degrees=True)),
    "camera_link": ("base_link", (0.2, 0.0, 0.5), Rotation.from_euler("y", 10, degrees=True)),
    "dvs": ("camera_link", (0.0, 0.05, 0.0), Rotation.from_euler("zyx", [-90, 0, -90], degrees=True)),
}


def odometry(t_ns):
    """base_link in odom at t: moving and turning."""
    s = t_ns / 1e9
    return (0.5 * s, 0.1 * s * s, 0.0), Rotation.from_euler("z", 40 * s, degrees=True)


def robot_buffer(stamps_ns) -> TransformBuffer:
    buffer = TransformBuffer(cache_ns=None)
    for child, (parent, translation, rotation) in ROBOT.items():
        buffer.set_transform(stamped(0, parent, child, translation, rotation), static=True)
    for t in stamps_ns:
        buffer.set_transform(stamped(t, "odom", "base_link", *odometry(t)))
    return buffer


def test_a_chain_is_composed_through_the_tree_as_each_edge_maps_child_to_parent():
    t = 500 * MS
    buffer = robot_buffer([t])
    points = np.array([[0.0, 0.0, 1.0], [0.3, -0.2, 2.5]])  # in the camera's optical frame
    expected = points
    for child, parent in (("dvs", "camera_link"), ("camera_link", "base_link")):
        expected = apply(ROBOT[child][1], ROBOT[child][2], expected)
    expected = apply(*odometry(t), expected)
    expected = apply(ROBOT["odom"][1], ROBOT["odom"][2], expected)
    map_from_dvs = buffer.lookup("map", "dvs", t)
    assert np.allclose(points @ map_from_dvs[:3, :3].T + map_from_dvs[:3, 3], expected, atol=1e-12)
    # the other way, and between two branches' frames: inverse and composition
    assert np.allclose(buffer.lookup("dvs", "map", t), np.linalg.inv(map_from_dvs), atol=1e-12)
    base_from_dvs = buffer.lookup("base_link", "dvs", t)
    assert np.allclose(buffer.lookup("odom", "base_link", t) @ base_from_dvs, buffer.lookup("odom", "dvs", t))


def test_a_dynamic_edge_is_interpolated_linearly_and_by_slerp_between_its_stamps():
    stamps = [0, 10 * MS, 20 * MS]
    buffer = robot_buffer(stamps)
    for t in (3 * MS, 10 * MS, 17_500_000):
        lower, upper = (0, 10 * MS) if t <= 10 * MS else (10 * MS, 20 * MS)
        fraction = (t - lower) / (upper - lower)
        (p0, r0), (p1, r1) = odometry(lower), odometry(upper)
        slerp = Slerp([0, 1], Rotation.concatenate([r0, r1]))
        odom_from_base = buffer.lookup("odom", "base_link", t)
        assert np.allclose(odom_from_base[:3, 3], np.array(p0) + fraction * (np.array(p1) - np.array(p0)))
        assert np.allclose(odom_from_base[:3, :3], slerp([fraction]).as_matrix()[0], atol=1e-12)


def test_no_extrapolation_beyond_the_tolerance_and_the_error_says_whether_to_wait():
    buffer = robot_buffer([100 * MS, 200 * MS])
    with pytest.raises(ExtrapolationError, match="ahead of the newest") as ahead:
        buffer.lookup("map", "dvs", 201 * MS)
    assert ahead.value.ahead
    with pytest.raises(ExtrapolationError, match="behind the oldest") as behind:
        buffer.lookup("map", "dvs", 99 * MS)
    assert not behind.value.ahead
    tolerant = TransformBuffer(extrapolation_tolerance_ns=2 * MS)
    for t in (100 * MS, 200 * MS):
        tolerant.set_transform(stamped(t, "odom", "base_link", *odometry(t)))
    assert np.allclose(tolerant.lookup("odom", "base_link", 201 * MS), tolerant.lookup("odom", "base_link", 200 * MS))
    with pytest.raises(ExtrapolationError):
        tolerant.lookup("odom", "base_link", 203 * MS)


def test_unknown_and_unconnected_frames_are_one_line_naming_the_known_frames():
    buffer = robot_buffer([0])
    with pytest.raises(UnknownFrameError) as unknown:
        buffer.lookup("odom", "camera", 0)
    text = str(unknown.value)
    assert text.startswith("no transform from 'odom' to 'camera': 'camera' is unknown; known frames: ")
    assert "base_link, camera_link, dvs, map, odom" in text and "\n" not in text
    buffer.set_transform(stamped(0, "world", "rig", (0, 0, 0), Rotation.identity()))
    with pytest.raises(NotConnectedError, match="different trees"):
        buffer.lookup("world", "dvs", 0)
    # a leading '/' (ROS 1) names the same frame
    assert np.allclose(buffer.lookup("/map", "/dvs", 0), buffer.lookup("map", "dvs", 0))


def test_the_cache_bounds_a_dynamic_edge_and_invalid_transforms_are_refused():
    buffer = TransformBuffer(cache_ns=1_000 * MS)
    for t in range(0, 3_000 * MS, 10 * MS):
        buffer.set_transform(stamped(t, "odom", "base_link", *odometry(t)))
    with pytest.raises(ExtrapolationError, match="behind the oldest"):
        buffer.lookup("odom", "base_link", 1_980 * MS)
    buffer.lookup("odom", "base_link", 1_990 * MS)  # the newest minus the cache: still there
    with pytest.raises(ValueError, match="not a unit quaternion"):
        buffer.set_transform(StampedTransform(0, "a", "b", (0, 0, 0), (0, 0, 0, 2.0)))
    with pytest.raises(ValueError, match="not finite"):
        buffer.set_transform(StampedTransform(0, "a", "b", (np.nan, 0, 0), (0, 0, 0, 1.0)))
    with pytest.raises(ValueError, match="in itself"):
        buffer.set_transform(StampedTransform(0, "a", "a", (0, 0, 0), (0, 0, 0, 1.0)))


def camera_poses_of(messages, world="", camera="dvs"):
    poses = CameraPoses(world, camera)
    out = []
    for static, transforms in messages:
        out += poses.add(transforms, static)[0]
    return poses, out


def static_messages():
    return [(True, [stamped(0, parent, child, translation, rotation)
                    for child, (parent, translation, rotation) in ROBOT.items()])]


def test_camera_poses_come_at_the_moving_edge_stamps_in_the_root_frame_by_default():
    stamps = range(0, 100 * MS, 5 * MS)
    messages = static_messages() + [(False, [stamped(t, "odom", "base_link", *odometry(t))]) for t in stamps]
    source, poses = camera_poses_of(messages)
    assert [t for t, _, _ in poses] == list(stamps)
    assert source.world_frame == "map"  # the tree's root
    reference = robot_buffer(stamps)
    for t, position, rotation in poses:
        map_from_dvs = reference.lookup("map", "dvs", t)
        assert np.allclose(position, map_from_dvs[:3, 3])
        assert np.allclose(Rotation.from_quat(rotation).as_matrix(), map_from_dvs[:3, :3], atol=1e-12)
    assert source.problem() == ""


def test_a_pose_waits_until_every_moving_edge_on_the_way_covers_its_stamp():
    """map -> odom moves too, at a tenth of the rate: odometry stamps wait for it."""
    source = CameraPoses("map", "dvs")
    source.add(static_messages()[0][1][1:], static=True)  # camera_link, dvs
    got = []
    for t in range(0, 101 * MS, 10 * MS):
        got += source.add([stamped(t, "odom", "base_link", *odometry(t))])[0]
    assert got == [] and "no transform from 'map' to 'dvs'" in source.problem()  # map unknown yet
    got += source.add([stamped(0, "map", "odom", (0, 0, 0), Rotation.identity())])[0]
    assert [t for t, _, _ in got] == [0]
    assert "ahead of the newest" in source.problem()
    got += source.add([stamped(100 * MS, "map", "odom", (1, 0, 0), Rotation.identity())])[0]
    assert [t for t, _, _ in got] == list(range(0, 101 * MS, 10 * MS)) and source.problem() == ""
    assert source.expire(now_s=1e9, timeout_s=1.0) == 0


def test_time_jumping_back_forgets_the_moving_edges_and_is_counted():
    source = CameraPoses("", "dvs", jump_back_ns=500 * MS)
    source.add(static_messages()[0][1], static=True)
    for t in range(1_000 * MS, 2_000 * MS, 100 * MS):
        source.add([stamped(t, "odom", "base_link", *odometry(t))])
    poses, problems = source.add([stamped(0, "odom", "base_link", *odometry(0))])
    assert problems == [] and source.counts["time_jumps_back"] == 1  # the poses jumping back say it
    poses += source.add([stamped(100 * MS, "odom", "base_link", *odometry(100 * MS))])[0]
    assert [t for t, _, _ in poses] == [0, 100 * MS]  # the new run's poses, from its start


def test_stamps_waiting_for_another_moving_edge_expire_and_those_waiting_for_a_frame_do_not():
    source = CameraPoses("map", "dvs")
    for t in range(0, 50 * MS, 10 * MS):
        source.add([stamped(t, "odom", "base_link", *odometry(t))], received_s=t / 1e9)
    assert source.problem() == ("no transform from 'map' to 'dvs': 'map' is unknown; known frames: base_link, "
                                "odom")
    assert source.expire(now_s=10.0, timeout_s=1.0) == 0  # kept: the frames may come (a late static transform)
    poses, _ = source.add(static_messages()[0][1][1:], static=True)  # the camera's mounting, not map -> odom
    assert poses == []
    poses, _ = source.add([stamped(0, "map", "odom", (0, 0, 0), Rotation.identity())], received_s=0.0)
    assert [t for t, _, _ in poses] == [0]  # map -> odom moves, and is known only at 0 so far
    assert "ahead of the newest" in source.problem()
    assert source.expire(now_s=1.025, timeout_s=1.0) == 2  # received at 10 and 20 ms; 0 resolved
    assert source.counts["pose_stamps_expired"] == 2
