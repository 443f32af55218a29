"""Depth outputs as ROS messages: PointCloud2 and 32FC1 encodings against hand-built layouts,
REP-118 NaN, rclpy serialization round trips, pose messages, the colour picture."""

from __future__ import annotations

import math
import struct

import numpy as np
import pytest

pytest.importorskip("rclpy")

from geometry_msgs.msg import PoseStamped  # noqa: E402
from rclpy.serialization import deserialize_message, serialize_message  # noqa: E402
from sensor_msgs.msg import Image, PointCloud2, PointField  # noqa: E402

from focus_ros.ros import depth_messages, messages  # noqa: E402
from focus_ros.ros.messages import time_from_ns  # noqa: E402


def test_point_cloud_fields_layout_and_round_trip_through_serialization():
    rng = np.random.default_rng(0)
    points = rng.uniform(-3, 3, (500, 3))
    confidence = rng.uniform(0, 1, 500)
    depth = rng.uniform(0.5, 2.5, 500)
    message = depth_messages.point_cloud(points, confidence, depth, time_from_ns(1_500_000_123), "world")
    assert [f.name for f in message.fields] == ["x", "y", "z", "intensity", "depth", "depth_sigma"]
    assert all(f.datatype == PointField.FLOAT32 and f.count == 1 for f in message.fields)
    assert [f.offset for f in message.fields] == [0, 4, 8, 12, 16, 20]
    assert (message.height, message.width, message.point_step, message.row_step) == (1, 500, 24, 12000)
    assert message.header.frame_id == "world"
    assert (message.header.stamp.sec, message.header.stamp.nanosec) == (1, 500_000_123)
    # the first point read back with struct, independently of numpy's layout
    x, y, z, intensity, d, sigma = struct.unpack_from("<6f", bytes(message.data), 0)
    np.testing.assert_allclose([x, y, z, intensity, d], [*points[0], confidence[0], depth[0]], rtol=1e-6)
    assert math.isnan(sigma)  # no sigma given: unknown

    received = deserialize_message(serialize_message(message), PointCloud2)
    xyz, intensity = depth_messages.cloud_points(received)
    np.testing.assert_array_equal(xyz, points.astype(np.float32))
    np.testing.assert_array_equal(intensity, confidence.astype(np.float32))
    np.testing.assert_array_equal(depth_messages.decode_point_cloud(received)["depth"], depth.astype(np.float32))


def test_decode_point_cloud_reads_other_layouts_built_by_hand():
    """Big endian, padding, a float64 field, an integer field, two rows with row padding."""
    points = [(1.5, -2.0, 3.25, 0.5, 7), (-0.125, 4.0, 1.0, 2.5, 9), (0.0, 1.0, 2.0, 3.0, 1),
              (9.0, 8.0, 7.0, 6.0, 5)]
    message = PointCloud2()
    message.height, message.width = 2, 2
    message.is_bigendian = True
    message.fields = [PointField(name="x", offset=0, datatype=PointField.FLOAT32, count=1),
                      PointField(name="y", offset=4, datatype=PointField.FLOAT32, count=1),
                      PointField(name="z", offset=8, datatype=PointField.FLOAT64, count=1),
                      PointField(name="intensity", offset=16, datatype=PointField.FLOAT32, count=1),
                      PointField(name="ring", offset=20, datatype=PointField.UINT16, count=1)]
    message.point_step = 24                # 2 bytes of padding after ring
    message.row_step = 2 * 24 + 8          # 8 bytes of padding after each row
    data = b""
    for row in range(2):
        for x, y, z, i, ring in points[2 * row:2 * row + 2]:
            data += struct.pack(">ffdfH2x", x, y, z, i, ring)
        data += b"\xff" * 8
    message.data = data
    fields = depth_messages.decode_point_cloud(message)
    np.testing.assert_array_equal(fields["x"], [p[0] for p in points])
    np.testing.assert_array_equal(fields["z"], [p[2] for p in points])
    np.testing.assert_array_equal(fields["ring"], [p[4] for p in points])
    xyz, intensity = depth_messages.cloud_points(message)
    np.testing.assert_array_equal(xyz[1], points[1][:3])
    np.testing.assert_array_equal(intensity, [p[3] for p in points])


def test_decode_point_cloud_refuses_short_data_with_one_line():
    message = depth_messages.point_cloud(np.zeros((10, 3)), np.zeros(10), np.ones(10), time_from_ns(0), "world")
    message.data = bytes(message.data)[:50]
    with pytest.raises(depth_messages.MessageError, match="needs 240 bytes, has 50"):
        depth_messages.decode_point_cloud(message)


def test_point_cloud_refuses_arrays_of_different_lengths():
    with pytest.raises(ValueError, match="disagree"):
        depth_messages.point_cloud(np.zeros((3, 3)), np.zeros(2), np.zeros(3), time_from_ns(0), "world")


def test_float_image_is_rep118_32fc1_with_nan_kept():
    depth = np.full((4, 6), np.nan, np.float32)
    depth[1, 2], depth[3, 5] = 0.75, 2.25
    message = messages.float_image(depth, time_from_ns(42), "dvs")
    assert (message.encoding, message.height, message.width, message.step, message.is_bigendian) == \
        ("32FC1", 4, 6, 24, 0)
    # REP-118: metres as float32, row-major; read pixel (row 1, column 2) with struct
    assert struct.unpack_from("<f", bytes(message.data), (1 * 6 + 2) * 4)[0] == 0.75
    assert math.isnan(struct.unpack_from("<f", bytes(message.data), 0)[0])
    received = deserialize_message(serialize_message(message), Image)
    decoded = depth_messages.decode_float_image(received)
    np.testing.assert_array_equal(decoded, depth)     # NaN positions included


def test_decode_float_image_handles_row_padding_and_big_endian():
    values = np.arange(6, dtype=np.float32).reshape(2, 3) / 4
    message = Image(height=2, width=3, encoding="32FC1", is_bigendian=1, step=16)
    message.data = b"".join(struct.pack(">3f4x", *row) for row in values)
    np.testing.assert_array_equal(depth_messages.decode_float_image(message), values)
    message.encoding = "16UC1"
    with pytest.raises(depth_messages.MessageError, match="expected 32FC1"):
        depth_messages.decode_float_image(message)


def test_pose_from_pose_stamped_and_odometry():
    message = PoseStamped()
    message.header.stamp = time_from_ns(3_000_000_007)
    message.header.frame_id = "world"
    message.pose.position.x, message.pose.position.y, message.pose.position.z = 1.0, 2.0, 3.0
    message.pose.orientation.z, message.pose.orientation.w = math.sin(0.25), math.cos(0.25)
    t_ns, position, quaternion, frame = depth_messages.pose_from_message(message)
    assert (t_ns, frame) == (3_000_000_007, "world")
    np.testing.assert_array_equal(position, [1, 2, 3])
    np.testing.assert_allclose(quaternion, [0, 0, math.sin(0.25), math.cos(0.25)])

    nav_msgs = pytest.importorskip("nav_msgs.msg", reason="ros-nav-msgs not installed: run `make setup`")
    odometry = nav_msgs.Odometry()
    odometry.header.stamp = time_from_ns(5)
    odometry.header.frame_id = "odom"
    odometry.child_frame_id = "base_link"
    odometry.pose.pose.position.y = -4.0
    odometry.pose.pose.orientation.w = 1.0
    t_ns, position, quaternion, frame = depth_messages.pose_from_message(odometry)
    assert (t_ns, frame) == (5, "odom")
    np.testing.assert_array_equal(position, [0, -4, 0])
    np.testing.assert_array_equal(quaternion, [0, 0, 0, 1])
    assert depth_messages.pose_message_class("nav_msgs/Odometry") is nav_msgs.Odometry
    with pytest.raises(ValueError, match="not one of"):
        depth_messages.pose_message_class("geometry_msgs/Pose")
