"""``event_camera_msgs/EventPacket`` (and the legacy ``event_array_msgs/EventArray``, the
same fields) in ROS 2 CDR and ROS 1 serialization <-> Events.

Fields (as in ``interfaces/event_camera_msgs``): ``std_msgs/Header header, uint32 height,
uint32 width, uint64 seq, uint64 time_base, string encoding, bool is_bigendian,
uint8[] events``. The header is parsed here (a fast path of a few struct calls for
well-formed CDR, the field-by-field checked path otherwise); the event bytes go to the
encoding's codec, one module per encoding, found by name in :data:`_PACKET_CODECS`.
A new encoding is one module (``decode_packet``, ``encode_packet`` and, when it keeps
state from packet to packet, ``new_stream_state``) and one row of that table.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

import focus_ros.codecs.evt3 as evt3
import focus_ros.codecs.libcaer as libcaer
import focus_ros.codecs.libcaer_cmp as libcaer_cmp
import focus_ros.codecs.mono as mono
from focus_ros.codecs._cdr import (
    LITTLE_ENDIAN_ENCAPSULATION, EventDecodeError, CdrWriter, FieldReader, cdr_reader,
    check_events_fit, check_no_trailing_bytes, check_ros1_message_end, default_stamp,
    split_stamp)
from focus_ros.codecs.evt3 import ENCODING_EVT3, NO_TRIGGERS, Evt3Decoder, Triggers
from focus_ros.codecs.libcaer import ENCODING_LIBCAER
from focus_ros.codecs.libcaer_cmp import ENCODING_LIBCAER_CMP
from focus_ros.codecs.mono import ENCODING_MONO
from focus_ros.events import NANOSECONDS_PER_SECOND, Events


@dataclass(frozen=True)
class _PacketCodec:
    """One EventPacket encoding: a row of :data:`_PACKET_CODECS`.

    decode(payload, time_base, is_bigendian, payload_offset, width, height, state) ->
    (Events, Triggers or None, events outside): payload (uint8 array), time_base (ns), byte
    offset of the payload in the message (for error texts), sensor size (px), this
    encoding's stream state (from new_state, advanced in place; None when it has none).
    The Events are those inside width x height px, in fresh arrays the caller owns (the
    stream decoder moves their times in place); events outside are dropped and counted.
    Raises EventDecodeError for a structurally invalid payload (bad word, partial word).

    encode(events, time_base or None, sensor_time_offset_ns) -> (time_base written, payload
    bytes, little endian). Raises ValueError when the events do not fit the encoding.

    new_state() -> the state one stream carries from packet to packet (None: stateless).
    """

    decode: Callable[..., tuple[Events, "Triggers | None", int]]
    encode: Callable[[Events, "int | None", int], tuple[int, bytes]]
    new_state: Callable[[], object] | None = None


#: encoding name -> codec, in the order error messages list them
_PACKET_CODECS = {
    ENCODING_EVT3: _PacketCodec(evt3.decode_packet, evt3.encode_packet, evt3.new_stream_state),
    ENCODING_LIBCAER_CMP: _PacketCodec(libcaer_cmp.decode_packet, libcaer_cmp.encode_packet,
                                       libcaer_cmp.new_stream_state),
    ENCODING_LIBCAER: _PacketCodec(libcaer.decode_packet, libcaer.encode_packet),
    ENCODING_MONO: _PacketCodec(mono.decode_packet, mono.encode_packet),
}
SUPPORTED_PACKET_ENCODINGS = tuple(_PACKET_CODECS)

#: time_base above this (ns) leaves no room for the event offsets in int64
_TIME_BASE_LIMIT = (1 << 63) - (1 << 42)


@dataclass(frozen=True)
class EventPacketInfo:
    """Non-event fields of an ``event_camera_msgs/EventPacket`` (stamp and time_base in ns),
    its external-trigger events (evt3 only; empty otherwise), and outside_events: how many
    of its events lay outside the declared width x height and were dropped (the name and
    meaning of :class:`~focus_ros.codecs.dvs_msgs.EventArrayInfo`'s)."""

    stamp_ns: int
    frame_id: str
    height: int
    width: int
    seq: int
    time_base: int
    encoding: str
    is_bigendian: bool
    triggers: Triggers = field(default=None, compare=False, repr=False)
    outside_events: int = 0


class PacketStreamState:
    """What carries over from one EventPacket to the next on one topic: the EVT3 decoder
    (time high word, row, vector base, 24-bit rollovers) and the libcaer_cmp column,
    vector base row and polarity. Use one per topic, in message order."""

    def __init__(self):
        #: encoding name -> its stream state (the encodings that keep one)
        self.by_encoding = {name: codec.new_state() for name, codec in _PACKET_CODECS.items()
                            if codec.new_state is not None}


# ----------------------------------------------------------------------------------------
# Header


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


def _packet_header_checked(buffer, ros1: bool):
    """The EventPacket fields, every one checked (EventDecodeError naming what and where)."""
    if ros1:
        reader = FieldReader(buffer, little_endian=True, origin=0, cdr=False)
        reader.scalar("I", "header.seq")
        stamp_ns = reader.stamp_ns(signed_seconds=False)
    else:
        reader = cdr_reader(buffer)
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
        check_ros1_message_end(reader, "the event bytes")
    else:
        check_no_trailing_bytes(reader, "the event bytes")
    return (stamp_ns, frame_id, height, width, seq, time_base, encoding, encoding_offset,
            bool(is_bigendian), payload, payload_offset)


# ----------------------------------------------------------------------------------------
# Messages


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

    Events outside the declared width x height (a driver's glitch) are dropped and counted
    (``info.outside_events``), the others kept. The Events arrays are fresh (the caller may
    change them in place). Raises EventDecodeError for truncated/malformed buffers, unknown
    encodings and word types.
    """
    if isinstance(stream, Evt3Decoder):
        evt3_only = stream
        stream = PacketStreamState()
        stream.by_encoding[ENCODING_EVT3] = evt3_only
    elif stream is None:
        stream = PacketStreamState()
    header = None if ros1 else _packet_header_fast(buffer)
    if header is None:  # ROS 1, or something is off: the checked path says what
        header = _packet_header_checked(buffer, ros1)
    (stamp_ns, frame_id, height, width, seq, time_base, encoding, encoding_offset,
     is_bigendian, payload, payload_offset) = header
    codec = _PACKET_CODECS.get(encoding)
    if codec is None:
        raise EventDecodeError(
            f"unknown EventPacket encoding {encoding!r} at byte offset {encoding_offset} "
            f"(supported: {', '.join(SUPPORTED_PACKET_ENCODINGS)})")
    events, triggers, outside = codec.decode(payload, time_base, is_bigendian, payload_offset, width, height,
                                             stream.by_encoding.get(encoding))
    info = EventPacketInfo(stamp_ns, frame_id, height, width, seq, time_base, encoding,
                           is_bigendian, NO_TRIGGERS if triggers is None else triggers, outside)
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
    check_events_fit(events, height, width)
    if evt3_time_offset_ns is not None:
        sensor_time_offset_ns = evt3_time_offset_ns
    codec = _PACKET_CODECS.get(encoding)
    if codec is None:
        raise ValueError(f"unknown EventPacket encoding {encoding!r} "
                         f"(supported: {', '.join(SUPPORTED_PACKET_ENCODINGS)})")
    base, payload = codec.encode(events, time_base, sensor_time_offset_ns)
    # is_bigendian False: the encoders write little endian
    return _serialize_packet(default_stamp(events, stamp_ns), frame_id, height, width, seq,
                             base, encoding, False, payload, ros1)


def _serialize_packet(stamp_ns: int, frame_id: str, height: int, width: int, seq: int,
                      time_base: int, encoding: str, is_bigendian: bool, payload: bytes,
                      ros1: bool) -> bytes:
    """EventPacket fields -> ROS 1 bytes or ROS 2 CDR (little endian)."""
    if ros1:
        seconds, nanoseconds = split_stamp(stamp_ns, "header stamp", unsigned=True)
        frame = frame_id.encode("utf-8")
        raw_encoding = encoding.encode("utf-8")
        head = struct.pack(f"<IIII{len(frame)}sIIQQI{len(raw_encoding)}sBI", 0, seconds,
                           nanoseconds, len(frame), frame, height, width, seq, time_base,
                           len(raw_encoding), raw_encoding, int(is_bigendian), len(payload))
        return head + payload
    writer = CdrWriter()
    writer.header(stamp_ns, frame_id)
    writer.scalar("I", height)
    writer.scalar("I", width)
    writer.scalar("Q", seq)
    writer.scalar("Q", time_base)
    writer.string(encoding)
    writer.scalar("B", int(is_bigendian))
    writer.scalar("I", len(payload))
    return LITTLE_ENDIAN_ENCAPSULATION + bytes(writer.body) + payload


def event_packet_ros1_to_cdr(buffer) -> bytes:
    """The ROS 2 CDR bytes of a ROS 1 serialized EventPacket, its event bytes untouched
    (for republishing a ROS 1 bag on ROS 2). Raises EventDecodeError when malformed."""
    (stamp_ns, frame_id, height, width, seq, time_base, encoding, _, is_bigendian, payload,
     _) = _packet_header_checked(buffer, ros1=True)
    return _serialize_packet(stamp_ns, frame_id, height, width, seq, time_base, encoding,
                             is_bigendian, payload.tobytes(), ros1=False)
