"""Depth outputs and pose inputs as ROS 2 messages, with numpy (no per-point Python).

- :func:`point_cloud` / :func:`decode_point_cloud`: ``sensor_msgs/PointCloud2`` with
  float32 fields ``x y z`` (m), ``intensity`` (the focus confidence), ``depth`` (m
  along the reference camera's optical axis, so that rviz can colour the cloud by depth
  whatever frame it is shown in) and ``depth_sigma`` (m, the depth's standard deviation, NaN
  where unknown: rviz can colour by it, a user threshold on it); the decoder reads any cloud whose fields are float32 /
  float64 / integers at any offsets, either byte order;
- :func:`decode_float_image`: ``sensor_msgs/Image`` 32FC1 (depth in metres along the optical
  axis, NaN = unknown: REP-117 / REP-118; or the confidence), as
  :func:`focus_ros.ros.messages.float_image` writes it;
- :func:`pose_from_message`: ``geometry_msgs/PoseStamped`` or ``nav_msgs/Odometry`` ->
  (t ns, position m, quaternion xyzw, frame_id).

(TF messages are read by :func:`focus_ros.sources.bags.messages.transforms_from_tf_message`, which
takes rclpy's messages as it takes rosbags'.)
"""

from __future__ import annotations

import numpy as np
from builtin_interfaces.msg import Time
from sensor_msgs.msg import PointCloud2, PointField

from focus_ros.events import NANOSECONDS_PER_SECOND

#: the fields of the clouds depth_node publishes, in this order, all float32
CLOUD_FIELDS = ("x", "y", "z", "intensity", "depth", "depth_sigma")

#: PointField datatype -> numpy dtype (little endian; byte-swapped for big-endian clouds)
_POINT_FIELD_DTYPES = {
    PointField.INT8: np.dtype("i1"), PointField.UINT8: np.dtype("u1"),
    PointField.INT16: np.dtype("<i2"), PointField.UINT16: np.dtype("<u2"),
    PointField.INT32: np.dtype("<i4"), PointField.UINT32: np.dtype("<u4"),
    PointField.FLOAT32: np.dtype("<f4"), PointField.FLOAT64: np.dtype("<f8"),
}


class MessageError(ValueError):
    """A message that cannot be read; the text names the problem in one line."""


def _header(message, stamp: Time, frame_id: str) -> None:
    message.header.stamp = stamp
    message.header.frame_id = frame_id


def point_cloud(points_m: np.ndarray, intensity: np.ndarray, depth_m: np.ndarray, stamp: Time,
                frame_id: str, depth_sigma_m: np.ndarray | None = None) -> PointCloud2:
    """An unorganised PointCloud2 (height 1) of N points, fields :data:`CLOUD_FIELDS`.

    points_m: (N, 3) x, y, z in ``frame_id`` (m); intensity: (N,) confidence; depth_m: (N,)
    depth along the reference camera's optical axis (m); depth_sigma_m: (N,) its standard
    deviation (m; None: NaN, unknown). All stored as float32; the points must be finite
    (``is_dense`` is set).
    """
    points_m = np.asarray(points_m)
    count = len(points_m)
    sigma_shape = (count,) if depth_sigma_m is None else np.shape(depth_sigma_m)
    if points_m.shape != (count, 3) or np.shape(intensity) != (count,) or np.shape(depth_m) != (count,) \
            or sigma_shape != (count,):
        raise ValueError(f"point cloud arrays disagree: points {points_m.shape}, intensity "
                         f"{np.shape(intensity)}, depth {np.shape(depth_m)}, depth sigma {sigma_shape}")
    packed = np.empty((count, len(CLOUD_FIELDS)), "<f4")
    packed[:, :3] = points_m
    packed[:, 3] = intensity
    packed[:, 4] = depth_m
    packed[:, 5] = np.nan if depth_sigma_m is None else depth_sigma_m
    message = PointCloud2()
    _header(message, stamp, frame_id)
    message.height, message.width = 1, count
    message.fields = [PointField(name=name, offset=4 * index, datatype=PointField.FLOAT32, count=1)
                      for index, name in enumerate(CLOUD_FIELDS)]
    message.is_bigendian = False
    message.point_step = 4 * len(CLOUD_FIELDS)
    message.row_step = message.point_step * count
    message.is_dense = True
    message.data = packed.tobytes()
    return message


def decode_point_cloud(message) -> dict[str, np.ndarray]:
    """The fields of a PointCloud2 as arrays of length height × width, by name.

    Reads any layout (offsets, padding, byte order, float or integer fields of count 1);
    raises :class:`MessageError` on a cloud whose sizes disagree.
    """
    count = int(message.height) * int(message.width)
    step = int(message.point_step)
    data = bytes(message.data) if not isinstance(message.data, (bytes, bytearray)) else message.data
    if count and (step <= 0 or len(data) < count * step):
        raise MessageError(f"point cloud of {message.height}x{message.width} points of {step} bytes "
                           f"needs {count * step} bytes, has {len(data)}")
    names, formats, offsets = [], [], []
    for field in message.fields:
        if field.datatype not in _POINT_FIELD_DTYPES:
            raise MessageError(f"point cloud field '{field.name}' has unknown datatype {field.datatype}")
        dtype = _POINT_FIELD_DTYPES[field.datatype]
        if message.is_bigendian:
            dtype = dtype.newbyteorder(">")
        if field.offset + dtype.itemsize > step:
            raise MessageError(f"point cloud field '{field.name}' at offset {field.offset} overruns "
                               f"the point step {step}")
        names.append(field.name)
        formats.append(dtype)
        offsets.append(int(field.offset))
    layout = np.dtype({"names": names, "formats": formats, "offsets": offsets, "itemsize": max(step, 1)})
    rows = int(message.height)
    row_step = int(message.row_step) or step * int(message.width)
    if rows > 1 and row_step != step * int(message.width):  # rows with padding: one row at a time
        records = np.concatenate([np.frombuffer(data, layout, int(message.width), r * row_step)
                                  for r in range(rows)])
    else:
        records = np.frombuffer(data, layout, count)
    return {name: records[name].astype(records[name].dtype.newbyteorder("=")) for name in names}


def cloud_points(message) -> tuple[np.ndarray, np.ndarray]:
    """(points (N, 3) float32 m, intensity (N,)) of a PointCloud2 with x, y, z, intensity."""
    fields = decode_point_cloud(message)
    missing = [name for name in ("x", "y", "z", "intensity") if name not in fields]
    if missing:
        raise MessageError(f"point cloud has no field {', '.join(missing)} (fields: {', '.join(fields)})")
    return np.column_stack([fields["x"], fields["y"], fields["z"]]), fields["intensity"]


def decode_float_image(message) -> np.ndarray:
    """A 32FC1 sensor_msgs/Image as a (height, width) float32 array."""
    if message.encoding != "32FC1":
        raise MessageError(f"image encoding is '{message.encoding}', expected 32FC1")
    height, width, step = int(message.height), int(message.width), int(message.step)
    data = bytes(message.data) if not isinstance(message.data, (bytes, bytearray)) else message.data
    if step < 4 * width or len(data) < step * height:
        raise MessageError(f"32FC1 image {width}x{height} with step {step} needs {step * height} bytes, "
                           f"has {len(data)}")
    dtype = np.dtype(">f4" if message.is_bigendian else "<f4")
    rows = np.frombuffer(data, np.uint8, step * height).reshape(height, step)[:, :4 * width]
    return np.ascontiguousarray(rows).view(dtype).reshape(height, width).astype(np.float32)


# ---------------------------------------------------------------------------- poses

POSE_MESSAGE_TYPES = ("geometry_msgs/PoseStamped", "nav_msgs/Odometry")


def pose_message_class(message_type: str):
    """The rclpy class of a pose message type (one of :data:`POSE_MESSAGE_TYPES`)."""
    if message_type == "geometry_msgs/PoseStamped":
        from geometry_msgs.msg import PoseStamped
        return PoseStamped
    if message_type == "nav_msgs/Odometry":
        try:
            from nav_msgs.msg import Odometry
        except ImportError as error:
            raise ValueError(f"nav_msgs is not installed in this environment ({error}): "
                             "install ros-nav-msgs (or the ROS package nav_msgs)") from None
        return Odometry
    raise ValueError(f"pose_message_type '{message_type}' is not one of: {', '.join(POSE_MESSAGE_TYPES)}")


def pose_from_message(message) -> tuple[int, np.ndarray, np.ndarray, str]:
    """(t ns, position (3,) m, quaternion (4,) xyzw, frame_id) of a PoseStamped or an
    Odometry (its ``pose.pose``; frame = ``header.frame_id``, the world/odom frame).
    Checks (finite, unit quaternion, order) are :class:`focus_ros.poses.Trajectory`'s."""
    pose = message.pose.pose if hasattr(message, "child_frame_id") else message.pose
    stamp = message.header.stamp
    t_ns = int(stamp.sec) * NANOSECONDS_PER_SECOND + int(stamp.nanosec)
    position = np.array([pose.position.x, pose.position.y, pose.position.z], np.float64)
    quaternion = np.array([pose.orientation.x, pose.orientation.y, pose.orientation.z, pose.orientation.w],
                          np.float64)
    return t_ns, position, quaternion, message.header.frame_id
