"""Conversions between ROS messages and the core's types (the only rclpy-aware glue)."""

from __future__ import annotations

import importlib
from pathlib import Path

import numpy as np
from builtin_interfaces.msg import Time
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from geometry_msgs.msg import TwistStamped, TwistWithCovarianceStamped
from sensor_msgs.msg import Image, Imu

from focus_ros import codecs
from focus_ros.camera import Calibration
from focus_ros.codecs.message_types import EVENT_MESSAGE_TABLE
from focus_ros.events import NANOSECONDS_PER_SECOND

#: message type -> (Python module, class) of the event messages a node can subscribe to
EVENT_MESSAGES = {row.name: (row.python_module, row.python_class) for row in EVENT_MESSAGE_TABLE if row.subscribable}


def _lookup(message_type: str):
    if message_type not in EVENT_MESSAGES:
        raise ValueError(f"unknown event message type '{message_type}': use one of {', '.join(EVENT_MESSAGES)}")
    return EVENT_MESSAGES[message_type]


def event_message_class(message_type: str):
    """The generated Python class of an event message type (for subscriptions)."""
    module_name, class_name = _lookup(message_type)
    try:
        return getattr(importlib.import_module(module_name), class_name)
    except ImportError as error:
        package = module_name.split(".")[0]
        raise ValueError(f"the interface package {package} is not built in this environment ({error}); "
                         f"build it from focus_ros/interfaces/{package} (see README)") from None


def event_decoder(message_type: str) -> codecs.EventMessageDecoder:
    """A numpy decoder of one subscription's serialized messages: bytes -> (Events, info),
    event times in ROS time (the time convention of :class:`codecs.EventMessageDecoder`).

    Stateful: create one per subscription and feed it the messages in order (EVT3 and
    libcaer_cmp state and the sensor-clock -> ROS-time offset carry over). EventPacket
    encodings: evt3, libcaer_cmp, libcaer, mono.
    """
    _lookup(message_type)
    return codecs.EventMessageDecoder(message_type)


def time_from_ns(t_ns: int) -> Time:
    seconds, nanoseconds = divmod(int(t_ns), NANOSECONDS_PER_SECOND)
    return Time(sec=seconds, nanosec=nanoseconds)


def ns_from_time(stamp: Time) -> int:
    return int(stamp.sec) * NANOSECONDS_PER_SECOND + int(stamp.nanosec)


def calibration_from_parameters(values: dict) -> Calibration:
    """Intrinsics from the node's ``calibration.*`` parameters (a file or the numbers).

    values: file, width, height, fx, fy, cx, cy, distortion. Raises ValueError saying
    what is missing or implausible (:meth:`Calibration.validate`: NaN, a 1x1 size, a focal
    length far outside a lens's field of view), OSError when the file cannot be read.
    """
    width, height = int(values.get("width", 0)), int(values.get("height", 0))
    if values.get("file"):
        path = Path(values["file"])
        if path.suffix.lower() not in (".yaml", ".yml") and not (width and height):
            raise ValueError("calibration.file is a calib.txt: calibration.width and calibration.height are needed too")
        return Calibration.from_file(path, width, height)
    missing = [name for name in ("width", "height", "fx", "fy") if not values.get(name)]
    if missing:
        raise ValueError(f"calibration parameters missing: {', '.join('calibration.' + m for m in missing)}")
    distortion = list(values.get("distortion") or [])
    distortion += [0.0] * (5 - len(distortion))
    try:
        return Calibration(width, height, float(values["fx"]), float(values["fy"]), float(values["cx"]),
                           float(values["cy"]), distortion=tuple(float(d) for d in distortion[:5])).validate()
    except ValueError as error:
        raise ValueError(f"the calibration.* parameters are unusable: {error}") from None


def rgb_image(rgb: np.ndarray, stamp: Time, frame_id: str) -> Image:
    """A (height, width, 3) uint8 array as a sensor_msgs/Image with rgb8 encoding."""
    message = Image()
    message.header.stamp = stamp
    message.header.frame_id = frame_id
    message.height, message.width = int(rgb.shape[0]), int(rgb.shape[1])
    message.encoding = "rgb8"
    message.is_bigendian = 0
    message.step = 3 * message.width
    message.data = np.ascontiguousarray(rgb, dtype=np.uint8).tobytes()
    return message


def float_image(values: np.ndarray, stamp: Time, frame_id: str) -> Image:
    """A (height, width) or (height, width, channels) array as a 32FC1, 32FC2, ... little-endian
    sensor_msgs/Image (NaN kept: REP-118's unknown): depth and its confidence, a flow field."""
    values = np.ascontiguousarray(values, "<f4")
    if values.ndim not in (2, 3):
        raise ValueError(f"a 32FC image needs a 2-D or 3-D array, got shape {values.shape}")
    channels = 1 if values.ndim == 2 else int(values.shape[2])
    message = Image()
    message.header.stamp = stamp
    message.header.frame_id = frame_id
    message.height, message.width = int(values.shape[0]), int(values.shape[1])
    message.encoding = f"32FC{channels}"
    message.is_bigendian = 0
    message.step = 4 * channels * message.width
    message.data = values.tobytes()
    return message


#: variance ((m/s)^2) of the linear velocity in a TwistWithCovarianceStamped: not estimated
#: (a rotation estimate says nothing about it), so "unknown" to a filter that fuses it
UNKNOWN_LINEAR_VARIANCE_M2_S2 = 1e6


def twist_stamped(angular_velocity_rad_s, stamp: Time, frame_id: str) -> TwistStamped:
    """The angular velocity (3,) rad/s as a TwistStamped (linear part 0: not estimated)."""
    message = TwistStamped()
    message.header.stamp, message.header.frame_id = stamp, frame_id
    message.twist.angular.x, message.twist.angular.y, message.twist.angular.z = (
        float(v) for v in angular_velocity_rad_s)
    return message


def imu_message(angular_velocity_rad_s, covariance_rad2_s2, stamp: Time, frame_id: str) -> Imu:
    """A sensor_msgs/Imu holding only an angular velocity (3,) rad/s and its covariance (3, 3),
    (rad/s)^2, row-major (None: zeros, "unknown"): orientation and linear acceleration marked
    absent as REP-145 says (element 0 of their covariances -1)."""
    message = Imu()
    message.header.stamp, message.header.frame_id = stamp, frame_id
    message.angular_velocity.x, message.angular_velocity.y, message.angular_velocity.z = (
        float(v) for v in angular_velocity_rad_s)
    message.angular_velocity_covariance = _covariance_entries(covariance_rad2_s2, 3)
    message.orientation_covariance[0] = -1.0
    message.linear_acceleration_covariance[0] = -1.0
    return message


def twist_with_covariance(angular_velocity_rad_s, covariance_rad2_s2, stamp: Time,
                          frame_id: str) -> TwistWithCovarianceStamped:
    """The angular velocity (3,) rad/s with its covariance (3, 3), (rad/s)^2, as a
    TwistWithCovarianceStamped; the linear part, not estimated, is 0 with variance
    UNKNOWN_LINEAR_VARIANCE_M2_S2 (6x6 row-major: linear x y z, then angular x y z)."""
    message = TwistWithCovarianceStamped()
    message.header.stamp, message.header.frame_id = stamp, frame_id
    twist = message.twist.twist
    twist.angular.x, twist.angular.y, twist.angular.z = (float(v) for v in angular_velocity_rad_s)
    covariance = np.zeros((6, 6))
    covariance[:3, :3] = np.eye(3) * UNKNOWN_LINEAR_VARIANCE_M2_S2
    if covariance_rad2_s2 is not None:
        covariance[3:, 3:] = np.asarray(covariance_rad2_s2, dtype=np.float64).reshape(3, 3)
    message.twist.covariance = _covariance_entries(covariance, 6)
    return message


def _covariance_entries(matrix, size: int) -> np.ndarray:
    """A (size, size) covariance as the row-major float64 array of a message's covariance field;
    None gives zeros, which sensor_msgs and geometry_msgs define as "covariance unknown"."""
    if matrix is None:
        return np.zeros(size * size)
    return np.ascontiguousarray(np.asarray(matrix, dtype=np.float64).reshape(size, size)).reshape(size * size)


def diagnostic_level(problem: tuple[str, str] | None, ok_message: str) -> tuple[int, str]:
    """(DiagnosticStatus level, message) of ``problem`` ("error" | "warn", message), or OK with
    ``ok_message`` when None (e.g. :meth:`~focus_ros.runtime.EstimatorRunner.health`)."""
    if problem is None:
        return DiagnosticStatus.OK, ok_message
    return {"error": DiagnosticStatus.ERROR, "warn": DiagnosticStatus.WARN}[problem[0]], problem[1]


def estimator_status(name: str, frame_id: str, calibrated: bool, problem: tuple[str, str] | None,
                     ok_message: str, uncalibrated: str = "no calibration (camera_info or parameters)"
                     ) -> DiagnosticStatus:
    """The status of a node estimating from events: ERROR (``uncalibrated``) while its event
    input has no calibration, else ``problem`` (the node's own, or its estimator runner's
    ``health()``), else OK with ``ok_message``; hardware id = the events' frame
    ("event_camera" before the first message)."""
    status = DiagnosticStatus(name=name, hardware_id=frame_id or "event_camera")
    status.level, status.message = diagnostic_level(problem if calibrated else ("error", uncalibrated), ok_message)
    return status


def diagnostic_array(status: DiagnosticStatus, values: dict, stamp: Time) -> DiagnosticArray:
    """``status`` carrying ``values`` as key/value strings (floats to 4 significant digits),
    in a DiagnosticArray stamped ``stamp``: the one way every node reports on ``/diagnostics``."""
    status.values = [KeyValue(key=key, value=f"{value:.4g}" if isinstance(value, float) else str(value))
                     for key, value in values.items()]
    array = DiagnosticArray(status=[status])
    array.header.stamp = stamp
    return array
