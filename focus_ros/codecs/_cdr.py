"""Serialization primitives shared by the message codecs: the decode error, the
bounds-checked field reader (ROS 2 CDR and ROS 1 packed), the CDR writer, stamp splitting
and the checks the encoders apply to the events they are given.

ROS 2 CDR as rclpy / Fast DDS produce it (XCDR1, "plain CDR"): a 4-byte encapsulation
header (``00 00`` big endian or ``00 01`` little endian, then 2 option bytes), then the
fields, each aligned to its own size (at most 8) counted from the first byte after the
encapsulation header. Strings are a uint32 length counting a terminating NUL, then the
bytes and the NUL.

ROS 1 serialization: little endian, no alignment, strings as a uint32 length and the
bytes (no NUL); ``Header`` is ``uint32 seq, time stamp (uint32 sec, uint32 nsec), string
frame_id``.

Malformed or truncated input raises :class:`EventDecodeError` (a ``ValueError``) with one
line saying what is wrong and at which byte offset (counted from the start of the
buffer as given, including the encapsulation header), and a ``kind`` that names the fault
without its numbers (for "report once per kind of fault").

The module is private to the package; its names are what the codec modules share.
"""

from __future__ import annotations

import struct

from focus_ros.events import NANOSECONDS_PER_SECOND, Events

#: CDR encapsulation identifiers (XCDR1 plain CDR) -> little endian?
_ENCAPSULATION_LITTLE_ENDIAN = {b"\x00\x00": False, b"\x00\x01": True}
#: bytes of the CDR encapsulation header; alignment counts from here
_ENCAPSULATION_BYTES = 4
#: the encapsulation header the writers put first (little endian, no options)
LITTLE_ENDIAN_ENCAPSULATION = b"\x00\x01\x00\x00"
#: refuse sequence lengths above this many elements (a corrupt length, not a message)
MAX_SEQUENCE_LENGTH = 1 << 28


class EventDecodeError(ValueError):
    """A serialized event message is truncated or malformed (one line: what, where).

    kind: a short stable name of the fault (``"truncated"``, ``"encapsulation"``, ...), the
    same for every message with that fault whatever its bytes; None when the raiser gave
    none (the reader then groups by the text without its numbers)."""

    def __init__(self, message: str, kind: str | None = None):
        super().__init__(message)
        self.kind = kind


# ----------------------------------------------------------------------------------------
# Field reader with bounds checks


class FieldReader:
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
                f"buffer has {len(self.data)} bytes", kind="truncated")

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
                f"only {len(self.data) - start} remain", kind="string_length")
        raw = bytes(self.data[start:start + length])
        self.position += length
        if self.cdr:  # CDR strings carry a terminating NUL counted in the length
            if length == 0 or raw[-1] != 0:
                raise EventDecodeError(
                    f"malformed message: {what} at byte offset {start - 4} is not NUL-terminated",
                    kind="string_terminator")
            raw = raw[:-1]
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise EventDecodeError(
                f"malformed message: {what} at byte offset {start} is not UTF-8", kind="string_encoding") from None

    def sequence_length(self, element_bytes_min: int, what: str) -> int:
        """Read a sequence length and check that the elements can fit in what remains."""
        offset = self.position
        count = self.scalar("I", f"length of {what}")
        remaining = len(self.data) - self.position
        if count > MAX_SEQUENCE_LENGTH or count * element_bytes_min > remaining:
            raise EventDecodeError(
                f"malformed message: {what} declares {count} elements at byte offset {offset}, "
                f"only {remaining} bytes remain", kind="sequence_length")
        return count

    def stamp_ns(self, signed_seconds: bool, what: str = "header stamp") -> int:
        seconds = self.scalar("i" if signed_seconds else "I", what)
        offset = self.position
        nanoseconds = self.scalar("I", what)
        if nanoseconds >= NANOSECONDS_PER_SECOND:
            raise EventDecodeError(
                f"malformed message: {what} nanoseconds {nanoseconds} >= 1e9 at byte offset {offset}",
                kind="stamp")
        return seconds * NANOSECONDS_PER_SECOND + nanoseconds

    def image_size(self, zero_is_undeclared: bool = False) -> tuple[int, int]:
        """(height, width) px; a zero side is an error, except 0x0 with ``zero_is_undeclared``
        (a message that does not say its sensor's size: (0, 0) is returned)."""
        offset = self.position
        height = self.scalar("I", "height")
        width = self.scalar("I", "width")
        if (height == 0 or width == 0) and not (zero_is_undeclared and height == width == 0):
            raise EventDecodeError(
                f"malformed message: sensor size {width}x{height} px (width x height) "
                f"at byte offset {offset} has a zero side", kind="sensor_size")
        return height, width


def cdr_reader(buffer) -> FieldReader:
    """A reader positioned after a valid CDR encapsulation header."""
    head = bytes(memoryview(buffer)[:_ENCAPSULATION_BYTES])
    if len(head) < _ENCAPSULATION_BYTES:
        raise EventDecodeError(
            f"truncated message: {len(head)} bytes, shorter than the 4-byte CDR encapsulation header",
            kind="truncated")
    little_endian = _ENCAPSULATION_LITTLE_ENDIAN.get(head[:2])
    if little_endian is None:
        raise EventDecodeError(
            f"bad CDR encapsulation id {head[:2].hex()} at byte offset 0 "
            f"(expected 0000 or 0001, plain CDR)", kind="encapsulation")
    return FieldReader(buffer, little_endian, origin=_ENCAPSULATION_BYTES, cdr=True)


def check_no_trailing_bytes(reader: FieldReader, what: str) -> None:
    extra = len(reader.data) - reader.position
    if extra > 3:  # up to 3 bytes may be end-of-message alignment padding
        raise EventDecodeError(
            f"malformed message: {extra} unexpected bytes after {what} at byte offset {reader.position}",
            kind="trailing_bytes")


def check_ros1_message_end(reader: FieldReader, what: str) -> None:
    """ROS 1 messages end with their last field: any byte after it is an error."""
    if reader.position != len(reader.data):
        raise EventDecodeError(
            f"malformed message: {len(reader.data) - reader.position} unexpected bytes after "
            f"{what} at byte offset {reader.position}", kind="trailing_bytes")


# ----------------------------------------------------------------------------------------
# CDR writer, stamps


def split_stamp(stamp_ns: int, what: str, unsigned: bool) -> tuple[int, int]:
    """(seconds, nanoseconds) of a stamp (ns); ValueError when the seconds overflow the
    message's time field (int32, or uint32 for ROS 1 time)."""
    seconds, nanoseconds = divmod(int(stamp_ns), NANOSECONDS_PER_SECOND)
    low = 0 if unsigned else -(1 << 31)
    high = (1 << 32) - 1 if unsigned else (1 << 31) - 1
    if not low <= seconds <= high:
        raise ValueError(f"{what} {stamp_ns} ns does not fit the message's time field")
    return seconds, nanoseconds


class CdrWriter:
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
        seconds, nanoseconds = split_stamp(stamp_ns, "header stamp", unsigned=False)
        self.scalar("i", seconds)
        self.scalar("I", nanoseconds)
        self.string(frame_id)


# ----------------------------------------------------------------------------------------
# Checks shared by the codecs


def check_events_fit(events: Events, height: int, width: int) -> None:
    """Before encoding: ValueError when the sensor size is not positive or an event lies outside it."""
    if height <= 0 or width <= 0:
        raise ValueError(f"sensor size {width}x{height} px must be positive")
    if len(events) and (int(events.x.max()) >= width or int(events.y.max()) >= height):
        raise ValueError(f"events reach x={int(events.x.max())}, y={int(events.y.max())}, "
                         f"outside the sensor {width}x{height} px")


def default_stamp(events: Events, stamp_ns: int | None) -> int:
    """The header stamp (ns) to write: the one given, else the first event's time (0 when empty)."""
    if stamp_ns is not None:
        return int(stamp_ns)
    return int(events.t[0]) if len(events) else 0
