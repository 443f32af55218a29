"""ROS messages <-> focus_ros values, for rosbags' typestore (ROS 1 or ROS 2 flavour): header
stamps, IMU samples, poses, TF transforms, camera info, and depth maps as 32FC1 ``sensor_msgs/Image`` (REP-118,
header stamp = the map's time). No file here: :mod:`.reading` and :mod:`.writing` move the
messages in and out of bags.
"""

from __future__ import annotations

import numpy as np

from focus_ros.camera import Calibration
from focus_ros.events import NANOSECONDS_PER_SECOND
from focus_ros.sources.bags.topics import (
    CAMERA_INFO_TYPE, DEPTH_TOPIC, IMAGE_TYPE, IMU_TYPE, POSE_TYPE, TF_MESSAGE_TYPE)
from focus_ros.sources.errors import BagError
from focus_ros.poses.transforms import StampedTransform

__all__ = ["DEPTH_ENCODING", "calibration_from_camera_info", "camera_info_message", "depth_from_image_message",
           "depth_image_message", "header_message", "imu_message", "pose_message", "stamp_ns", "tf_message",
           "time_message", "transforms_from_tf_message"]


def stamp_ns(header) -> int:
    """A header's stamp in ns."""
    return int(header.stamp.sec) * NANOSECONDS_PER_SECOND + int(header.stamp.nanosec)


def time_message(store, t_ns: int):
    """builtin_interfaces/Time of ``t_ns`` ns."""
    seconds, nanoseconds = divmod(int(t_ns), NANOSECONDS_PER_SECOND)
    return store.types["builtin_interfaces/msg/Time"](sec=seconds, nanosec=nanoseconds)


def header_message(store, t_ns: int, frame_id: str, ros_version: int):
    """std_msgs/Header stamped ``t_ns`` ns (ROS 1: with seq 0)."""
    Header = store.types["std_msgs/msg/Header"]
    if ros_version == 1:
        return Header(seq=0, stamp=time_message(store, t_ns), frame_id=frame_id)
    return Header(stamp=time_message(store, t_ns), frame_id=frame_id)


def imu_message(store, t_ns, gyro, accel, frame_id, ros_version):
    """sensor_msgs/Imu of one sample: gyro rad/s, accel m/s^2 (orientation unknown, REP 145)."""
    types = store.types
    Vector3 = types["geometry_msgs/msg/Vector3"]
    unknown = np.zeros(9)
    unknown[0] = -1.0  # REP 145: orientation not estimated
    return types[IMU_TYPE](
        header=header_message(store, t_ns, frame_id, ros_version),
        orientation=types["geometry_msgs/msg/Quaternion"](x=0.0, y=0.0, z=0.0, w=1.0),
        orientation_covariance=unknown, angular_velocity=Vector3(*map(float, gyro)),
        angular_velocity_covariance=np.zeros(9), linear_acceleration=Vector3(*map(float, accel)),
        linear_acceleration_covariance=np.zeros(9))


def pose_message(store, t_ns, position, orientation, frame_id, ros_version):
    """geometry_msgs/PoseStamped: position m, orientation (qx, qy, qz, qw)."""
    types = store.types
    pose = types["geometry_msgs/msg/Pose"](
        position=types["geometry_msgs/msg/Point"](*map(float, position)),
        orientation=types["geometry_msgs/msg/Quaternion"](*map(float, orientation)))
    return types[POSE_TYPE](header=header_message(store, t_ns, frame_id, ros_version), pose=pose)


def tf_message(store, transforms, ros_version: int, msgtype: str = TF_MESSAGE_TYPE):
    """tf2_msgs/TFMessage (or ROS 1's tf/tfMessage, ``msgtype``) of StampedTransforms: one
    geometry_msgs/TransformStamped each (header frame_id = parent, child_frame_id = child)."""
    types = store.types
    stamped = [types["geometry_msgs/msg/TransformStamped"](
        header=header_message(store, transform.t_ns, transform.parent, ros_version),
        child_frame_id=transform.child,
        transform=types["geometry_msgs/msg/Transform"](
            translation=types["geometry_msgs/msg/Vector3"](*map(float, transform.translation_m)),
            rotation=types["geometry_msgs/msg/Quaternion"](*map(float, transform.rotation_xyzw))))
        for transform in transforms]
    return types[msgtype](transforms=stamped)


def transforms_from_tf_message(message) -> list[StampedTransform]:
    """The StampedTransforms of a deserialized tf2_msgs/TFMessage or tf/tfMessage, rosbags' or
    rclpy's (the depth node's /tf): header stamps, frame ids as recorded (the buffer drops a
    leading '/'). Checks (finite, unit quaternion, frames) are the TransformBuffer's."""
    transforms = []
    for stamped in message.transforms:
        t, q = stamped.transform.translation, stamped.transform.rotation
        transforms.append(StampedTransform(stamp_ns(stamped.header), stamped.header.frame_id, stamped.child_frame_id,
                                           (float(t.x), float(t.y), float(t.z)),
                                           (float(q.x), float(q.y), float(q.z), float(q.w))))
    return transforms


def camera_info_message(store, t_ns, calibration: Calibration, frame_id, ros_version):
    """sensor_msgs/CameraInfo (plumb bob) of a calibration."""
    c = calibration
    k = np.array([c.fx, 0, c.cx, 0, c.fy, c.cy, 0, 0, 1], float)
    p = np.array([c.fx, 0, c.cx, 0, 0, c.fy, c.cy, 0, 0, 0, 1, 0], float)
    roi = store.types["sensor_msgs/msg/RegionOfInterest"](
        x_offset=0, y_offset=0, height=0, width=0, do_rectify=False)
    fields = dict(header=header_message(store, t_ns, frame_id, ros_version), height=c.height,
                  width=c.width, distortion_model="plumb_bob",
                  binning_x=0, binning_y=0, roi=roi)
    if ros_version == 1:  # ROS 1 field names are upper case
        fields.update(D=np.array(c.distortion, float), K=k, R=np.eye(3).ravel(), P=p)
    else:
        fields.update(d=np.array(c.distortion, float), k=k, r=np.eye(3).ravel(), p=p)
    return store.types[CAMERA_INFO_TYPE](**fields)


def calibration_from_camera_info(message, where: str = "camera_info") -> Calibration:
    """Calibration from a sensor_msgs/CameraInfo (see Calibration.from_camera_info_message);
    BagError naming ``where`` when it is unusable."""
    try:
        return Calibration.from_camera_info_message(message)
    except ValueError as error:
        raise BagError(f"{where}: {error}") from None


#: depth maps go as sensor_msgs/Image with this encoding (REP-118: float32 m)
DEPTH_ENCODING = "32FC1"


def depth_image_message(store, t_ns: int, depth_m: np.ndarray, frame_id: str, ros_version: int = 2):
    """A sensor_msgs/Image (32FC1, little endian, REP-118) of a depth map, for rosbags' typestore."""
    depth = np.ascontiguousarray(depth_m, dtype="<f4")
    height, width = depth.shape
    return store.types[IMAGE_TYPE](header=header_message(store, t_ns, frame_id, ros_version), height=height,
                                   width=width, encoding=DEPTH_ENCODING, is_bigendian=0, step=4 * width,
                                   data=depth.view(np.uint8).ravel())


def depth_from_image_message(message, where: str = DEPTH_TOPIC) -> tuple[int, np.ndarray]:
    """(t ns, depth (height, width) float32 m) from a 32FC1 sensor_msgs/Image; ValueError naming
    ``where`` for another encoding or a size that does not add up."""
    if message.encoding != DEPTH_ENCODING:
        raise ValueError(f"{where}: depth images must be {DEPTH_ENCODING}, got {message.encoding!r}")
    height, width, step = int(message.height), int(message.width), int(message.step)
    data = np.asarray(message.data, np.uint8)
    if step < 4 * width or len(data) < step * height:
        raise ValueError(f"{where}: image of {width}x{height} px with step {step} needs {step * height} "
                         f"bytes, got {len(data)}")
    rows = data[:step * height].reshape(height, step)[:, :4 * width]
    depth = np.ascontiguousarray(rows).view(">f4" if message.is_bigendian else "<f4").reshape(height, width)
    stamp = message.header.stamp
    return int(stamp.sec) * 1_000_000_000 + int(stamp.nanosec), depth.astype(np.float32)
