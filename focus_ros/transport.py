"""Event message codecs: serialized ROS bytes <-> :class:`~focus_ros.events.Events` arrays.

rclpy turns a 30,000-event ``dvs_msgs/EventArray`` into Python objects in about 110 ms
(0.27 Mev/s, design.md section 4). These codecs read and write the serialized bytes
directly with numpy strided views, with no per-event Python object anywhere.

Messages handled (field for field as in ``interfaces/``):

- ``dvs_msgs/EventArray`` (``std_msgs/Header header, uint32 height, uint32 width,
  Event[] events``; ``Event``: ``uint16 x, uint16 y, builtin_interfaces/Time ts,
  bool polarity``), in ROS 2 CDR (:func:`decode_event_array`, :func:`encode_event_array`)
  and ROS 1 serialization (:func:`decode_event_array_ros1`, :func:`encode_event_array_ros1`).
- ``event_camera_msgs/EventPacket`` (and the legacy ``event_array_msgs/EventArray``, the
  same fields) in ROS 2 CDR and ROS 1 serialization, encodings ``evt3`` (Prophesee,
  metavision_driver), ``libcaer_cmp`` and ``libcaer`` (iniVation DAVIS / DVXplorer,
  libcaer_driver) and ``mono`` (:func:`decode_event_packet`, :func:`encode_event_packet`;
  numba kernels for the word streams).
- :class:`EventMessageDecoder`: one topic's stream of messages -> Events in ROS time, the
  one time convention of the node, the bag readers and the command line (see there).

ROS 2 CDR as rclpy / Fast DDS produce it (XCDR1, "plain CDR"): a 4-byte encapsulation
header (``00 00`` big endian or ``00 01`` little endian, then 2 option bytes), then the
fields, each aligned to its own size (at most 8) counted from the first byte after the
encapsulation header. For ``Event`` this gives a non-uniform record layout: the sequence
starts 4-aligned, so the first record is ``x@0 y@2 sec@4 nanosec@8 polarity@12`` (13
bytes + 1 pad), and every later record starts at 2 mod 4 and is
``x@0 y@2 pad sec@6 nanosec@10 polarity@14`` (15 bytes + 1 pad; stride 16). No padding
follows the last record. ``N`` events therefore take ``13 + 16 (N - 1)`` bytes.

ROS 1 serialization: little endian, no alignment, ``Header`` is
``uint32 seq, time stamp (uint32 sec, uint32 nsec), string frame_id`` (no NUL), and an
``Event`` record is 13 packed bytes.

Malformed or truncated input raises :class:`EventDecodeError` (a ``ValueError``) with one
line saying what is wrong and at which byte offset (counted from the start of the
buffer as given, including the encapsulation header).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from functools import lru_cache

import numba
import numpy as np

from focus_ros.events import NANOSECONDS_PER_SECOND, Events

#: CDR encapsulation identifiers (XCDR1 plain CDR) -> little endian?
_ENCAPSULATION_LITTLE_ENDIAN = {b"\x00\x00": False, b"\x00\x01": True}
#: bytes of the CDR encapsulation header; alignment counts from here
_ENCAPSULATION_BYTES = 4
#: bytes of the first / every later CDR Event record (see module docstring)
_CDR_FIRST_EVENT_BYTES = 13
_CDR_EVENT_STRIDE = 16
_ROS1_EVENT_BYTES = 13
#: refuse sequence lengths above this many elements (a corrupt length, not a message)
MAX_SEQUENCE_LENGTH = 1 << 28

ENCODING_MONO = "mono"
ENCODING_EVT3 = "evt3"
ENCODING_LIBCAER = "libcaer"
ENCODING_LIBCAER_CMP = "libcaer_cmp"
SUPPORTED_PACKET_ENCODINGS = (ENCODING_EVT3, ENCODING_LIBCAER_CMP, ENCODING_LIBCAER, ENCODING_MONO)


class EventDecodeError(ValueError):
    """A serialized event message is truncated or malformed (one line: what, where)."""


@dataclass(frozen=True)
class EventArrayInfo:
    """Non-event fields of a ``dvs_msgs/EventArray``: header stamp (int ns), frame id,
    sensor height and width (px)."""

    stamp_ns: int
    frame_id: str
    height: int
    width: int


@dataclass(frozen=True)
class EventPacketInfo:
    """Non-event fields of an ``event_camera_msgs/EventPacket`` (stamp and time_base in ns),
    and its external-trigger events (evt3 only; empty otherwise)."""

    stamp_ns: int
    frame_id: str
    height: int
    width: int
    seq: int
    time_base: int
    encoding: str
    is_bigendian: bool
    triggers: "Triggers" = field(default=None, compare=False, repr=False)


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
# Field readers with bounds checks


class _FieldReader:
    """Reads scalar fields from a buffer, with CDR alignment (``cdr=True``) or packed (ROS 1).

    Every read checks the bounds and raises EventDecodeError naming the field and offset.
    """

    def __init__(self, buffer, little_endian: bool = True, origin: int = 0, cdr: bool = True):
        self.data = memoryview(buffer).cast("B") if not isinstance(buffer, bytes) else buffer
        self.position = origin
        self.origin = origin
        self.cdr = cdr
        self.order = "<" if little_endian else ">"

    def align(self, size: int) -> None:
        if self.cdr:
            misalignment = (self.position - self.origin) % size
            if misalignment:
                self.position += size - misalignment

    def require(self, size: int, what: str) -> None:
        if size < 0 or self.position + size > len(self.data):
            raise EventDecodeError(
                f"truncated message: {what} needs {size} bytes at byte offset {self.position}, "
                f"buffer has {len(self.data)} bytes")

    def scalar(self, code: str, what: str):
        size = struct.calcsize(code)
        self.align(size)
        self.require(size, what)
        value = struct.unpack_from(self.order + code, self.data, self.position)[0]
        self.position += size
        return value

    def string(self, what: str) -> str:
        length = self.scalar("I", f"length of {what}")
        start = self.position
        if length > len(self.data) - start:
            raise EventDecodeError(
                f"malformed message: {what} declares {length} bytes at byte offset {start - 4}, "
                f"only {len(self.data) - start} remain")
        raw = bytes(self.data[start:start + length])
        self.position += length
        if self.cdr:  # CDR strings carry a terminating NUL counted in the length
            if length == 0 or raw[-1] != 0:
                raise EventDecodeError(
                    f"malformed message: {what} at byte offset {start - 4} is not NUL-terminated")
            raw = raw[:-1]
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise EventDecodeError(
                f"malformed message: {what} at byte offset {start} is not UTF-8") from None

    def sequence_length(self, element_bytes_min: int, what: str) -> int:
        """Read a sequence length and check that the elements can fit in what remains."""
        offset = self.position
        count = self.scalar("I", f"length of {what}")
        remaining = len(self.data) - self.position
        if count > MAX_SEQUENCE_LENGTH or count * element_bytes_min > remaining:
            raise EventDecodeError(
                f"malformed message: {what} declares {count} elements at byte offset {offset}, "
                f"only {remaining} bytes remain")
        return count

    def stamp_ns(self, signed_seconds: bool, what: str = "header stamp") -> int:
        seconds = self.scalar("i" if signed_seconds else "I", what)
        offset = self.position
        nanoseconds = self.scalar("I", what)
        if nanoseconds >= NANOSECONDS_PER_SECOND:
            raise EventDecodeError(
                f"malformed message: {what} nanoseconds {nanoseconds} >= 1e9 at byte offset {offset}")
        return seconds * NANOSECONDS_PER_SECOND + nanoseconds

    def image_size(self) -> tuple[int, int]:
        offset = self.position
        height = self.scalar("I", "height")
        width = self.scalar("I", "width")
        if height == 0 or width == 0:
            raise EventDecodeError(
                f"malformed message: sensor size {width}x{height} px (width x height) "
                f"at byte offset {offset} has a zero side")
        return height, width


def _cdr_reader(buffer) -> _FieldReader:
    """A reader positioned after a valid CDR encapsulation header."""
    head = bytes(memoryview(buffer)[:_ENCAPSULATION_BYTES])
    if len(head) < _ENCAPSULATION_BYTES:
        raise EventDecodeError(
            f"truncated message: {len(head)} bytes, shorter than the 4-byte CDR encapsulation header")
    little_endian = _ENCAPSULATION_LITTLE_ENDIAN.get(head[:2])
    if little_endian is None:
        raise EventDecodeError(
            f"bad CDR encapsulation id {head[:2].hex()} at byte offset 0 "
            f"(expected 0000 or 0001, plain CDR)")
    return _FieldReader(buffer, little_endian, origin=_ENCAPSULATION_BYTES, cdr=True)


def _check_no_trailing_bytes(reader: _FieldReader, what: str) -> None:
    extra = len(reader.data) - reader.position
    if extra > 3:  # up to 3 bytes may be end-of-message alignment padding
        raise EventDecodeError(
            f"malformed message: {extra} unexpected bytes after {what} at byte offset {reader.position}")


# ----------------------------------------------------------------------------------------
# Event records -> Events


@numba.njit(cache=True, nogil=True)
def _event_fields_kernel(column, row, seconds, nanoseconds, polarity, width, height, first, x, y, t, p):
    """One block of dvs_msgs ``Event`` records (its fields as strided views) -> x, y, t (ns),
    p (+1/-1) from index ``first`` on, validated in the same pass. Returns the block index of
    the first event with a field out of range (x >= width, y >= height, nanosec >= 1e9,
    polarity > 1), or -1."""
    for k in range(len(column)):
        if column[k] >= width or row[k] >= height or nanoseconds[k] >= 1000000000 or polarity[k] > 1:
            return k
        x[first + k] = column[k]
        y[first + k] = row[k]
        t[first + k] = np.int64(seconds[k]) * 1000000000 + np.int64(nanoseconds[k])
        p[first + k] = 1 if polarity[k] else -1
    return -1


def _decode_event_records(records: list[np.ndarray], count: int, first_offset: int, width: int,
                          height: int) -> Events:
    """Events from structured views over ``count`` dvs_msgs ``Event`` records (one compiled
    pass per block of records), validating every field: EventDecodeError naming the first
    event out of range."""
    x = np.empty(count, np.uint16)
    y = np.empty(count, np.uint16)
    t = np.empty(count, np.int64)
    p = np.empty(count, np.int8)
    start = 0
    for block in records:
        fields = [block[name] for name in ("x", "y", "sec", "nanosec", "polarity")]
        if not block.dtype["x"].isnative:  # big-endian CDR: the kernel reads the machine's order
            fields = [field.astype(field.dtype.newbyteorder("=")) for field in fields]
        bad = _event_fields_kernel(*fields, width, height, start, x, y, t, p)
        if bad >= 0:
            column, row, _, nanoseconds, polarity = (field[bad] for field in fields)
            _check_event_fields(np.array([column]), np.array([row]), np.array([nanoseconds]), np.array([polarity]),
                                first_offset, width, height, first_index=start + bad)
        start += len(block)
    return Events(x, y, t, p)


def _check_event_fields(x, y, nanoseconds, polarity, first_offset: int, width: int,
                        height: int, first_index: int = 0) -> None:
    """Raise EventDecodeError for the first event with a field out of range (events
    numbered from first_index)."""
    if len(x) == 0:
        return
    bad = (x >= width) | (y >= height) | (nanoseconds >= NANOSECONDS_PER_SECOND) | (polarity > 1)
    if bad.any():
        index = int(np.argmax(bad))
        raise EventDecodeError(
            f"malformed message: event {first_index + index} (records from byte offset {first_offset}) has "
            f"x={x[index]} y={y[index]} nanosec={nanoseconds[index]} polarity={polarity[index]} "
            f"outside sensor {width}x{height} px / nanosec < 1e9 / polarity in {{0, 1}}")


def _cdr_event_records(reader: _FieldReader, count: int) -> list[np.ndarray]:
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
# dvs_msgs/EventArray, ROS 2 CDR


def decode_event_array(buffer) -> tuple[Events, EventArrayInfo]:
    """Decode a CDR-serialized ``dvs_msgs/EventArray`` (as an rclpy raw subscription or a
    ROS 2 bag delivers it) into Events (t = each event's ``ts``, ns) and its header info.

    Raises EventDecodeError for truncated or malformed buffers.
    """
    reader = _cdr_reader(buffer)
    stamp_ns = reader.stamp_ns(signed_seconds=True)
    frame_id = reader.string("header.frame_id")
    height, width = reader.image_size()
    count = reader.sequence_length(_CDR_FIRST_EVENT_BYTES, "events")
    first_offset = reader.position
    records = _cdr_event_records(reader, count)
    _check_no_trailing_bytes(reader, "the events")
    events = _decode_event_records(records, count, first_offset, width, height)
    return events, EventArrayInfo(stamp_ns, frame_id, height, width)


def _split_stamp(stamp_ns: int, what: str, unsigned: bool) -> tuple[int, int]:
    seconds, nanoseconds = divmod(int(stamp_ns), NANOSECONDS_PER_SECOND)
    low = 0 if unsigned else -(1 << 31)
    high = (1 << 32) - 1 if unsigned else (1 << 31) - 1
    if not low <= seconds <= high:
        raise ValueError(f"{what} {stamp_ns} ns does not fit the message's time field")
    return seconds, nanoseconds


def _check_events_fit(events: Events, height: int, width: int) -> None:
    if height <= 0 or width <= 0:
        raise ValueError(f"sensor size {width}x{height} px must be positive")
    if len(events) and (int(events.x.max()) >= width or int(events.y.max()) >= height):
        raise ValueError(f"events reach x={int(events.x.max())}, y={int(events.y.max())}, "
                         f"outside the sensor {width}x{height} px")


def _default_stamp(events: Events, stamp_ns: int | None) -> int:
    if stamp_ns is not None:
        return int(stamp_ns)
    return int(events.t[0]) if len(events) else 0


class _CdrWriter:
    """Appends aligned scalar fields to a CDR body (little endian)."""

    def __init__(self):
        self.body = bytearray()

    def align(self, size: int) -> None:
        self.body += b"\x00" * (-len(self.body) % size)

    def scalar(self, code: str, value) -> None:
        size = struct.calcsize(code)
        self.align(size)
        self.body += struct.pack("<" + code, value)

    def string(self, text: str) -> None:
        raw = text.encode("utf-8") + b"\x00"
        self.scalar("I", len(raw))
        self.body += raw

    def header(self, stamp_ns: int, frame_id: str) -> None:
        seconds, nanoseconds = _split_stamp(stamp_ns, "header stamp", unsigned=False)
        self.scalar("i", seconds)
        self.scalar("I", nanoseconds)
        self.string(frame_id)


def encode_event_array(events: Events, height: int, width: int, frame_id: str = "",
                       stamp_ns: int | None = None) -> bytes:
    """Serialize Events as a ``dvs_msgs/EventArray`` in ROS 2 CDR (little endian), with the
    encapsulation header, byte for byte as rclpy's ``serialize_message`` (padding zeroed).

    height, width: sensor size (px); stamp_ns: header stamp (ns, default: the first
    event's time, 0 when empty). Raises ValueError when events fall outside the sensor.
    """
    _check_events_fit(events, height, width)
    writer = _CdrWriter()
    writer.header(_default_stamp(events, stamp_ns), frame_id)
    writer.scalar("I", height)
    writer.scalar("I", width)
    writer.scalar("I", len(events))
    count = len(events)
    head = b"\x00\x01\x00\x00" + bytes(writer.body)
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
# dvs_msgs/EventArray, ROS 1


def decode_event_array_ros1(buffer) -> tuple[Events, EventArrayInfo]:
    """Decode a ROS 1 serialized ``dvs_msgs/EventArray`` (message bytes as stored in a ROS 1
    bag, without a length prefix). Raises EventDecodeError for truncated/malformed buffers."""
    reader = _FieldReader(buffer, little_endian=True, origin=0, cdr=False)
    reader.scalar("I", "header.seq")
    stamp_ns = reader.stamp_ns(signed_seconds=False)
    frame_id = reader.string("header.frame_id")
    height, width = reader.image_size()
    count = reader.sequence_length(_ROS1_EVENT_BYTES, "events")
    first_offset = reader.position
    reader.require(count * _ROS1_EVENT_BYTES, f"{count} events")
    records = np.ndarray((count,), _ROS1_EVENT_DTYPE, buffer=reader.data, offset=first_offset)
    reader.position += count * _ROS1_EVENT_BYTES
    if reader.position != len(reader.data):
        raise EventDecodeError(
            f"malformed message: {len(reader.data) - reader.position} unexpected bytes after "
            f"the events at byte offset {reader.position}")
    events = _decode_event_records([records], count, first_offset, width, height)
    return events, EventArrayInfo(stamp_ns, frame_id, height, width)


def encode_event_array_ros1(events: Events, height: int, width: int, frame_id: str = "",
                            stamp_ns: int | None = None, seq: int = 0) -> bytes:
    """Serialize Events as a ROS 1 ``dvs_msgs/EventArray`` (the bag's message bytes).

    Times must be non-negative (ROS 1 time is unsigned). Raises ValueError otherwise.
    """
    _check_events_fit(events, height, width)
    seconds, nanoseconds = _split_stamp(_default_stamp(events, stamp_ns), "header stamp",
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


# event_camera_msgs/EventPacket (and the legacy event_array_msgs/EventArray, same fields),
# ROS 2 CDR and ROS 1


@dataclass(frozen=True)
class Triggers:
    """External-trigger events of an EVT3 stream: t (int64 ns, same clock as the events),
    edge (uint8, 1 = rising), id (uint8, trigger channel)."""

    t: np.ndarray
    edge: np.ndarray
    id: np.ndarray

    @classmethod
    def empty(cls) -> "Triggers":
        return cls(np.empty(0, np.int64), np.empty(0, np.uint8), np.empty(0, np.uint8))

    def __len__(self) -> int:
        return len(self.t)


class PacketStreamState:
    """What carries over from one EventPacket to the next on one topic: the EVT3 decoder
    (time high word, row, vector base, 24-bit rollovers) and the libcaer_cmp column,
    vector base row and polarity. Use one per topic, in message order."""

    def __init__(self):
        self.evt3 = Evt3Decoder()
        self.libcaer_cmp = np.zeros(_CMP_STATE_SIZE, np.int64)


_PACKET_HEAD = {order: struct.Struct(order + "iII") for order in "<>"}  # sec, nanosec, len(frame_id)


def _packet_header_fast(buffer):
    """The EventPacket fields of a well-formed CDR buffer, parsed in a few struct calls;
    None when anything is out of the ordinary (then :func:`_packet_header_checked` runs
    and names the problem)."""
    size = len(buffer)
    if size < 16:
        return None
    head = bytes(buffer[:2])
    order = "<" if head == b"\x00\x01" else ">" if head == b"\x00\x00" else None
    if order is None:
        return None
    seconds, nanoseconds, frame_bytes = _PACKET_HEAD[order].unpack_from(buffer, 4)
    position = 16 + frame_bytes
    position += -(position - 4) % 4
    if nanoseconds >= NANOSECONDS_PER_SECOND or frame_bytes == 0 or position + 8 > size:
        return None
    height, width = struct.unpack_from(order + "II", buffer, position)
    position += 8
    position += -(position - 4) % 8
    if position + 20 > size or not height or not width:
        return None
    seq, time_base, encoding_bytes = struct.unpack_from(order + "QQI", buffer, position)
    encoding_offset = position + 16
    position += 20
    if encoding_bytes == 0 or position + encoding_bytes + 1 > size or time_base >= _TIME_BASE_LIMIT:
        return None
    raw_frame = bytes(buffer[16:16 + frame_bytes])
    raw_encoding = bytes(buffer[position:position + encoding_bytes])
    if raw_frame[-1] != 0 or raw_encoding[-1] != 0:
        return None
    position += encoding_bytes
    is_bigendian = buffer[position]
    position += 1
    position += -(position - 4) % 4
    if position + 4 > size:
        return None
    count = struct.unpack_from(order + "I", buffer, position)[0]
    payload_offset = position + 4
    if count > size - payload_offset or size - payload_offset - count > 3 or is_bigendian > 1:
        return None
    try:
        frame_id, encoding = raw_frame[:-1].decode(), raw_encoding[:-1].decode()
    except UnicodeDecodeError:
        return None
    payload = np.frombuffer(buffer, np.uint8, count, payload_offset)
    return (seconds * NANOSECONDS_PER_SECOND + nanoseconds, frame_id, height, width, seq,
            time_base, encoding, encoding_offset, bool(is_bigendian), payload, payload_offset)


#: time_base above this (ns) leaves no room for the event offsets in int64
_TIME_BASE_LIMIT = (1 << 63) - (1 << 42)


def _packet_header_checked(buffer, ros1: bool):
    """The EventPacket fields, every one checked (EventDecodeError naming what and where)."""
    if ros1:
        reader = _FieldReader(buffer, little_endian=True, origin=0, cdr=False)
        reader.scalar("I", "header.seq")
        stamp_ns = reader.stamp_ns(signed_seconds=False)
    else:
        reader = _cdr_reader(buffer)
        stamp_ns = reader.stamp_ns(signed_seconds=True)
    frame_id = reader.string("header.frame_id")
    height, width = reader.image_size()
    seq = reader.scalar("Q", "seq")
    time_base_offset = reader.position
    time_base = reader.scalar("Q", "time_base")
    if time_base >= _TIME_BASE_LIMIT:
        raise EventDecodeError(f"malformed message: time_base {time_base} ns at byte offset "
                               f"{time_base_offset} is beyond the int64 ns range")
    encoding_offset = reader.position
    encoding = reader.string("encoding")
    is_bigendian = reader.scalar("B", "is_bigendian")
    if is_bigendian > 1:
        raise EventDecodeError(f"malformed message: is_bigendian {is_bigendian} at byte offset "
                               f"{reader.position - 1} is not a bool")
    count = reader.sequence_length(1, "events")
    payload_offset = reader.position
    reader.require(count, f"{count} event bytes")
    payload = np.frombuffer(reader.data, np.uint8, count, payload_offset)
    reader.position += count
    if ros1:
        if reader.position != len(reader.data):
            raise EventDecodeError(
                f"malformed message: {len(reader.data) - reader.position} unexpected bytes "
                f"after the event bytes at byte offset {reader.position}")
    else:
        _check_no_trailing_bytes(reader, "the event bytes")
    return (stamp_ns, frame_id, height, width, seq, time_base, encoding, encoding_offset,
            bool(is_bigendian), payload, payload_offset)


def decode_event_packet(buffer, stream: "PacketStreamState | Evt3Decoder | None" = None,
                        ros1: bool = False) -> tuple[Events, EventPacketInfo]:
    """Decode a serialized ``event_camera_msgs/EventPacket`` (or legacy
    ``event_array_msgs/EventArray``): ROS 2 CDR, or ROS 1 with ``ros1=True``.

    Event times (ns) are the codec's *sensor time*, as event_camera_codecs defines it:

    - ``libcaer``: ``time_base + 1000 * ts`` (ts: the event's 31-bit microsecond stamp;
      when ts decreases within the packet the 2^31 us rollover is added);
    - ``libcaer_cmp``: ``time_base + 1000 * (TIME_HIGH << 12 | TIME_LOW)``;
    - ``mono``: ``time_base + dt`` (dt: the low 32 bits of each word);
    - ``evt3``: the camera's own microsecond clock x 1000, 24-bit rollovers counted from
      the first packet of the stream (``time_base`` is undefined for evt3);
      plus ``Evt3Decoder.time_offset_ns``.

    EVT3 and libcaer_cmp carry state from packet to packet: pass the same
    :class:`PacketStreamState` for consecutive packets of one topic (an
    :class:`Evt3Decoder` alone is accepted for evt3). Without one, each packet is decoded
    on its own (EVT3 events before the packet's first TIME_HIGH + TIME_LOW are dropped).
    :class:`EventMessageDecoder` adds the mapping to ROS time.

    Raises EventDecodeError for truncated/malformed buffers, unknown encodings and word
    types, and events outside the sensor.
    """
    if isinstance(stream, Evt3Decoder):
        evt3_only = stream
        stream = PacketStreamState()
        stream.evt3 = evt3_only
    elif stream is None:
        stream = PacketStreamState()
    header = None if ros1 else _packet_header_fast(buffer)
    if header is None:  # ROS 1, or something is off: the checked path says what
        header = _packet_header_checked(buffer, ros1)
    (stamp_ns, frame_id, height, width, seq, time_base, encoding, encoding_offset,
     is_bigendian, payload, payload_offset) = header
    triggers = None
    if encoding == ENCODING_MONO:
        events = _decode_mono(payload, time_base, is_bigendian, payload_offset, width, height)
    elif encoding == ENCODING_EVT3:
        events, triggers = stream.evt3.decode_with_triggers(payload, is_bigendian,
                                                            payload_offset, width, height)
    elif encoding == ENCODING_LIBCAER:
        events = _decode_libcaer(payload, time_base, is_bigendian, payload_offset, width, height)
    elif encoding == ENCODING_LIBCAER_CMP:
        events = _decode_libcaer_cmp(payload, time_base, is_bigendian, payload_offset, width,
                                     height, stream.libcaer_cmp)
    else:
        raise EventDecodeError(
            f"unknown EventPacket encoding {encoding!r} at byte offset {encoding_offset} "
            f"(supported: {', '.join(SUPPORTED_PACKET_ENCODINGS)})")
    info = EventPacketInfo(stamp_ns, frame_id, height, width, seq, time_base, encoding,
                           is_bigendian, triggers if triggers is not None else Triggers.empty())
    return events, info


def encode_event_packet(events: Events, height: int, width: int, encoding: str = ENCODING_EVT3,
                        frame_id: str = "", stamp_ns: int | None = None, seq: int = 0,
                        time_base: int | None = None, sensor_time_offset_ns: int = 0,
                        ros1: bool = False, evt3_time_offset_ns: int | None = None) -> bytes:
    """Serialize Events as an ``event_camera_msgs/EventPacket``: ROS 2 CDR (little endian)
    or, with ``ros1=True``, ROS 1 serialization. The exact inverse of
    :func:`decode_event_packet` for each encoding, times as below:

    - ``mono``: ``time_base`` (ns, default the first event's time) + 32-bit ``dt`` (ns) per
      event; raises ValueError when an event is more than 2^32 ns (4.29 s) after time_base.
    - ``evt3``: the sensor clock ``(t - sensor_time_offset_ns) / 1000`` in microseconds;
      times must be whole microseconds after the offset (ValueError otherwise). One ADDR_X
      word per event, plus TIME_HIGH / TIME_LOW / ADDR_Y words whenever they change.
      time_base is written as 0 (undefined for evt3).
    - ``libcaer``: as libcaer_driver does, with the camera's 64-bit microsecond clock
      ``(t - sensor_time_offset_ns) / 1000`` (whole microseconds, in time order):
      ``time_base`` = offset + 1000 x (the clock's bits above bit 30 at the first event),
      each event's stamp = the clock's low 31 bits (so a packet may hold 2^31 us rollovers).
    - ``evt3_time_offset_ns``: the former name of ``sensor_time_offset_ns`` (still accepted).
    - ``libcaer_cmp``: ``time_base`` = the first event's time; each event's time
      ``time_base + 1000 x (0 .. 2^24 - 1) us``, written as TIME_HIGH / TIME_LOW / ADDR_X
      words where they change, and runs of up to 8 rows sharing time, column, polarity and
      the row's upper bits as VECT_BASE_Y + VECT_8 (a single event as ADDR_Y).
    """
    _check_events_fit(events, height, width)
    if evt3_time_offset_ns is not None:
        sensor_time_offset_ns = evt3_time_offset_ns
    if encoding == ENCODING_MONO:
        base = int(events.t[0]) if (time_base is None and len(events)) else int(time_base or 0)
        payload = _encode_mono(events, base)
    elif encoding == ENCODING_EVT3:
        base = 0
        payload = encode_evt3_words(events, sensor_time_offset_ns).tobytes()
    elif encoding == ENCODING_LIBCAER:
        base, payload = _encode_libcaer(events, sensor_time_offset_ns)
    elif encoding == ENCODING_LIBCAER_CMP:
        base, payload = _encode_libcaer_cmp(events)
    else:
        raise ValueError(f"unknown EventPacket encoding {encoding!r} "
                         f"(supported: {', '.join(SUPPORTED_PACKET_ENCODINGS)})")
    # is_bigendian False: the encoders write little endian
    return _serialize_packet(_default_stamp(events, stamp_ns), frame_id, height, width, seq,
                             base, encoding, False, payload, ros1)


def _serialize_packet(stamp_ns: int, frame_id: str, height: int, width: int, seq: int,
                      time_base: int, encoding: str, is_bigendian: bool, payload: bytes,
                      ros1: bool) -> bytes:
    """EventPacket fields -> ROS 1 bytes or ROS 2 CDR (little endian)."""
    if ros1:
        seconds, nanoseconds = _split_stamp(stamp_ns, "header stamp", unsigned=True)
        frame = frame_id.encode("utf-8")
        raw_encoding = encoding.encode("utf-8")
        head = struct.pack(f"<IIII{len(frame)}sIIQQI{len(raw_encoding)}sBI", 0, seconds,
                           nanoseconds, len(frame), frame, height, width, seq, time_base,
                           len(raw_encoding), raw_encoding, int(is_bigendian), len(payload))
        return head + payload
    writer = _CdrWriter()
    writer.header(stamp_ns, frame_id)
    writer.scalar("I", height)
    writer.scalar("I", width)
    writer.scalar("Q", seq)
    writer.scalar("Q", time_base)
    writer.string(encoding)
    writer.scalar("B", int(is_bigendian))
    writer.scalar("I", len(payload))
    return b"\x00\x01\x00\x00" + bytes(writer.body) + payload


def event_packet_ros1_to_cdr(buffer) -> bytes:
    """The ROS 2 CDR bytes of a ROS 1 serialized EventPacket, its event bytes untouched
    (for republishing a ROS 1 bag on ROS 2). Raises EventDecodeError when malformed."""
    (stamp_ns, frame_id, height, width, seq, time_base, encoding, _, is_bigendian, payload,
     _) = _packet_header_checked(buffer, ros1=True)
    return _serialize_packet(stamp_ns, frame_id, height, width, seq, time_base, encoding,
                             is_bigendian, payload.tobytes(), ros1=False)


def _sensor_microseconds(events: Events, offset_ns: int, encoding: str) -> np.ndarray:
    relative = events.t - np.int64(offset_ns)
    if len(events) and (relative.min() < 0 or np.any(relative % 1000)):
        raise ValueError(f"{encoding} encoding needs times that are whole microseconds at or "
                         f"after the sensor time offset {offset_ns} ns")
    return relative // 1000


def _payload_words(payload: np.ndarray, word_bytes: int, is_bigendian: bool, encoding: str,
                   payload_offset: int) -> np.ndarray:
    if len(payload) % word_bytes:
        raise EventDecodeError(
            f"malformed message: {encoding} payload of {len(payload)} bytes at byte offset "
            f"{payload_offset} is not a whole number of {8 * word_bytes}-bit words")
    dtype = (">" if is_bigendian else "<") + ("u2" if word_bytes == 2 else "u4")
    return np.ascontiguousarray(payload.view(dtype).astype(dtype[1:]))

# --- mono: one 64-bit word per event ----------------------------------------------------
# Layout (event_camera_msgs README, "mono"; event_camera_codecs mono_decoder.h /
# mono_encoder.h): bit 63 polarity (1 = ON), bits 48-62 y (15 bits), bits 32-47 x
# (16 bits), bits 0-31 dt (ns) after the message's time_base; words in the byte order
# given by is_bigendian.

_MONO_WORD_BYTES = 8


def _decode_mono(payload: np.ndarray, time_base: int, is_bigendian: bool, payload_offset: int,
                 width: int, height: int) -> Events:
    if len(payload) % _MONO_WORD_BYTES:
        raise EventDecodeError(
            f"malformed message: mono payload of {len(payload)} bytes at byte offset "
            f"{payload_offset} is not a whole number of 8-byte words")
    words = payload.view(">u8" if is_bigendian else "<u8")
    x = ((words >> np.uint64(32)) & np.uint64(0xFFFF)).astype(np.uint16)
    y = ((words >> np.uint64(48)) & np.uint64(0x7FFF)).astype(np.uint16)
    on = (words >> np.uint64(63)).astype(np.uint8)
    dt = (words & np.uint64(0xFFFFFFFF)).astype(np.int64)
    _check_event_fields(x, y, np.zeros(len(x), np.int64), on, payload_offset, width, height)
    t = np.int64(time_base) + dt
    return Events(x, y, t, (on.astype(np.int8) * 2 - 1).astype(np.int8))


def _encode_mono(events: Events, time_base: int) -> bytes:
    dt = events.t - np.int64(time_base)
    if len(events) and (dt.min() < 0 or dt.max() >= (1 << 32)):
        raise ValueError(f"mono encoding needs 0 <= t - time_base < 2^32 ns; events span "
                         f"{int(dt.min())} .. {int(dt.max())} ns after time_base {time_base}")
    words = (dt.astype(np.uint64)
             | (events.x.astype(np.uint64) << np.uint64(32))
             | (events.y.astype(np.uint64) << np.uint64(48))
             | ((events.p > 0).astype(np.uint64) << np.uint64(63)))
    return words.astype("<u8").tobytes()



# --- libcaer: iniVation polarity events, 8 bytes each ---------------------------------
# Layout (libcaer polarity.h; event_camera_codecs libcaer_decoder.h; libcaer_driver
# copies libcaer's packets as they are): uint32 data, int32 timestamp (us), little endian.
# data: bit 0 valid mark, bit 1 polarity (1 = ON), bits 2-16 y, bits 17-31 x.
# Sensor time = time_base + 1000 * timestamp; the timestamp's 31 bits roll over every
# 2^31 us (35.8 min): when it decreases within a packet, 2^31 us is added from there on
# (the driver folds the clock's higher bits into time_base).

_LIBCAER_ROLLOVER_US = 1 << 31


@numba.njit(cache=True, nogil=True)
def _libcaer_decode_words(words, time_base, width, height, x, y, t, on):
    """words: uint32 pairs (data, timestamp). Fills x, y, t (ns), on; returns (index of
    the first bad event or -1, fault: 0 none, 1 negative timestamp, 2 outside sensor)."""
    high = np.int64(time_base)
    last = np.int64(0)
    for i in range(len(x)):
        data = np.int64(words[2 * i])
        stamp = np.int64(words[2 * i + 1])
        if stamp >= 2147483648:
            return i, 1
        if stamp < last:
            high += np.int64(2147483648) * 1000
        last = stamp
        ex = (data >> 17) & 0x7FFF
        ey = (data >> 2) & 0x7FFF
        if ex >= width or ey >= height:
            return i, 2
        x[i] = ex
        y[i] = ey
        t[i] = high + stamp * 1000
        on[i] = (data >> 1) & 1
    return -1, 0


def _decode_libcaer(payload: np.ndarray, time_base: int, is_bigendian: bool,
                    payload_offset: int, width: int, height: int) -> Events:
    if len(payload) % 8:
        raise EventDecodeError(
            f"malformed message: libcaer payload of {len(payload)} bytes at byte offset "
            f"{payload_offset} is not a whole number of 8-byte events")
    words = _payload_words(payload, 4, is_bigendian, ENCODING_LIBCAER, payload_offset)
    count = len(words) // 2
    x = np.empty(count, np.uint16)
    y = np.empty(count, np.uint16)
    t = np.empty(count, np.int64)
    on = np.empty(count, np.int8)
    bad, fault = _libcaer_decode_words(words, time_base, width, height, x, y, t, on)
    if fault:
        data, stamp = int(words[2 * bad]), int(words[2 * bad + 1])
        what = (f"negative timestamp {stamp - (1 << 32)} us" if fault == 1 else
                f"event x={(data >> 17) & 0x7FFF} y={(data >> 2) & 0x7FFF} outside the sensor "
                f"{width}x{height} px")
        raise EventDecodeError(f"malformed message: libcaer {what} at byte offset "
                               f"{payload_offset + 8 * bad}")
    return Events(x, y, t, on * np.int8(2) - np.int8(1))


def _encode_libcaer(events: Events, offset_ns: int) -> tuple[int, bytes]:
    if len(events) == 0:
        return int(offset_ns), b""
    clock_us = _sensor_microseconds(events, offset_ns, ENCODING_LIBCAER)
    if np.any(np.diff(clock_us) < 0):
        raise ValueError("libcaer encoding needs events in time order")
    high_us = int(clock_us[0]) & ~(_LIBCAER_ROLLOVER_US - 1)
    stamps = (clock_us - high_us) % _LIBCAER_ROLLOVER_US
    # each rollover must show as a decrease of the 31-bit stamp
    rollovers = (clock_us - high_us) // _LIBCAER_ROLLOVER_US
    decreases = np.r_[0, np.cumsum(stamps[1:] < stamps[:-1])]
    if np.any(rollovers != decreases):
        raise ValueError("libcaer encoding: a gap of 2^31 us (35.8 min) or more inside one packet")
    data = ((events.x.astype(np.uint32) << np.uint32(17)) | (events.y.astype(np.uint32) << np.uint32(2))
            | ((events.p > 0).astype(np.uint32) << np.uint32(1)) | np.uint32(1))
    words = np.empty((len(events), 2), "<u4")
    words[:, 0] = data
    words[:, 1] = stamps
    return int(offset_ns) + 1000 * high_us, words.tobytes()


# --- libcaer_cmp: compressed libcaer, 16-bit words -----------------------------------------
# Word = 4-bit code (bits 12-15) + 12 bits (event_camera_codecs libcaer_cmp_types.h /
# libcaer_cmp_decoder.h; libcaer_driver message_converter.cpp):
#   0 TIME_HIGH   time bits 12-23 (us after time_base)      } both 0 at the start of
#   1 TIME_LOW    time bits 0-11                             } every packet
#   2 ADDR_X      x (bits 0-10): the column of the following events
#   3 ADDR_Y      y (bits 0-10), polarity (bit 11): one event at (column, y)
#   4 VECT_BASE_Y base row (bits 0-10), polarity (bit 11) of the following vectors
#   5 VECT_8      8 valid bits: events at (column, base row + i), then base row += 8
# Sensor time = time_base + 1000 * (TIME_HIGH << 12 | TIME_LOW). Column, base row and
# polarity carry over from packet to packet (the driver starts each packet with ADDR_X).

CMP_TIME_HIGH, CMP_TIME_LOW, CMP_ADDR_X, CMP_ADDR_Y, CMP_VECT_BASE_Y, CMP_VECT_8 = range(6)
# stream state slots: column, column seen, base row, polarity, base seen
_CMP_STATE_SIZE = 5


@numba.njit(cache=True, nogil=True)
def _libcaer_cmp_decode_words(words, state, time_base, width, height, x, y, t, on):
    """Decode (or, with x empty, count) libcaer_cmp words; returns (events, index of the
    first bad word or -1, fault: 0 none, 1 unknown code, 2 outside the sensor, 3 event
    before any column / vector base)."""
    count = 0
    store = len(x) > 0
    high = np.int64(0)
    low = np.int64(0)
    for i in range(len(words)):
        word = np.int64(words[i])
        code = word >> 12
        value = word & 0xFFF
        if code == 0:
            high = value
        elif code == 1:
            low = value
        elif code == 2:
            state[0] = value & 0x7FF
            state[1] = 1
        elif code == 3:
            ey = value & 0x7FF
            if state[1] == 0:
                return count, i, 3
            if state[0] >= width or ey >= height:
                return count, i, 2
            if store:
                x[count] = state[0]
                y[count] = ey
                t[count] = time_base + (high * 4096 + low) * 1000
                on[count] = (value >> 11) & 1
            count += 1
        elif code == 4:
            state[2] = value & 0x7FF
            state[3] = (value >> 11) & 1
            state[4] = 1
        elif code == 5:
            if state[1] == 0 or state[4] == 0:
                return count, i, 3
            for bit in range(8):
                if (value >> bit) & 1:
                    ey = state[2] + bit
                    if state[0] >= width or ey >= height:
                        return count, i, 2
                    if store:
                        x[count] = state[0]
                        y[count] = ey
                        t[count] = time_base + (high * 4096 + low) * 1000
                        on[count] = state[3]
                    count += 1
            state[2] += 8
        else:
            return count, i, 1
    return count, -1, 0


@numba.njit(cache=True, nogil=True)
def _libcaer_cmp_decode_packet(words, state, time_base, width, height):
    """Count (on a copy of the state), allocate, decode: one call from Python. Returns
    (x, y, t, on, index of the first bad word or -1, fault)."""
    empty16 = np.empty(0, np.uint16)
    count, bad, fault = _libcaer_cmp_decode_words(
        words, state.copy(), time_base, width, height, empty16, empty16, np.empty(0, np.int64),
        np.empty(0, np.int8))
    if fault:
        return empty16, empty16, np.empty(0, np.int64), np.empty(0, np.int8), bad, fault
    x = np.empty(count, np.uint16)
    y = np.empty(count, np.uint16)
    t = np.empty(count, np.int64)
    on = np.empty(count, np.int8)
    _libcaer_cmp_decode_words(words, state, time_base, width, height, x, y, t, on)
    return x, y, t, on, -1, 0


def _decode_libcaer_cmp(payload: np.ndarray, time_base: int, is_bigendian: bool,
                        payload_offset: int, width: int, height: int,
                        state: np.ndarray) -> Events:
    words = _payload_words(payload, 2, is_bigendian, ENCODING_LIBCAER_CMP, payload_offset)
    x, y, t, on, bad, fault = _libcaer_cmp_decode_packet(words, state, np.int64(time_base), width,
                                                         height)
    if fault:
        word = int(words[bad])
        what = {1: f"unknown libcaer_cmp word code {word >> 12}",
                2: f"libcaer_cmp event outside the sensor {width}x{height} px",
                3: "libcaer_cmp event before any ADDR_X / VECT_BASE_Y word"}[fault]
        raise EventDecodeError(f"malformed message: {what} in word {word:#06x} at byte offset "
                               f"{payload_offset + 2 * bad}")
    return Events(x, y, t, on * np.int8(2) - np.int8(1))


@numba.njit(cache=True, nogil=True)
def _libcaer_cmp_flush(words, n, mask, polarity, row_high, last_row):
    """Write a run of rows (bit i of mask: row row_high + i) at words[n]: ADDR_Y for a
    single event, VECT_BASE_Y + VECT_8 otherwise. Returns the new word count."""
    if mask & (mask - 1) == 0:
        words[n] = (3 << 12) | (polarity << 11) | last_row
        return n + 1
    words[n] = (4 << 12) | (polarity << 11) | row_high
    words[n + 1] = (5 << 12) | mask
    return n + 2


@numba.njit(cache=True, nogil=True)
def _libcaer_cmp_encode(dt_us, x, y, on, words):
    """Fill words (room for 5 per event + 1); returns how many were written."""
    n = 0
    high = 0
    low = 0
    column = -1
    mask = 0
    mask_row_high = -1
    mask_polarity = -1
    last_row = 0
    for i in range(len(dt_us)):
        event_high = dt_us[i] >> 12
        event_low = dt_us[i] & 0xFFF
        row_high = y[i] & ~7
        row_low = y[i] & 7
        same_group = (event_high == high and event_low == low and x[i] == column
                      and on[i] == mask_polarity and row_high == mask_row_high
                      and mask != 0 and (mask >> row_low) == 0)
        if not same_group and mask != 0:  # flush the pending run
            n = _libcaer_cmp_flush(words, n, mask, mask_polarity, mask_row_high, last_row)
            mask = 0
        if event_high != high:
            high = event_high
            words[n] = (0 << 12) | high
            n += 1
        if event_low != low:
            low = event_low
            words[n] = (1 << 12) | low
            n += 1
        if x[i] != column:
            column = x[i]
            words[n] = (2 << 12) | column
            n += 1
        mask_row_high = row_high
        mask_polarity = on[i]
        mask |= 1 << row_low
        last_row = y[i]
    if mask != 0:
        n = _libcaer_cmp_flush(words, n, mask, mask_polarity, mask_row_high, last_row)
    return n


def _encode_libcaer_cmp(events: Events) -> tuple[int, bytes]:
    if len(events) == 0:
        return 0, b""
    if int(events.x.max()) >= 2048 or int(events.y.max()) >= 2048:
        raise ValueError("libcaer_cmp encoding holds coordinates below 2048 px")
    base = int(events.t[0])
    dt_us = _sensor_microseconds(events, base, ENCODING_LIBCAER_CMP)
    if dt_us.max() >= 1 << 24:
        raise ValueError("libcaer_cmp encoding: events must lie within 2^24 us (16.8 s) "
                         "after the packet's first event")
    words = np.zeros(5 * len(events) + 1, np.int64)
    n = _libcaer_cmp_encode(dt_us.astype(np.int64), events.x.astype(np.int64),
                            events.y.astype(np.int64), (events.p > 0).astype(np.int64), words)
    return base, words[:n].astype("<u2").tobytes()

# --- evt3: Prophesee EVT 3.0, 16-bit words ------------------------------------------------
# Word = 4-bit type (bits 12-15) + 12-bit payload (Prophesee "EVT 3.0 format" docs;
# event_camera_codecs evt3_types.h / evt3_decoder.h):
#   0x0 ADDR_Y      y (bits 0-10), system type (bit 11)
#   0x2 ADDR_X      x (bits 0-10), polarity (bit 11): one event at (x, current y)
#   0x3 VECT_BASE_X x (bits 0-10), polarity (bit 11): base of the following vectors
#   0x4 VECT_12     12 valid bits: events at base_x + i, then base_x += 12
#   0x5 VECT_8      8 valid bits (0-7): events at base_x + i, then base_x += 8
#   0x6 TIME_LOW    time bits 0-11 (us)
#   0x8 TIME_HIGH   time bits 12-23 (us); going back by more than 10 means a 2^24 us rollover
#   0xA EXT_TRIGGER edge (bit 0, 1 = rising), trigger id (bits 8-11): a trigger event
#   0x7, 0x9, 0xE, 0xF: continued / padding / others: no event
# Nothing is decoded before the stream's first TIME_HIGH followed by a TIME_LOW.

EVT3_ADDR_Y, EVT3_ADDR_X, EVT3_VECT_BASE_X, EVT3_VECT_12, EVT3_VECT_8 = 0x0, 0x2, 0x3, 0x4, 0x5
EVT3_TIME_LOW, EVT3_TIME_HIGH, EVT3_EXT_TRIGGER = 0x6, 0x8, 0xA
_EVT3_IGNORED_TYPES = (0x7, 0x9, 0xE, 0xF)
_EVT3_ROLLOVER_MIN_DISTANCE = 10  # TIME_HIGH steps back by more than this: a 2^24 us rollover
_EVT3_TIME_HIGH_PERIOD_US = 1 << 24

# decoder state slots (int64 array so numba can update it in place)
_STATE_TIME_HIGH, _STATE_TIME_LOW, _STATE_Y, _STATE_BASE_X, _STATE_POLARITY = 0, 1, 2, 3, 4
_STATE_HAS_HIGH, _STATE_HAS_TIME, _STATE_ROLLOVERS = 5, 6, 7
_STATE_SIZE = 8


@numba.njit(cache=True, nogil=True)
def _evt3_decode_words(words, state, width, height, x, y, t_us, on, trigger_t_us,
                       trigger_edge, trigger_id):
    """Decode EVT3 words into preallocated arrays (or only count when x is empty).

    Returns (events written, triggers written, index of the first bad word or -1, kind
    of fault: 0 none, 1 unknown word type, 2 event outside the sensor). ``state`` is
    updated.
    """
    count = 0
    triggers = 0
    store = len(x) > 0
    store_triggers = len(trigger_t_us) > 0
    for i in range(len(words)):
        word = np.int64(words[i])
        kind = word >> 12
        value = word & 0xFFF
        if kind == 0x8:  # TIME_HIGH
            high = value
            last_high = state[0]
            if state[5] == 1 and high < last_high and last_high - high > 10:
                state[7] += 1
            state[0] = high
            state[5] = 1
        elif kind == 0x6:  # TIME_LOW
            state[1] = value
            if state[5] == 1:
                state[6] = 1
        elif kind == 0x0:  # ADDR_Y
            state[2] = value & 0x7FF
        elif kind == 0x2 or kind == 0x3:  # ADDR_X or VECT_BASE_X
            ex = value & 0x7FF
            polarity = (value >> 11) & 1
            if kind == 0x3:
                state[3] = ex
                state[4] = polarity
            elif state[6] == 1:
                if ex >= width or state[2] >= height:
                    return count, triggers, i, 2
                if store:
                    x[count] = ex
                    y[count] = state[2]
                    t_us[count] = state[7] * 16777216 + state[0] * 4096 + state[1]
                    on[count] = polarity
                count += 1
        elif kind == 0x4 or kind == 0x5:  # VECT_12, VECT_8
            bits = 12 if kind == 0x4 else 8
            if state[6] == 1:
                for bit in range(bits):
                    if (value >> bit) & 1:
                        ex = state[3] + bit
                        if ex >= width or state[2] >= height:
                            return count, triggers, i, 2
                        if store:
                            x[count] = ex
                            y[count] = state[2]
                            t_us[count] = state[7] * 16777216 + state[0] * 4096 + state[1]
                            on[count] = state[4]
                        count += 1
            state[3] += bits
        elif kind == 0xA:  # EXT_TRIGGER
            if state[6] == 1:
                if store_triggers:
                    trigger_t_us[triggers] = state[7] * 16777216 + state[0] * 4096 + state[1]
                    trigger_edge[triggers] = value & 1
                    trigger_id[triggers] = (value >> 8) & 0xF
                triggers += 1
        elif kind == 0x7 or kind == 0x9 or kind == 0xE or kind == 0xF:
            pass
        else:
            return count, triggers, i, 1
    return count, triggers, -1, 0


@numba.njit(cache=True, nogil=True)
def _evt3_decode_packet(words, state, width, height):
    """Count (on a copy of the state), allocate, decode: one call from Python. Returns
    (x, y, t_us, on, trigger t_us, edge, id, index of the first bad word or -1, fault);
    the state advances only when there is no fault."""
    empty16 = np.empty(0, np.uint16)
    empty8 = np.empty(0, np.uint8)
    empty64 = np.empty(0, np.int64)
    count, trigger_count, bad, fault = _evt3_decode_words(
        words, state.copy(), width, height, empty16, empty16, empty64, empty8, empty64, empty8,
        empty8)
    if fault:
        return empty16, empty16, empty64, empty8, empty64, empty8, empty8, bad, fault
    x = np.empty(count, np.uint16)
    y = np.empty(count, np.uint16)
    t_us = np.empty(count, np.int64)
    on = np.empty(count, np.uint8)
    trigger_t_us = np.empty(trigger_count, np.int64)
    edge = np.empty(trigger_count, np.uint8)
    trigger_id = np.empty(trigger_count, np.uint8)
    _evt3_decode_words(words, state, width, height, x, y, t_us, on, trigger_t_us, edge, trigger_id)
    return x, y, t_us, on, trigger_t_us, edge, trigger_id, -1, 0


class Evt3Decoder:
    """Stateful EVT 3.0 decoder for one stream of packets (times, y, vector base carry over).

    time_offset_ns: added to the decoded sensor time (us x 1000) to give Events.t (ns).
    """

    def __init__(self, time_offset_ns: int = 0):
        self.time_offset_ns = int(time_offset_ns)
        self.state = np.zeros(_STATE_SIZE, np.int64)

    def decode(self, payload: np.ndarray, is_bigendian: bool = False, payload_offset: int = 0,
               width: int = 2048, height: int = 2048) -> Events:
        """Decode one packet's payload bytes; raise EventDecodeError on a bad word."""
        return self.decode_with_triggers(payload, is_bigendian, payload_offset, width, height)[0]

    def decode_with_triggers(self, payload: np.ndarray, is_bigendian: bool = False,
                             payload_offset: int = 0, width: int = 2048,
                             height: int = 2048) -> tuple[Events, Triggers]:
        """Decode one packet's payload bytes into CD events and external-trigger events."""
        words = _payload_words(payload, 2, is_bigendian, ENCODING_EVT3, payload_offset)
        x, y, t_us, on, trigger_t_us, edge, trigger_id, bad_word, fault = _evt3_decode_packet(
            words, self.state, width, height)
        if fault:
            word = int(words[bad_word])
            what = (f"unknown EVT3 word type {word >> 12:#x}" if fault == 1 else
                    f"EVT3 event outside the sensor {width}x{height} px")
            raise EventDecodeError(f"malformed message: {what} in word {word:#06x} at byte "
                                   f"offset {payload_offset + 2 * bad_word}")
        offset = np.int64(self.time_offset_ns)
        t_us *= 1000
        t_us += offset
        trigger_t_us *= 1000
        trigger_t_us += offset
        return (Events(x, y, t_us, on.view(np.int8) * np.int8(2) - np.int8(1)),
                Triggers(trigger_t_us, edge, trigger_id))


def encode_evt3_words(events: Events, time_offset_ns: int = 0) -> np.ndarray:
    """EVT3 words (little-endian uint16) for events in time order: TIME_HIGH, TIME_LOW and
    ADDR_Y words where they change (all three before the first event), one ADDR_X per event.

    The sensor clock is ``(t - time_offset_ns) / 1000`` us; raises ValueError when a time is
    not a whole microsecond after the offset, negative, or out of order. Times beyond 2^24 us
    are written modulo 2^24 (the decoder counts the rollovers, as the camera's would need
    TIME_HIGH words at least every 2^24 us - 10 x 4096 us; raises ValueError otherwise).
    """
    if len(events) == 0:
        return np.empty(0, "<u2")
    relative = events.t - np.int64(time_offset_ns)
    if relative.min() < 0 or np.any(relative % 1000):
        raise ValueError("evt3 encoding needs times that are whole microseconds at or after "
                         f"the offset {time_offset_ns} ns")
    microseconds = relative // 1000
    if np.any(np.diff(microseconds) < 0):
        raise ValueError("evt3 encoding needs events in time order")
    if np.any(np.diff(microseconds) >= _EVT3_TIME_HIGH_PERIOD_US - 11 * 4096):
        raise ValueError("evt3 encoding cannot represent a gap of 16.7 s or more between events")
    sensor_time = microseconds % _EVT3_TIME_HIGH_PERIOD_US
    high = sensor_time >> 12
    low = sensor_time & 0xFFF
    first = np.zeros(len(events), bool)
    first[0] = True
    changed_high = first | np.r_[False, microseconds[1:] >> 12 != microseconds[:-1] >> 12]
    changed_low = changed_high | np.r_[False, low[1:] != low[:-1]]
    changed_y = first | np.r_[False, events.y[1:] != events.y[:-1]]
    candidates = np.stack([
        (EVT3_TIME_HIGH << 12) | high,
        (EVT3_TIME_LOW << 12) | low,
        (EVT3_ADDR_Y << 12) | events.y.astype(np.int64),
        (EVT3_ADDR_X << 12) | ((events.p > 0).astype(np.int64) << 11) | events.x.astype(np.int64),
    ], axis=1)
    keep = np.stack([changed_high, changed_low, changed_y, np.ones(len(events), bool)], axis=1)
    return candidates[keep].astype("<u2")


# ----------------------------------------------------------------------------------------
# One stream of event messages -> Events in ROS time

#: a stream whose first event lies within this of its message's header stamp is already
#: stamped in ROS time (host clock); otherwise it runs on the camera's own clock
HOST_CLOCK_TOLERANCE_NS = NANOSECONDS_PER_SECOND

EVENT_ARRAY = "dvs_msgs/EventArray"
EVENT_PACKET = "event_camera_msgs/EventPacket"
LEGACY_EVENT_ARRAY = "event_array_msgs/EventArray"
EVENT_MESSAGE_TYPES = (EVENT_ARRAY, EVENT_PACKET, LEGACY_EVENT_ARRAY)


def short_message_type(message_type: str) -> str:
    """'package/msg/Name' or 'package/Name' -> 'package/Name'."""
    parts = message_type.split("/")
    return f"{parts[0]}/{parts[-1]}" if len(parts) == 3 and parts[1] == "msg" else message_type


class EventMessageDecoder:
    """Decodes one topic's stream of event messages into Events whose times are ROS time.

    ``decoder(buffer) -> (Events, info)``, one decoder per subscription or bag topic, fed
    in message order (EVT3 and libcaer_cmp state carries over, and so does the clock
    mapping). message_type: ``dvs_msgs/EventArray``, ``event_camera_msgs/EventPacket`` or
    ``event_array_msgs/EventArray`` (with or without ``/msg/``); ``ros1``: ROS 1
    serialization (bag bytes) instead of ROS 2 CDR.

    **Time convention** (the same in the node, the bag readers, ``focus-ros estimate``,
    ``replay``, ``evaluate`` and ``info``): every event time is ROS time, the clock of the
    message headers. The codec gives each event its *sensor time* s (see
    :func:`decode_event_packet`; dvs_msgs: the event's ``ts``), with the 24-bit (evt3) and
    31-bit (libcaer) microsecond rollovers unwrapped. Event time = s + offset, with one
    offset per stream fixed at the first message that holds events: 0 when that message's
    first event lies within 1 s (:data:`HOST_CLOCK_TOLERANCE_NS`) of the message's header
    stamp (the driver already stamps in ROS time: libcaer, libcaer_cmp, dvs_msgs), else
    header stamp - s of that first event (the camera's own clock: evt3, and mono as
    recorded by the ros-event-camera tools). :attr:`offset_ns` is None until fixed.
    """

    def __init__(self, message_type: str, ros1: bool = False):
        self.message_type = short_message_type(message_type)
        if self.message_type not in EVENT_MESSAGE_TYPES:
            raise ValueError(f"unknown event message type '{message_type}': use one of "
                             f"{', '.join(EVENT_MESSAGE_TYPES)}")
        self.ros1 = ros1
        self.packets = PacketStreamState()
        self.offset_ns: int | None = None

    def decode_sensor_time(self, buffer):
        """(Events in the codec's sensor time, info), advancing the stream state."""
        if self.message_type == EVENT_ARRAY:
            return decode_event_array_ros1(buffer) if self.ros1 else decode_event_array(buffer)
        return decode_event_packet(buffer, self.packets, ros1=self.ros1)

    def __call__(self, buffer):
        events, info = self.decode_sensor_time(buffer)
        if self.offset_ns is None and len(events):
            lag = info.stamp_ns - int(events.t[0])
            self.offset_ns = 0 if abs(lag) <= HOST_CLOCK_TOLERANCE_NS else lag
        if self.offset_ns:
            offset = np.int64(self.offset_ns)
            events = Events(events.x, events.y, events.t + offset, events.p)
            triggers = getattr(info, "triggers", None)
            if triggers is not None and len(triggers):
                triggers.t[:] += offset
        return events, info
