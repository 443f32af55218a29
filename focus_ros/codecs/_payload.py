"""Helpers shared by the EventPacket encodings: the payload as machine-order words, and
event times as a camera's microsecond clock."""

from __future__ import annotations

import numpy as np

from focus_ros.codecs._cdr import EventDecodeError
from focus_ros.events import Events


def payload_words(payload: np.ndarray, word_bytes: int, is_bigendian: bool, encoding: str,
                  payload_offset: int) -> np.ndarray:
    """The payload bytes as a contiguous array of native-order 16- or 32-bit words
    (``word_bytes`` 2 or 4); EventDecodeError when the bytes are not a whole number of words."""
    if len(payload) % word_bytes:
        raise EventDecodeError(
            f"malformed message: {encoding} payload of {len(payload)} bytes at byte offset "
            f"{payload_offset} is not a whole number of {8 * word_bytes}-bit words")
    dtype = (">" if is_bigendian else "<") + ("u2" if word_bytes == 2 else "u4")
    return np.ascontiguousarray(payload.view(dtype).astype(dtype[1:]))


def sensor_microseconds(events: Events, offset_ns: int, encoding: str) -> np.ndarray:
    """Event times as the camera's clock in whole microseconds since ``offset_ns``;
    ValueError when a time is before the offset or not a whole microsecond after it."""
    relative = events.t - np.int64(offset_ns)
    if len(events) and (relative.min() < 0 or np.any(relative % 1000)):
        raise ValueError(f"{encoding} encoding needs times that are whole microseconds at or "
                         f"after the sensor time offset {offset_ns} ns")
    return relative // 1000
