"""Event message codecs: round trips, byte-exact cross-checks against rosbags' serializer
and rclpy, hand-built mono / EVT3 words per their documentation, and malformed input."""

from __future__ import annotations

import numpy as np
import pytest

from focus_ros import transport
from focus_ros.events import Events
from focus_ros.sources.bags import typestore_with_event_types
from focus_ros.transport import EventDecodeError

SECOND = 1_000_000_000


def random_events(count: int, width: int = 240, height: int = 180, seed: int = 0,
                  start_ns: int = 49 * SECOND, microseconds: bool = False) -> Events:
    rng = np.random.default_rng(seed)
    t = start_ns + np.sort(rng.integers(0, 3 * SECOND, count))
    if microseconds:
        t = t // 1000 * 1000
    return Events.from_arrays(rng.integers(0, width, count), rng.integers(0, height, count), t,
                              rng.integers(0, 2, count))


EDGE_CASES = {
    "empty": Events.empty(),
    "one": random_events(1),
    "two": random_events(2),
    "many": random_events(5000, seed=1),
    # the largest coordinates a 65536 x 65536 sensor has; polarity both ways
    "max coordinates": Events.from_arrays([65535, 0], [65535, 65535], [0, 1], [1, 0]),
    # times straddling whole seconds (sec/nanosec split)
    "second boundaries": Events.from_arrays([1, 2, 3, 4], [5, 6, 7, 8],
                                            [SECOND - 1, SECOND, 2 * SECOND - 1, 2 * SECOND],
                                            [1, 0, 1, 0]),
}


def sensor_size(events: Events) -> tuple[int, int]:
    if len(events) and events.x.max() > 239 or len(events) and events.y.max() > 179:
        return 65536, 65536
    return 180, 240


# ----------------------------------------------------------------------------------------
# Round trips


@pytest.mark.parametrize("name", EDGE_CASES)
def test_event_array_cdr_round_trip(name):
    events = EDGE_CASES[name]
    height, width = sensor_size(events)
    buffer = transport.encode_event_array(events, height, width, "davis", stamp_ns=7 * SECOND + 5)
    decoded, info = transport.decode_event_array(buffer)
    assert decoded.equals(events)
    assert info == transport.EventArrayInfo(7 * SECOND + 5, "davis", height, width)
    assert len(buffer) == 4 + 8 + 4 + len("davis") + 1 + 2 + 12 + transport.cdr_event_sequence_bytes(len(events))


@pytest.mark.parametrize("name", EDGE_CASES)
def test_event_array_ros1_round_trip(name):
    events = EDGE_CASES[name]
    height, width = sensor_size(events)
    buffer = transport.encode_event_array_ros1(events, height, width, "dvs", stamp_ns=3 * SECOND)
    decoded, info = transport.decode_event_array_ros1(buffer)
    assert decoded.equals(events)
    assert info == transport.EventArrayInfo(3 * SECOND, "dvs", height, width)
    assert len(buffer) == 4 + 8 + 4 + 3 + 12 + 13 * len(events)


@pytest.mark.parametrize("encoding", ["mono", "evt3"])
@pytest.mark.parametrize("name", ["empty", "one", "two", "many", "second boundaries"])
def test_event_packet_round_trip(encoding, name):
    events = EDGE_CASES[name]
    if encoding == "evt3":  # EVT3 has microsecond resolution
        events = Events(events.x, events.y, events.t // 1000 * 1000, events.p)
    origin = int(events.t[0]) if len(events) else 0
    buffer = transport.encode_event_packet(events, 180, 240, encoding, "cam", seq=42,
                                           evt3_time_offset_ns=origin)
    decoded, info = transport.decode_event_packet(buffer, transport.Evt3Decoder(origin))
    assert decoded.equals(events)
    assert (info.encoding, info.seq, info.height, info.width, info.frame_id) == (encoding, 42, 180, 240, "cam")


def test_evt3_round_trip_across_the_24_bit_microsecond_rollover():
    # 40 s of events from t = 0: the 24-bit us clock (16.8 s) wraps twice
    events = Events.from_arrays(np.arange(200) % 240, np.arange(200) % 180,
                                np.linspace(0, 40 * SECOND, 200).astype(np.int64) // 1000 * 1000,
                                np.arange(200) % 2)
    decoder = transport.Evt3Decoder()
    decoded = Events.concatenate(
        transport.decode_event_packet(transport.encode_event_packet(part, 180, 240, "evt3"), decoder)[0]
        for part in (events[:70], events[70:150], events[150:]))
    assert decoded.equals(events)


def test_encoders_refuse_events_they_cannot_represent():
    events = random_events(10)
    with pytest.raises(ValueError, match="outside the sensor"):
        transport.encode_event_array(events, 100, 100)
    with pytest.raises(ValueError, match="whole microseconds"):
        transport.encode_event_packet(Events.from_arrays([1], [1], [1001], [1]), 180, 240, "evt3")
    with pytest.raises(ValueError, match="2\\^32"):
        transport.encode_event_packet(Events.from_arrays([1, 1], [1, 1], [0, 5 * SECOND], [1, 1]),
                                      180, 240, "mono")
    with pytest.raises(ValueError, match="unknown EventPacket encoding"):
        transport.encode_event_packet(events, 180, 240, "libcaer")


# ----------------------------------------------------------------------------------------
# Cross-checks against rosbags' serializers (an independent implementation)


def rosbags_event_array(store, events: Events, height, width, frame_id, stamp_ns, ros1=False):
    types = store.types
    Time = types["builtin_interfaces/msg/Time"]
    Event = types["dvs_msgs/msg/Event"]
    header_fields = dict(stamp=Time(sec=stamp_ns // SECOND, nanosec=stamp_ns % SECOND), frame_id=frame_id)
    if ros1:
        header_fields["seq"] = 0
    return types["dvs_msgs/msg/EventArray"](
        header=types["std_msgs/msg/Header"](**header_fields), height=height, width=width,
        events=[Event(x=int(x), y=int(y), ts=Time(sec=int(t) // SECOND, nanosec=int(t) % SECOND),
                      polarity=bool(p > 0))
                for x, y, t, p in zip(events.x, events.y, events.t, events.p)])


@pytest.mark.parametrize("name", EDGE_CASES)
def test_event_array_cdr_bytes_equal_rosbags_serializer(name):
    events = EDGE_CASES[name]
    height, width = sensor_size(events)
    store = typestore_with_event_types(2)
    message = rosbags_event_array(store, events, height, width, "frame7", 12 * SECOND + 3)
    expected = bytes(store.serialize_cdr(message, "dvs_msgs/msg/EventArray"))
    assert transport.encode_event_array(events, height, width, "frame7", 12 * SECOND + 3) == expected
    big_endian = bytes(store.serialize_cdr(message, "dvs_msgs/msg/EventArray", little_endian=False))
    decoded, info = transport.decode_event_array(big_endian)
    assert decoded.equals(events)
    assert (info.stamp_ns, info.frame_id) == (12 * SECOND + 3, "frame7")


@pytest.mark.parametrize("name", EDGE_CASES)
def test_event_array_ros1_bytes_equal_rosbags_serializer(name):
    events = EDGE_CASES[name]
    height, width = sensor_size(events)
    store = typestore_with_event_types(1)
    message = rosbags_event_array(store, events, height, width, "dvs", 5 * SECOND, ros1=True)
    expected = bytes(store.serialize_ros1(message, "dvs_msgs/msg/EventArray"))
    assert transport.encode_event_array_ros1(events, height, width, "dvs", 5 * SECOND) == expected


@pytest.mark.parametrize("encoding", ["mono", "evt3"])
def test_event_packet_bytes_equal_rosbags_serializer(encoding):
    events = random_events(300, seed=4, microseconds=True)
    buffer = transport.encode_event_packet(events, 180, 240, encoding, "ec", stamp_ns=SECOND, seq=9,
                                           evt3_time_offset_ns=int(events.t[0]))
    store = typestore_with_event_types(2)
    message = store.deserialize_cdr(buffer, "event_camera_msgs/msg/EventPacket")
    assert (message.encoding, message.seq, message.width, message.height) == (encoding, 9, 240, 180)
    assert bytes(store.serialize_cdr(message, "event_camera_msgs/msg/EventPacket")) == buffer
    # big-endian CDR of the same message decodes to the same events
    big_endian = bytes(store.serialize_cdr(message, "event_camera_msgs/msg/EventPacket", little_endian=False))
    decoded, _ = transport.decode_event_packet(big_endian, transport.Evt3Decoder(int(events.t[0])))
    assert decoded.equals(events)


# ----------------------------------------------------------------------------------------
# Cross-checks against rclpy (the generated dvs_msgs types), when built


def test_event_array_matches_rclpy_both_directions():
    pytest.importorskip("rclpy")
    dvs_msgs = pytest.importorskip("dvs_msgs.msg", reason="interface packages not built")
    from rclpy.serialization import deserialize_message, serialize_message

    events = random_events(257, seed=5)
    buffer = transport.encode_event_array(events, 180, 240, "davis", stamp_ns=4 * SECOND + 17)
    message = deserialize_message(buffer, dvs_msgs.EventArray)
    assert (message.header.stamp.sec, message.header.stamp.nanosec, message.header.frame_id) == (4, 17, "davis")
    assert (message.height, message.width, len(message.events)) == (180, 240, 257)
    for index in (0, 1, 2, 128, 256):
        event = message.events[index]
        assert (event.x, event.y, event.ts.sec * SECOND + event.ts.nanosec, event.polarity) == (
            events.x[index], events.y[index], events.t[index], bool(events.p[index] > 0))
    decoded, info = transport.decode_event_array(serialize_message(message))
    assert decoded.equals(events)
    assert info == transport.EventArrayInfo(4 * SECOND + 17, "davis", 180, 240)


# ----------------------------------------------------------------------------------------
# mono and EVT3 words built by hand from the format documentation


def packet_with_payload(encoding: str, payload: bytes, time_base: int = 0, is_bigendian: bool = False) -> bytes:
    store = typestore_with_event_types(2)
    types = store.types
    message = types["event_camera_msgs/msg/EventPacket"](
        header=types["std_msgs/msg/Header"](stamp=types["builtin_interfaces/msg/Time"](sec=1, nanosec=0),
                                            frame_id=""),
        height=180, width=240, seq=0, time_base=time_base, encoding=encoding, is_bigendian=is_bigendian,
        events=np.frombuffer(payload, np.uint8))
    return bytes(store.serialize_cdr(message, "event_camera_msgs/msg/EventPacket"))


@pytest.mark.parametrize("is_bigendian", [False, True])
def test_mono_words_follow_the_documented_bit_layout(is_bigendian):
    # bit 63 polarity, 48-62 y, 32-47 x, 0-31 dt (event_camera_msgs README)
    words = np.array([(1 << 63) | (5 << 48) | (7 << 32) | 100, (0 << 63) | (179 << 48) | (239 << 32) | 0xFFFFFFFF],
                     np.uint64)
    payload = words.astype(">u8" if is_bigendian else "<u8").tobytes()
    events, info = transport.decode_event_packet(packet_with_payload("mono", payload, 10 * SECOND, is_bigendian))
    assert events.x.tolist() == [7, 239] and events.y.tolist() == [5, 179]
    assert events.t.tolist() == [10 * SECOND + 100, 10 * SECOND + 0xFFFFFFFF]
    assert events.p.tolist() == [1, -1]
    assert info.time_base == 10 * SECOND


def test_evt3_words_decode_per_the_format():
    words = [0x8001,          # TIME_HIGH 1  -> 4096 us
             0x6002,          # TIME_LOW 2   -> 4098 us
             0x0003,          # ADDR_Y 3
             0x2804,          # ADDR_X x=4, polarity 1
             0x3010,          # VECT_BASE_X x=16, polarity 0
             0x4005,          # VECT_12: bits 0 and 2 -> x 16, 18; base -> 28
             0x5081,          # VECT_8: bits 0 and 7 -> x 28, 35; base -> 36
             0xE000, 0x9000,  # OTHERS, padding: no events
             0x8FFF, 0x6000,  # time 0xFFF000 us
             0x8000, 0x6001,  # TIME_HIGH back to 0: rollover -> 2^24 + 1 us
             0x2005]          # ADDR_X x=5, polarity 0
    payload = np.array(words, "<u2").tobytes()
    events, _ = transport.decode_event_packet(packet_with_payload("evt3", payload))
    assert events.x.tolist() == [4, 16, 18, 28, 35, 5]
    assert events.y.tolist() == [3] * 6
    assert events.p.tolist() == [1, -1, -1, -1, -1, -1]
    assert events.t.tolist() == [4098_000] * 5 + [((1 << 24) + 1) * 1000]


def test_evt3_events_before_the_first_valid_time_are_dropped():
    payload = np.array([0x0003, 0x2804, 0x8001, 0x6002, 0x2805], "<u2").tobytes()
    events, _ = transport.decode_event_packet(packet_with_payload("evt3", payload))
    assert events.x.tolist() == [5]


# ----------------------------------------------------------------------------------------
# Malformed and truncated input


def encoded_messages():
    events = random_events(5, seed=2, microseconds=True)
    origin = int(events.t[0])
    return {
        "EventArray CDR": (transport.encode_event_array(events, 180, 240, "cam"), transport.decode_event_array),
        "EventArray ROS 1": (transport.encode_event_array_ros1(events, 180, 240, "cam"),
                             transport.decode_event_array_ros1),
        "EventPacket mono": (transport.encode_event_packet(events, 180, 240, "mono", "cam"),
                             transport.decode_event_packet),
        "EventPacket evt3": (transport.encode_event_packet(events, 180, 240, "evt3", "cam",
                                                           evt3_time_offset_ns=origin),
                             transport.decode_event_packet),
    }


@pytest.mark.parametrize("kind", list(encoded_messages()))
def test_every_truncation_raises_event_decode_error(kind):
    buffer, decode = encoded_messages()[kind]
    decode(buffer)  # the whole message decodes
    for length in range(len(buffer)):
        with pytest.raises(EventDecodeError, match="byte offset|shorter than"):
            decode(buffer[:length])


@pytest.mark.parametrize("kind", list(encoded_messages()))
def test_random_corruption_raises_only_event_decode_error(kind):
    buffer, decode = encoded_messages()[kind]
    rng = np.random.default_rng(11)
    for _ in range(400):
        corrupted = bytearray(buffer)
        for position in rng.integers(0, len(buffer), rng.integers(1, 4)):
            corrupted[position] = rng.integers(0, 256)
        try:
            events, info = decode(bytes(corrupted))
        except EventDecodeError:
            continue
        # accepted: then every event is a valid event of the declared sensor
        assert np.all(events.x < info.width) and np.all(events.y < info.height)
        assert set(np.unique(events.p)) <= {-1, 1}


def cdr_event_array_fields(events=None, height=180, width=240):
    events = random_events(3, seed=3) if events is None else events
    return bytearray(transport.encode_event_array(events, height, width, "ab"))


def test_specific_malformed_event_arrays_name_the_problem():
    # layout: encapsulation 0-3, stamp 4-11, frame_id length 12-15, "ab\0" 16-18, pad 19,
    # height 20-23, width 24-27, count 28-31, first event 32-44
    good = cdr_event_array_fields()
    cases = []
    bad = bytearray(good); bad[0:2] = b"\x00\x07"; cases.append((bad, "encapsulation id 0007 at byte offset 0"))
    bad = bytearray(good); bad[28:32] = (0xFFFFFFFF).to_bytes(4, "little"); cases.append((bad, "events declares 4294967295"))
    bad = bytearray(good); bad[12:16] = (1000).to_bytes(4, "little"); cases.append((bad, "frame_id declares 1000"))
    bad = bytearray(good); bad[20:24] = bytes(4); cases.append((bad, "zero side"))
    bad = bytearray(good); bad[24:28] = bytes(4); cases.append((bad, "zero side"))
    bad = bytearray(good); bad[32 + 12] = 2; cases.append((bad, "polarity=2"))
    bad = bytearray(good); bad[32:34] = (240).to_bytes(2, "little"); cases.append((bad, "x=240"))
    bad = bytearray(good); bad[32 + 8:32 + 12] = (SECOND).to_bytes(4, "little"); cases.append((bad, "nanosec=1000000000"))
    bad = bytearray(good) + b"\x00" * 8; cases.append((bad, "unexpected bytes"))
    for buffer, message in cases:
        with pytest.raises(EventDecodeError, match=message):
            transport.decode_event_array(bytes(buffer))


def test_unknown_packet_encoding_and_bad_payloads_raise():
    with pytest.raises(EventDecodeError, match="unknown EventPacket encoding 'libcaer'"):
        transport.decode_event_packet(packet_with_payload("libcaer", b"\x00" * 8))
    with pytest.raises(EventDecodeError, match="not a whole number of 8-byte words"):
        transport.decode_event_packet(packet_with_payload("mono", b"\x00" * 12))
    with pytest.raises(EventDecodeError, match="not a whole number of 16-bit words"):
        transport.decode_event_packet(packet_with_payload("evt3", b"\x00" * 3))
    with pytest.raises(EventDecodeError, match="unknown EVT3 word type 0x1"):
        transport.decode_event_packet(packet_with_payload("evt3", np.array([0x8000, 0x6000, 0x1000], "<u2").tobytes()))
    with pytest.raises(EventDecodeError, match="outside the sensor"):
        transport.decode_event_packet(packet_with_payload(
            "evt3", np.array([0x8000, 0x6000, 0x0000, 0x2000 | 240], "<u2").tobytes()))
    with pytest.raises(EventDecodeError, match="outside sensor"):
        transport.decode_event_packet(packet_with_payload("mono", np.array([300 << 32], "<u8").tobytes()))
