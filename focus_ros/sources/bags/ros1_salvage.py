"""Reading what a truncated or unindexed ROS 1 bag still holds.

A recording cut short (a full disk, a crash, a power cut) leaves a ROS 1 bag without its
index, and rosbags refuses to open it. The records themselves are still there, in order:
this module walks them from the start (format 2.0: ``header length, header, data length,
data`` records; chunks hold connection and message records, uncompressed or compressed
with bz2 or lz4) and stops at the first record that is cut or damaged, saying where.

    scan = Ros1Scan(path)
    for topic, msgtype, t_ns, raw in scan.messages():   # ROS 1 serialized bytes
        ...
    scan.fault   # None, or "byte 123456: chunk record cut short" after the loop
"""

from __future__ import annotations

import bz2
import struct
from pathlib import Path

__all__ = ["Ros1Scan"]

MAGIC = b"#ROSBAG V2.0\n"
OP_MESSAGE = 0x02
OP_CHUNK = 0x05
OP_CONNECTION = 0x07


class _Truncated(Exception):
    """A record runs past the end of the data it is read from."""


def _header_fields(header: bytes) -> dict[str, bytes]:
    fields, position = {}, 0
    while position < len(header):
        if position + 4 > len(header):
            raise _Truncated("header field length cut short")
        (length,) = struct.unpack_from("<I", header, position)
        position += 4
        if position + length > len(header):
            raise _Truncated("header field cut short")
        name, _, value = header[position:position + length].partition(b"=")
        fields[name.decode("latin-1")] = value
        position += length
    return fields


def _records(data: bytes, start: int):
    """(offset, header fields, data, complete) of consecutive records. A record whose data
    is cut short comes last with complete False (its data as far as it goes); a record
    whose header is cut short raises _Truncated."""
    position = start
    while position < len(data):
        if position + 4 > len(data):
            raise _Truncated(f"byte {position}: record header length cut short")
        (header_length,) = struct.unpack_from("<I", data, position)
        header_end = position + 4 + header_length
        if header_end + 4 > len(data):
            raise _Truncated(f"byte {position}: record header cut short")
        header = _header_fields(data[position + 4:header_end])
        (data_length,) = struct.unpack_from("<I", data, header_end)
        data_start = header_end + 4
        if data_start + data_length > len(data):
            yield position, header, data[data_start:], False
            return
        yield position, header, data[data_start:data_start + data_length], True
        position = data_start + data_length


def _decompress(compression: bytes, payload: bytes) -> bytes:
    if compression == b"none":
        return payload
    if compression == b"bz2":
        return bz2.decompress(payload)
    if compression == b"lz4":
        import lz4.frame
        return lz4.frame.decompress(payload)
    raise ValueError(f"unknown chunk compression {compression.decode('latin-1')!r}")


class Ros1Scan:
    """Walks the records of a ROS 1 bag from the start, without its index (module docstring)."""

    def __init__(self, path):
        self.path = Path(path)
        self.connections: dict[int, tuple[str, str]] = {}  # id -> (topic, ROS 1 type)
        self.fault: str | None = None

    def messages(self, topics=None):
        """(topic, ROS 1 type, log time ns, ROS 1 serialized bytes) in file order, stopping
        quietly at the first damaged record (see :attr:`fault`)."""
        data = self.path.read_bytes()
        if not data.startswith(MAGIC):
            self.fault = "not a ROS 1 bag (no '#ROSBAG V2.0' at the start)"
            return
        try:
            for offset, header, payload, complete in _records(data, len(MAGIC)):
                op = header.get("op", b"\0")[0]
                compression = header.get("compression", b"none")
                if op == OP_CHUNK and (complete or compression == b"none"):
                    try:
                        inner = _decompress(compression, payload)
                    except Exception as error:  # bz2/lz4 raise their own types
                        raise _Truncated(f"byte {offset}: chunk cannot be decompressed ({error})") from None
                    try:
                        yield from self._chunk(inner, topics)
                    except _Truncated as error:
                        raise _Truncated(f"byte {offset}: inside a chunk: {error}") from None
                elif complete:
                    yield from self._record(op, header, payload, topics)
                if not complete:
                    raise _Truncated(f"byte {offset}: record data cut short")
        except _Truncated as error:
            self.fault = str(error)

    def _chunk(self, inner: bytes, topics):
        """The records of a chunk; a chunk cut short yields its complete records, then stops."""
        for _, header, payload, complete in _records(inner, 0):
            if not complete:
                raise _Truncated("message record cut short")
            yield from self._record(header.get("op", b"\0")[0], header, payload, topics)

    def _record(self, op: int, header: dict, payload: bytes, topics):
        if op == OP_CONNECTION:
            connection = struct.unpack("<I", header["conn"])[0]
            details = _header_fields(payload)
            self.connections[connection] = (header["topic"].decode(), details.get("type", b"").decode())
        elif op == OP_MESSAGE:
            connection = struct.unpack("<I", header["conn"])[0]
            if connection not in self.connections:
                return
            topic, msgtype = self.connections[connection]
            if topics is not None and topic not in topics:
                return
            seconds, nanoseconds = struct.unpack("<II", header["time"])
            yield topic, msgtype, seconds * 1_000_000_000 + nanoseconds, payload
