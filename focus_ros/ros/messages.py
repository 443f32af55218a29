"""Conversions between ROS messages and the core's types (the only rclpy-aware glue)."""

from __future__ import annotations

import importlib
from pathlib import Path

import numpy as np
from builtin_interfaces.msg import Time
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from sensor_msgs.msg import Image

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
    what is missing.
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
    return Calibration(width, height, float(values["fx"]), float(values["fy"]), float(values["cx"]),
                       float(values["cy"]), distortion=tuple(float(d) for d in distortion[:5]))


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
