"""``dvs_msgs/EventArray`` in ROS 2 CDR and ROS 1 serialization <-> Events.

Fields (as in ``interfaces/dvs_msgs``): ``std_msgs/Header header, uint32 height,
uint32 width, Event[] events``; ``Event``: ``uint16 x, uint16 y, builtin_interfaces/Time
ts, bool polarity``. The records are read and written through numpy strided views, with
no per-event Python object.

ROS 2 CDR record layout (each field aligned to its own size, counted from the first byte
after the 4-byte encapsulation header; see :mod:`focus_ros.codecs._cdr`): ``Event`` is not
uniform. The sequence starts 4-aligned, so the first record is
``x@0 y@2 sec@4 nanosec@8 polarity@12`` (13 bytes + 1 pad), and every later record starts
at 2 mod 4 and is ``x@0 y@2 pad sec@6 nanosec@10 polarity@14`` (15 bytes + 1 pad; stride
16). No padding follows the last record. ``N`` events therefore take ``13 + 16 (N - 1)``
bytes.

ROS 1 record layout: 13 packed little-endian bytes ``x@0 y@2 sec@4 nsec@8 polarity@12``
(``time`` has unsigned seconds).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from functools import lru_cache

import numba
import numpy as np

from focus_ros.codecs._cdr import (
    LITTLE_ENDIAN_ENCAPSULATION, CdrWriter, EventDecodeError, FieldReader, cdr_reader,
    check_events_fit, check_no_trailing_bytes, check_ros1_message_end, default_stamp,
    split_stamp)
from focus_ros.events import NANOSECONDS_PER_SECOND, Events

#: bytes of the first / every later CDR Event record (see the module docstring)
_CDR_FIRST_EVENT_BYTES = 13
_CDR_EVENT_STRIDE = 16
_ROS1_EVENT_BYTES = 13


@dataclass(frozen=True)
class EventArrayInfo:
    """Non-event fields of a ``dvs_msgs/EventArray``: header stamp (int ns), frame id,
    sensor height and width (px; 0x0 when the message does not declare them), and
    outside_events: how many of its events lay outside that size and were dropped."""

    stamp_ns: int
    frame_id: str
    height: int
    width: int
    outside_events: int = 0


# ----------------------------------------------------------------------------------------
# Event record layouts as numpy structured dtypes


@lru_cache(maxsize=4)
def _cdr_event_dtype(first: bool, little_endian: bool) -> np.dtype:
    """The CDR ``Event`` record: first record of the sequence (4-aligned start) or a later
    one (start at 2 mod 4). itemsize excludes the trailing pad byte (strides add it)."""
    order = "<" if little_endian else ">"
    offsets = [0, 2, 4, 8, 12] if first else [0, 2, 6, 10, 14]
    return np.dtype({"names": ["x", "y", "sec", "nanosec", "polarity"],
                     "formats": [order + "u2", order + "u2", order + "i4", order + "u4", "u1"],
                     "offsets": offsets,
                     "itemsize": offsets[-1] + 1})


_ROS1_EVENT_DTYPE = np.dtype({"names": ["x", "y", "sec", "nanosec", "polarity"],
                              "formats": ["<u2", "<u2", "<u4", "<u4", "u1"],
                              "offsets": [0, 2, 4, 8, 12], "itemsize": _ROS1_EVENT_BYTES})


def cdr_event_sequence_bytes(count: int) -> int:
    """Bytes taken by ``count`` CDR Event records (13 + 16 (count - 1), 0 when empty)."""
    return 0 if count == 0 else _CDR_FIRST_EVENT_BYTES + _CDR_EVENT_STRIDE * (count - 1)


# ----------------------------------------------------------------------------------------
# Event records -> Events


@numba.njit(cache=True, nogil=True)
def _event_fields_kernel(column, row, seconds, nanoseconds, polarity, width, height, first, x, y, t, p):
    """One block of dvs_msgs ``Event`` records (its fields as strided views) -> x, y, t (ns),
    p (+1/-1) written from index ``first`` on, validated in the same pass; events outside
    width x height px are skipped (not when the size is 0x0, undeclared). Returns (the block
    index of the first event with a malformed field (nanosec >= 1e9, polarity > 1) or -1,
    the number of events written)."""
    declared = width > 0 and height > 0
    written = first
    for k in range(len(column)):
        if nanoseconds[k] >= 1000000000 or polarity[k] > 1:
            return k, written - first
        if declared and (column[k] >= width or row[k] >= height):
            continue
        x[written] = column[k]
        y[written] = row[k]
        t[written] = np.int64(seconds[k]) * 1000000000 + np.int64(nanoseconds[k])
        p[written] = 1 if polarity[k] else -1
        written += 1
    return -1, written - first


def _decode_event_records(records: list[np.ndarray], count: int, first_offset: int, width: int,
                          height: int) -> tuple[Events, int]:
    """(Events, how many were outside the sensor) from structured views over ``count``
    dvs_msgs ``Event`` records (one compiled pass per block of records). An event outside
    width x height px (a driver's glitch) is dropped and counted, the others kept; a
    malformed field (nanosec >= 1e9, polarity > 1) is an EventDecodeError naming the event."""
    x = np.empty(count, np.uint16)
    y = np.empty(count, np.uint16)
    t = np.empty(count, np.int64)
    p = np.empty(count, np.int8)
    start = written = 0
    for block in records:
        fields = [block[name] for name in ("x", "y", "sec", "nanosec", "polarity")]
        if not block.dtype["x"].isnative:  # big-endian CDR: the kernel reads the machine's order
            fields = [field.astype(field.dtype.newbyteorder("=")) for field in fields]
        bad, block_written = _event_fields_kernel(*fields, width, height, written, x, y, t, p)
        if bad >= 0:
            nanoseconds, polarity = int(fields[3][bad]), int(fields[4][bad])
            raise EventDecodeError(
                f"malformed message: event {start + bad} (records from byte offset {first_offset}) has "
                f"nanosec={nanoseconds} polarity={polarity}: nanosec must be < 1e9, polarity 0 or 1",
                kind="event_field")
        start += len(block)
        written += block_written
    if written < count:
        x, y, t, p = x[:written], y[:written], t[:written], p[:written]
    return Events(x, y, t, p), count - written


def _cdr_event_records(reader: FieldReader, count: int) -> list[np.ndarray]:
    """Strided structured views over ``count`` CDR Event records at the reader position."""
    little_endian = reader.order == "<"
    start = reader.position
    reader.require(cdr_event_sequence_bytes(count), f"{count} events")
    if count == 0:
        return []
    records = [np.ndarray((1,), _cdr_event_dtype(True, little_endian), buffer=reader.data,
                          offset=start)]
    if count > 1:
        records.append(np.ndarray((count - 1,), _cdr_event_dtype(False, little_endian),
                                  buffer=reader.data, offset=start + _CDR_FIRST_EVENT_BYTES + 1,
                                  strides=(_CDR_EVENT_STRIDE,)))
    reader.position = start + cdr_event_sequence_bytes(count)
    return records


# ----------------------------------------------------------------------------------------
# ROS 2 CDR


def decode_event_array(buffer) -> tuple[Events, EventArrayInfo]:
    """Decode a CDR-serialized ``dvs_msgs/EventArray`` (as an rclpy raw subscription or a
    ROS 2 bag delivers it) into Events (t = each event's ``ts``, ns) and its header info.

    Events outside the declared size are dropped and counted (``info.outside_events``); a
    size of 0x0 means undeclared (every event kept, for the reader to check against its
    calibration). The Events arrays are fresh (the caller may change them in place).
    Raises EventDecodeError for truncated or malformed buffers.
    """
    reader = cdr_reader(buffer)
    stamp_ns = reader.stamp_ns(signed_seconds=True)
    frame_id = reader.string("header.frame_id")
    height, width = reader.image_size(zero_is_undeclared=True)
    count = reader.sequence_length(_CDR_FIRST_EVENT_BYTES, "events")
    first_offset = reader.position
    records = _cdr_event_records(reader, count)
    check_no_trailing_bytes(reader, "the events")
    events, outside = _decode_event_records(records, count, first_offset, width, height)
    return events, EventArrayInfo(stamp_ns, frame_id, height, width, outside)


def encode_event_array(events: Events, height: int, width: int, frame_id: str = "",
                       stamp_ns: int | None = None) -> bytes:
    """Serialize Events as a ``dvs_msgs/EventArray`` in ROS 2 CDR (little endian), with the
    encapsulation header, byte for byte as rclpy's ``serialize_message`` (padding zeroed).

    height, width: sensor size (px); stamp_ns: header stamp (ns, default: the first
    event's time, 0 when empty). Raises ValueError when events fall outside the sensor.
    """
    check_events_fit(events, height, width)
    writer = CdrWriter()
    writer.header(default_stamp(events, stamp_ns), frame_id)
    writer.scalar("I", height)
    writer.scalar("I", width)
    writer.scalar("I", len(events))
    count = len(events)
    head = LITTLE_ENDIAN_ENCAPSULATION + bytes(writer.body)
    if count == 0:
        return head
    body = np.zeros(cdr_event_sequence_bytes(count) + 1, np.uint8)  # +1: pad of the last record
    seconds, nanoseconds = np.divmod(events.t, NANOSECONDS_PER_SECOND)
    if seconds.min() < -(1 << 31) or seconds.max() >= (1 << 31):
        raise ValueError("event timestamps do not fit builtin_interfaces/Time (int32 seconds)")
    first = np.ndarray((1,), _cdr_event_dtype(True, True), buffer=body, offset=0)
    later = np.ndarray((count - 1,), _cdr_event_dtype(False, True), buffer=body,
                       offset=_CDR_FIRST_EVENT_BYTES + 1, strides=(_CDR_EVENT_STRIDE,))
    for block, part in ((first, slice(0, 1)), (later, slice(1, count))):
        block["x"] = events.x[part]
        block["y"] = events.y[part]
        block["sec"] = seconds[part]
        block["nanosec"] = nanoseconds[part]
        block["polarity"] = events.p[part] > 0
    return head + body[:-1].tobytes()


# ----------------------------------------------------------------------------------------
# ROS 1


def decode_event_array_ros1(buffer) -> tuple[Events, EventArrayInfo]:
    """Decode a ROS 1 serialized ``dvs_msgs/EventArray`` (message bytes as stored in a ROS 1
    bag, without a length prefix); events outside the declared size dropped and counted as in
    :func:`decode_event_array`. Raises EventDecodeError for truncated/malformed buffers."""
    reader = FieldReader(buffer, little_endian=True, origin=0, cdr=False)
    reader.scalar("I", "header.seq")
    stamp_ns = reader.stamp_ns(signed_seconds=False)
    frame_id = reader.string("header.frame_id")
    height, width = reader.image_size(zero_is_undeclared=True)
    count = reader.sequence_length(_ROS1_EVENT_BYTES, "events")
    first_offset = reader.position
    reader.require(count * _ROS1_EVENT_BYTES, f"{count} events")
    records = np.ndarray((count,), _ROS1_EVENT_DTYPE, buffer=reader.data, offset=first_offset)
    reader.position += count * _ROS1_EVENT_BYTES
    check_ros1_message_end(reader, "the events")
    events, outside = _decode_event_records([records], count, first_offset, width, height)
    return events, EventArrayInfo(stamp_ns, frame_id, height, width, outside)


def encode_event_array_ros1(events: Events, height: int, width: int, frame_id: str = "",
                            stamp_ns: int | None = None, seq: int = 0) -> bytes:
    """Serialize Events as a ROS 1 ``dvs_msgs/EventArray`` (the bag's message bytes).

    Times must be non-negative (ROS 1 time is unsigned). Raises ValueError otherwise.
    """
    check_events_fit(events, height, width)
    seconds, nanoseconds = split_stamp(default_stamp(events, stamp_ns), "header stamp",
                                       unsigned=True)
    frame = frame_id.encode("utf-8")
    head = struct.pack(f"<IIII{len(frame)}sIII", seq, seconds, nanoseconds, len(frame), frame,
                       height, width, len(events))
    if len(events) and events.t.min() < 0:
        raise ValueError("negative event timestamps cannot be written as ROS 1 time")
    records = np.zeros(len(events), _ROS1_EVENT_DTYPE)
    event_seconds, event_nanoseconds = np.divmod(events.t, NANOSECONDS_PER_SECOND)
    if len(events) and event_seconds.max() >= (1 << 32):
        raise ValueError("event timestamps do not fit ROS 1 time (uint32 seconds)")
    records["x"] = events.x
    records["y"] = events.y
    records["sec"] = event_seconds
    records["nanosec"] = event_nanoseconds
    records["polarity"] = events.p > 0
    return head + records.tobytes()
