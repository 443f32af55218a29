"""Event message codecs: round trips, byte-exact cross-checks against rosbags' serializer
and rclpy, hand-built mono / EVT3 / libcaer / libcaer_cmp words per their documentation,
the ROS-time convention, and malformed input."""

from __future__ import annotations

import dataclasses
import functools

import numpy as np
import pytest

from focus_ros import codecs
from focus_ros.events import Events
from focus_ros.sources.bags import typestore_with_event_types
from focus_ros.codecs import EventDecodeError, libcaer_cmp
from focus_ros.codecs.event_packet import _packet_header_checked, _packet_header_fast

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
    buffer = codecs.encode_event_array(events, height, width, "davis", stamp_ns=7 * SECOND + 5)
    decoded, info = codecs.decode_event_array(buffer)
    assert decoded.equals(events)
    assert info == codecs.EventArrayInfo(7 * SECOND + 5, "davis", height, width)
    assert len(buffer) == 4 + 8 + 4 + len("davis") + 1 + 2 + 12 + codecs.cdr_event_sequence_bytes(len(events))


@pytest.mark.parametrize("name", EDGE_CASES)
def test_event_array_ros1_round_trip(name):
    events = EDGE_CASES[name]
    height, width = sensor_size(events)
    buffer = codecs.encode_event_array_ros1(events, height, width, "dvs", stamp_ns=3 * SECOND)
    decoded, info = codecs.decode_event_array_ros1(buffer)
    assert decoded.equals(events)
    assert info == codecs.EventArrayInfo(3 * SECOND, "dvs", height, width)
    assert len(buffer) == 4 + 8 + 4 + 3 + 12 + 13 * len(events)


ENCODINGS = ["mono", "evt3", "libcaer", "libcaer_cmp"]


@pytest.mark.parametrize("ros1", [False, True], ids=["CDR", "ROS 1"])
@pytest.mark.parametrize("encoding", ENCODINGS)
@pytest.mark.parametrize("name", ["empty", "one", "two", "many", "second boundaries"])
def test_event_packet_round_trip(encoding, name, ros1):
    events = EDGE_CASES[name]
    if encoding != "mono":  # microsecond clocks
        events = Events(events.x, events.y, events.t // 1000 * 1000, events.p)
    origin = int(events.t[0]) if len(events) else 0
    buffer = codecs.encode_event_packet(events, 180, 240, encoding, "cam", seq=42,
                                        sensor_time_offset_ns=origin, ros1=ros1)
    decoded, info = codecs.decode_event_packet(buffer, codecs.Evt3Decoder(origin), ros1=ros1)
    assert decoded.equals(events)
    assert (info.encoding, info.seq, info.height, info.width, info.frame_id) == (encoding, 42, 180, 240, "cam")


def clustered_events(count: int, seed: int, start_ns: int = 7 * SECOND, width: int = 346,
                     height: int = 260, span_us: int = 3_000_000) -> Events:
    """Events as a DAVIS emits them: bursts sharing a microsecond and a column, rows close
    together (so libcaer_cmp packs them into VECT_8 words), plus scattered ones."""
    rng = np.random.default_rng(seed)
    t_us = np.sort(rng.integers(0, span_us, count // 4)).repeat(4)[:count]
    x = rng.integers(0, width, count // 4).repeat(4)[:count]
    y = np.minimum(rng.integers(0, height - 8, count // 4).repeat(4)[:count]
                   + np.tile([0, 1, 3, 7], count // 4 + 1)[:count], height - 1)
    p = rng.integers(0, 2, count // 4).repeat(4)[:count]
    scattered = rng.random(count) < 0.2  # break some bursts
    x[scattered] = rng.integers(0, width, scattered.sum())
    p[scattered] = rng.integers(0, 2, scattered.sum())
    return Events.from_arrays(x, y, start_ns + t_us * 1000, p)


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_packets_split_anywhere_decode_to_the_same_stream(encoding):
    """A stream cut into packets at random places (one event to thousands), each encoded as
    its driver would (header stamp = the packet's first event, in ROS time), decodes with
    one stream decoder to exactly the events put in, in ROS time."""
    events = clustered_events(20_000, seed=8, start_ns=1_700_000_000 * SECOND + 123_456_000)
    origin = int(events.t[0]) - 5 * SECOND  # the camera started 5 s before the first event
    rng = np.random.default_rng(9)
    cuts = np.unique(np.r_[0, np.sort(rng.integers(0, len(events), 40)), 1, 2, len(events)])
    stream = codecs.EventMessageDecoder("event_camera_msgs/msg/EventPacket")
    decoded = []
    for begin, end in zip(cuts[:-1], cuts[1:]):
        buffer = codecs.encode_event_packet(events[begin:end], 260, 346, encoding,
                                            sensor_time_offset_ns=origin)
        decoded.append(stream(buffer)[0])
    assert Events.concatenate(decoded).equals(events)


def test_libcaer_cmp_packs_rows_into_vectors():
    events = clustered_events(4000, seed=3)
    buffer = codecs.encode_event_packet(events, 260, 346, "libcaer_cmp")
    store = typestore_with_event_types(2)
    payload = store.deserialize_cdr(buffer, "event_camera_msgs/msg/EventPacket").events
    words = np.frombuffer(payload.tobytes(), "<u2")
    assert np.count_nonzero(words >> 12 == codecs.CMP_VECT_8) > 300
    # less than half the size of libcaer's 8 bytes per event
    assert len(payload) < 4 * len(events)
    assert codecs.decode_event_packet(buffer)[0].equals(events)


@pytest.mark.parametrize("packets", [1, 3])
def test_libcaer_round_trip_across_the_31_bit_microsecond_rollover(packets):
    # the camera clock passes 2^31 us (35.8 min) in the middle; the driver folds the bits
    # above into time_base, the decoder adds 2^31 us where the 31-bit stamp decreases
    host_start = 1_700_000_000 * SECOND
    clock_us = (1 << 31) - 500 + np.arange(0, 3000, 3)
    events = Events.from_arrays(np.arange(1000) % 346, np.arange(1000) % 260,
                                host_start + clock_us * 1000, np.arange(1000) % 2)
    stream = codecs.PacketStreamState()
    parts = np.array_split(np.arange(len(events)), packets)
    decoded = []
    for part in parts:
        buffer = codecs.encode_event_packet(events[part], 260, 346, "libcaer",
                                            sensor_time_offset_ns=host_start)
        decoded.append(codecs.decode_event_packet(buffer, stream)[0])
    assert Events.concatenate(decoded).equals(events)
    if packets == 1:  # the rollover sits inside the packet: stamps go 2^31 - 500 .. 2499
        stamps = np.frombuffer(buffer[-8 * len(events):], "<u4")[1::2]
        assert stamps.max() < (1 << 31) and np.count_nonzero(np.diff(stamps.astype(np.int64)) < 0) == 1


def test_evt3_round_trip_across_the_24_bit_microsecond_rollover():
    # 40 s of events from t = 0: the 24-bit us clock (16.8 s) wraps twice
    events = Events.from_arrays(np.arange(200) % 240, np.arange(200) % 180,
                                np.linspace(0, 40 * SECOND, 200).astype(np.int64) // 1000 * 1000,
                                np.arange(200) % 2)
    decoder = codecs.Evt3Decoder()
    decoded = Events.concatenate(
        codecs.decode_event_packet(codecs.encode_event_packet(part, 180, 240, "evt3"), decoder)[0]
        for part in (events[:70], events[70:150], events[150:]))
    assert decoded.equals(events)


def test_encoders_refuse_events_they_cannot_represent():
    events = random_events(10)
    with pytest.raises(ValueError, match="outside the sensor"):
        codecs.encode_event_array(events, 100, 100)
    with pytest.raises(ValueError, match="whole microseconds"):
        codecs.encode_event_packet(Events.from_arrays([1], [1], [1001], [1]), 180, 240, "evt3")
    with pytest.raises(ValueError, match="2\\^32"):
        codecs.encode_event_packet(Events.from_arrays([1, 1], [1, 1], [0, 5 * SECOND], [1, 1]),
                                   180, 240, "mono")
    with pytest.raises(ValueError, match="unknown EventPacket encoding"):
        codecs.encode_event_packet(events, 180, 240, "evt4")
    with pytest.raises(ValueError, match="whole microseconds"):
        codecs.encode_event_packet(Events.from_arrays([1], [1], [1001], [1]), 180, 240, "libcaer")
    with pytest.raises(ValueError, match="time order"):
        codecs.encode_event_packet(Events.from_arrays([1, 1], [1, 1], [2000, 1000], [1, 1]), 180, 240,
                                   "libcaer")
    with pytest.raises(ValueError, match="2\\^24 us"):
        codecs.encode_event_packet(Events.from_arrays([1, 1], [1, 1], [0, 17 * SECOND], [1, 1]),
                                   180, 240, "libcaer_cmp")


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
    assert codecs.encode_event_array(events, height, width, "frame7", 12 * SECOND + 3) == expected
    big_endian = bytes(store.serialize_cdr(message, "dvs_msgs/msg/EventArray", little_endian=False))
    decoded, info = codecs.decode_event_array(big_endian)
    assert decoded.equals(events)
    assert (info.stamp_ns, info.frame_id) == (12 * SECOND + 3, "frame7")


@pytest.mark.parametrize("name", EDGE_CASES)
def test_event_array_ros1_bytes_equal_rosbags_serializer(name):
    events = EDGE_CASES[name]
    height, width = sensor_size(events)
    store = typestore_with_event_types(1)
    message = rosbags_event_array(store, events, height, width, "dvs", 5 * SECOND, ros1=True)
    expected = bytes(store.serialize_ros1(message, "dvs_msgs/msg/EventArray"))
    assert codecs.encode_event_array_ros1(events, height, width, "dvs", 5 * SECOND) == expected


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_event_packet_bytes_equal_rosbags_serializer(encoding):
    events = random_events(300, seed=4, microseconds=True)
    buffer = codecs.encode_event_packet(events, 180, 240, encoding, "ec", stamp_ns=SECOND, seq=9,
                                        sensor_time_offset_ns=int(events.t[0]))
    store = typestore_with_event_types(2)
    message = store.deserialize_cdr(buffer, "event_camera_msgs/msg/EventPacket")
    assert (message.encoding, message.seq, message.width, message.height) == (encoding, 9, 240, 180)
    assert bytes(store.serialize_cdr(message, "event_camera_msgs/msg/EventPacket")) == buffer
    # big-endian CDR of the same message decodes to the same events
    big_endian = bytes(store.serialize_cdr(message, "event_camera_msgs/msg/EventPacket", little_endian=False))
    decoded, _ = codecs.decode_event_packet(big_endian, codecs.Evt3Decoder(int(events.t[0])))
    assert decoded.equals(events)
    # ROS 1: the same message through rosbags' ROS 1 serializer
    ros1_store = typestore_with_event_types(1)
    types = ros1_store.types
    ros1_message = types["event_camera_msgs/msg/EventPacket"](
        header=types["std_msgs/msg/Header"](seq=0, stamp=types["builtin_interfaces/msg/Time"](sec=1, nanosec=0),
                                            frame_id="ec"),
        height=180, width=240, seq=9, time_base=message.time_base, encoding=encoding, is_bigendian=False,
        events=message.events)
    ros1_buffer = bytes(ros1_store.serialize_ros1(ros1_message, "event_camera_msgs/msg/EventPacket"))
    assert codecs.encode_event_packet(events, 180, 240, encoding, "ec", stamp_ns=SECOND, seq=9,
                                      sensor_time_offset_ns=int(events.t[0]), ros1=True) == ros1_buffer
    assert codecs.event_packet_ros1_to_cdr(ros1_buffer) == buffer


# ----------------------------------------------------------------------------------------
# Cross-checks against rclpy (the generated dvs_msgs types), when built


def test_event_array_matches_rclpy_both_directions():
    pytest.importorskip("rclpy")
    dvs_msgs = pytest.importorskip("dvs_msgs.msg", reason="interface packages not built")
    from rclpy.serialization import deserialize_message, serialize_message

    events = random_events(257, seed=5)
    buffer = codecs.encode_event_array(events, 180, 240, "davis", stamp_ns=4 * SECOND + 17)
    message = deserialize_message(buffer, dvs_msgs.EventArray)
    assert (message.header.stamp.sec, message.header.stamp.nanosec, message.header.frame_id) == (4, 17, "davis")
    assert (message.height, message.width, len(message.events)) == (180, 240, 257)
    for index in (0, 1, 2, 128, 256):
        event = message.events[index]
        assert (event.x, event.y, event.ts.sec * SECOND + event.ts.nanosec, event.polarity) == (
            events.x[index], events.y[index], events.t[index], bool(events.p[index] > 0))
    decoded, info = codecs.decode_event_array(serialize_message(message))
    assert decoded.equals(events)
    assert info == codecs.EventArrayInfo(4 * SECOND + 17, "davis", 180, 240)


# ----------------------------------------------------------------------------------------
# mono and EVT3 words built by hand from the format documentation


@functools.lru_cache(maxsize=None)
def ros2_store():
    return typestore_with_event_types(2)


def packet_with_payload(encoding: str, payload: bytes, time_base: int = 0, is_bigendian: bool = False) -> bytes:
    store = ros2_store()
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
    events, info = codecs.decode_event_packet(packet_with_payload("mono", payload, 10 * SECOND, is_bigendian))
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
    events, _ = codecs.decode_event_packet(packet_with_payload("evt3", payload))
    assert events.x.tolist() == [4, 16, 18, 28, 35, 5]
    assert events.y.tolist() == [3] * 6
    assert events.p.tolist() == [1, -1, -1, -1, -1, -1]
    assert events.t.tolist() == [4098_000] * 5 + [((1 << 24) + 1) * 1000]


def test_libcaer_words_decode_per_the_format():
    # uint32 data (bit 0 valid, 1 polarity, 2-16 y, 17-31 x), int32 timestamp (us)
    data = [(7 << 17) | (5 << 2) | (1 << 1) | 1, (239 << 17) | (179 << 2) | 1, (0 << 17) | (0 << 2) | 3]
    stamps = [(1 << 31) - 2, (1 << 31) - 1, 4]  # the 31-bit clock rolls over before the third
    payload = np.array([value for pair in zip(data, stamps) for value in pair], "<u4").tobytes()
    events, info = codecs.decode_event_packet(packet_with_payload("libcaer", payload, 10 * SECOND))
    assert events.x.tolist() == [7, 239, 0] and events.y.tolist() == [5, 179, 0]
    assert events.p.tolist() == [1, -1, 1]
    assert events.t.tolist() == [10 * SECOND + ((1 << 31) - 2) * 1000, 10 * SECOND + ((1 << 31) - 1) * 1000,
                                 10 * SECOND + ((1 << 31) + 4) * 1000]


def test_libcaer_cmp_words_decode_per_the_format():
    words = [0x2005,          # ADDR_X column 5
             0x3803,          # ADDR_Y y=3, polarity 1 at time 0
             0x0001,          # TIME_HIGH 1 -> 4096 us
             0x1002,          # TIME_LOW 2  -> 4098 us
             0x4008,          # VECT_BASE_Y row 8, polarity 0
             0x5085,          # VECT_8 bits 0, 2, 7 -> rows 8, 10, 15; base -> 16
             0x5001,          # VECT_8 bit 0 -> row 16
             0x200A,          # ADDR_X column 10
             0x3000]          # ADDR_Y y=0, polarity 0
    payload = np.array(words, "<u2").tobytes()
    stream = codecs.PacketStreamState()
    events, _ = codecs.decode_event_packet(packet_with_payload("libcaer_cmp", payload, 3 * SECOND), stream)
    assert events.x.tolist() == [5, 5, 5, 5, 5, 10]
    assert events.y.tolist() == [3, 8, 10, 15, 16, 0]
    assert events.p.tolist() == [1, -1, -1, -1, -1, -1]
    assert events.t.tolist() == [3 * SECOND] + [3 * SECOND + 4098_000] * 5
    # the next packet starts its time at its own time_base; the column carries over
    events, _ = codecs.decode_event_packet(
        packet_with_payload("libcaer_cmp", np.array([0x1001, 0x3802], "<u2").tobytes(), 4 * SECOND), stream)
    assert (events.x.tolist(), events.y.tolist(), events.t.tolist()) == ([10], [2], [4 * SECOND + 1000])


def test_evt3_trigger_words_decode_per_the_format():
    words = [0x8001, 0x6002,  # time 4098 us
             0xA001,          # EXT_TRIGGER rising edge, id 0
             0x6003,          # time 4099 us
             0xA500]          # EXT_TRIGGER falling edge, id 5
    events, info = codecs.decode_event_packet(packet_with_payload("evt3", np.array(words, "<u2").tobytes()))
    assert len(events) == 0
    assert info.triggers.t.tolist() == [4098_000, 4099_000]
    assert info.triggers.edge.tolist() == [1, 0] and info.triggers.id.tolist() == [0, 5]


def test_evt3_events_before_the_first_valid_time_are_dropped():
    payload = np.array([0x0003, 0x2804, 0x8001, 0x6002, 0x2805], "<u2").tobytes()
    events, info = codecs.decode_event_packet(packet_with_payload("evt3", payload))
    assert events.x.tolist() == [5] and info.outside_events == 0
    # and not counted as outside the 240x180 sensor (x 238-249 before the time are not) when the packet
    # has such events too: x 300, and x 240, 241 of a vector from x 236
    words = [0x0003, 0x2804, 0x3000 | 238, 0x4FFF, 0x8001, 0x6002, 0x2805,
             0x2000 | 300, 0x3000 | 236, 0x5031, 0x2807]
    events, info = codecs.decode_event_packet(packet_with_payload("evt3", np.array(words, "<u2").tobytes()))
    assert events.x.tolist() == [5, 236, 7] and info.outside_events == 3


# ----------------------------------------------------------------------------------------
# Vector words, packets cut anywhere, rollovers: the one-pass decoders of the fast cameras


def row_runs(count: int, width: int, height: int, seed: int, start_us: int = 5_000_000) -> Events:
    """Events as a Prophesee IMX636 reads them out under motion: at each microsecond, one run
    of 2-40 neighbouring pixels (increasing x, one polarity) or a lone event on each of a few
    rows, rows in increasing order; times on the camera's clock (whole microseconds)."""
    rng = np.random.default_rng(seed)
    x, y, t, p = [], [], [], []
    now_us = start_us
    while len(x) < count:
        for row in np.sort(rng.choice(height, 4, replace=False)):
            length = 1 if rng.random() < 0.3 else int(rng.integers(2, 41))
            first = int(rng.integers(0, width - length + 1))
            polarity = int(rng.integers(0, 2))
            for column in range(first, first + length):
                x.append(column)
                y.append(row)
                t.append(now_us * 1000)
                p.append(polarity)
        now_us += int(rng.integers(1, 4))
    return Events.from_arrays(x, y, t, p)


def evt3_decode(payload: bytes, decoder: codecs.Evt3Decoder, width: int = 1280, height: int = 720) -> Events:
    return decoder.decode(np.frombuffer(payload, np.uint8), width=width, height=height)


def test_evt3_vector_words_decode_per_the_format_up_to_the_last_column():
    words = [0x8000, 0x6005,  # time 5 us
             0x0002,          # ADDR_Y 2
             0x3CF0,          # VECT_BASE_X x=1264, polarity 1
             0x4801,          # VECT_12 bits 0, 11 -> x 1264, 1275; base -> 1276
             0x5008,          # VECT_8 bit 3 -> x 1279, the last column (bits 4-7, x 1280-1283, clear)
             0x3005,          # VECT_BASE_X x=5, polarity 0
             0x4000,          # VECT_12 no bits; base -> 17
             0x50FF]          # VECT_8 all bits -> x 17..24
    events = evt3_decode(np.array(words, "<u2").tobytes(), codecs.Evt3Decoder())
    assert events.x.tolist() == [1264, 1275, 1279] + list(range(17, 25))
    assert events.y.tolist() == [2] * 11
    assert events.p.tolist() == [1, 1, 1] + [-1] * 8
    assert events.t.tolist() == [5000] * 11
    # a set bit past the last column drops that event alone, counted: VECT_8 bits 0, 4 -> x 1276, (1280)
    payload = np.frombuffer(np.array(words[:5] + [0x5011], "<u2").tobytes(), np.uint8)
    events, _, outside = codecs.Evt3Decoder().decode_packet(payload, width=1280, height=720)
    assert (events.x.tolist(), outside) == ([1264, 1275, 1276], 1)
    # so does a vector on a row below the sensor (row 720: 2 events), the ADDR_X on row 1 after it kept
    payload = np.frombuffer(np.array([0x8000, 0x6005, 0x02D0, 0x3000, 0x4003, 0x0001, 0x2805], "<u2").tobytes(),
                            np.uint8)
    events, _, outside = codecs.Evt3Decoder().decode_packet(payload, width=1280, height=720)
    assert (events.x.tolist(), events.y.tolist(), outside) == ([5], [1], 2)


def test_evt3_vectors_before_the_first_valid_time_are_dropped_but_move_the_base():
    words = [0x0003, 0x3800,  # row 3, base x=0, polarity 1, no time yet
             0x4FFF,          # 12 events, dropped; base -> 12
             0x8001, 0x6002,  # time 4098 us
             0x5003]          # VECT_8 bits 0, 1 -> x 12, 13
    events = evt3_decode(np.array(words, "<u2").tobytes(), codecs.Evt3Decoder())
    assert (events.x.tolist(), events.y.tolist(), events.t.tolist()) == ([12, 13], [3, 3], [4098_000] * 2)


def test_evt3_encoder_writes_runs_as_32_pixel_vectors():
    events = Events.from_arrays([33, 34, 40, 63, 100, 101, 7], [3, 3, 3, 3, 3, 3, 4],
                                [5000, 5000, 5000, 5000, 5000, 5000, 6000], [1, 1, 1, 1, 0, 0, 1])
    words = codecs.encode_evt3_words(events)
    assert [f"{word:04x}" for word in words] == [
        "8000", "6005", "0003",  # TIME_HIGH 0, TIME_LOW 5 us, ADDR_Y 3
        "3820",                  # VECT_BASE_X x=32 (the group of x 32-63), polarity 1
        "4106",                  # VECT_12 bits 1, 2, 8 -> x 33, 34, 40
        "4000",                  # VECT_12 x 44-55: none
        "5080",                  # VECT_8 bit 7 -> x 63
        "2064", "2065",          # two events of the next group (x 96-127), polarity 0: ADDR_X each
        "6006", "0004", "2807"]  # 6 us, row 4, x=7 polarity 1
    assert codecs.encode_evt3_words(events, vectors=False).tolist() == [
        0x8000, 0x6005, 0x0003, 0x2821, 0x2822, 0x2828, 0x283F, 0x2064, 0x2065, 0x6006, 0x0004, 0x2807]


def test_evt3_stream_cut_at_any_word_decodes_to_the_events_put_in():
    """metavision_driver forwards the camera's buffers as they come: a packet may end
    inside a vector (after VECT_BASE_X, between its VECT_12 words) or between TIME_HIGH
    and TIME_LOW; one decoder carries the state over."""
    events = row_runs(300, 1280, 720, seed=1)
    words = codecs.encode_evt3_words(events)
    kinds = words >> 12
    assert np.count_nonzero(kinds == codecs.EVT3_VECT_12) > 20 and np.count_nonzero(kinds == codecs.EVT3_ADDR_X) > 5
    payload = words.tobytes()
    for cut in range(len(words) + 1):
        decoder = codecs.Evt3Decoder()
        parts = [evt3_decode(payload[:2 * cut], decoder), evt3_decode(payload[2 * cut:], decoder)]
        assert Events.concatenate(parts).equals(events), f"cut at word {cut}"


def test_evt3_vector_stream_across_the_24_bit_rollover_cut_anywhere():
    events = row_runs(3000, 1280, 720, seed=2, start_us=(1 << 24) - 40)
    assert events.t[0] < (1 << 24) * 1000 < events.t[-1]
    payload = codecs.encode_evt3_words(events).tobytes()
    cuts = 2 * np.unique(np.random.default_rng(3).integers(0, len(payload) // 2, 12))
    decoder = codecs.Evt3Decoder()
    parts = [evt3_decode(payload[begin:end], decoder) for begin, end in zip(np.r_[0, cuts], np.r_[cuts, len(payload)])]
    assert Events.concatenate(parts).equals(events)


@pytest.mark.parametrize("encoding", ["evt3", "libcaer_cmp"])
def test_dense_packets_decode_every_event(encoding):
    """Every pixel of whole rows (evt3: full VECT_12 / VECT_8 masks up to the last column)
    or whole columns (libcaer_cmp: full VECT_8 masks down to the last row) at once, as a
    flickering light gives them: the output is sized exactly, nothing lost or added."""
    width, height = (1280, 720) if encoding == "evt3" else (640, 480)
    if encoding == "evt3":
        y, x = np.divmod(np.arange(4 * width), width)
    else:
        x, y = np.divmod(np.arange(4 * height), height)
    events = Events.from_arrays(x, y, np.full(len(x), 7_000_000), np.arange(len(x)) // 3 % 2)
    events = Events.concatenate([events, Events(events.x, events.y, events.t + 1000, events.p)])
    buffer = codecs.encode_event_packet(events, height, width, encoding, sensor_time_offset_ns=0)
    decoded, _ = codecs.decode_event_packet(buffer)
    assert decoded.equals(events)


def test_libcaer_cmp_time_high_alone_keeps_the_time_low():
    """libcaer_driver writes TIME_HIGH and TIME_LOW only when they change: a TIME_HIGH
    without a TIME_LOW keeps the low bits."""
    words = [0x2005, 0x1007, 0x3001,  # column 5; 7 us; row 1
             0x0002, 0x3002,          # TIME_HIGH 2 -> 2 x 4096 + 7 us; row 2
             0x1009, 0x3803]          # 2 x 4096 + 9 us; row 3, polarity 1
    events, _ = codecs.decode_event_packet(packet_with_payload("libcaer_cmp", np.array(words, "<u2").tobytes(),
                                                               SECOND))
    assert events.t.tolist() == [SECOND + 7000, SECOND + 8199_000, SECOND + 8201_000]
    assert (events.x.tolist(), events.y.tolist(), events.p.tolist()) == ([5, 5, 5], [1, 2, 3], [-1, -1, 1])


def test_libcaer_cmp_vectors_down_to_the_last_row():
    words = [0x2000 | 639,   # column 639, the last
             0x4800 | 472,   # VECT_BASE_Y row 472, polarity 1
             0x5081,         # rows 472, 479 (the last); base -> 480
             0x4000 | 476,   # VECT_BASE_Y row 476, polarity 0
             0x500F]         # rows 476-479 (bits 4-7, rows 480-483, clear)
    events, _, outside = libcaer_cmp.decode_packet(np.frombuffer(np.array(words, "<u2").tobytes(), np.uint8), 0,
                                                   False, 0, 640, 480, libcaer_cmp.new_stream_state())
    assert outside == 0
    assert events.y.tolist() == [472, 479, 476, 477, 478, 479]
    assert events.x.tolist() == [639] * 6 and events.p.tolist() == [1, 1, -1, -1, -1, -1]
    # a set bit past the last row drops that event alone, counted: VECT_8 bits 0, 4 -> rows 476, (480)
    events, _, outside = libcaer_cmp.decode_packet(np.frombuffer(np.array(words[:4] + [0x5011], "<u2").tobytes(),
                                                                 np.uint8), 0, False, 0, 640, 480,
                                                   libcaer_cmp.new_stream_state())
    assert (events.y.tolist(), outside) == ([472, 479, 476], 1)
    # a vector before any column is an error even when its mask is empty
    before_address = "before any ADDR_X / VECT_BASE_Y word in word 0x5000 at byte offset 2"
    with pytest.raises(EventDecodeError, match=before_address) as error:
        libcaer_cmp.decode_packet(np.frombuffer(np.array([0x4008, 0x5000], "<u2").tobytes(), np.uint8), 0,
                                  False, 0, 640, 480, libcaer_cmp.new_stream_state())
    assert error.value.kind == "event_before_address"


def test_big_endian_and_unaligned_payloads_decode_the_same():
    """The decoders read little-endian payloads in place; big-endian ones (is_bigendian) and
    ones at an odd byte offset (ROS 1 has no alignment) are copied first."""
    words = [0x8000, 0x6005, 0x0002, 0x3800, 0x4011, 0x2803]  # x 0, 4 (vector), 3 (ADDR_X); row 2
    little, _ = codecs.decode_event_packet(packet_with_payload("evt3", np.array(words, "<u2").tobytes()))
    big, _ = codecs.decode_event_packet(packet_with_payload("evt3", np.array(words, ">u2").tobytes(),
                                                            is_bigendian=True))
    assert little.x.tolist() == big.x.tolist() == [0, 4, 3]
    assert little.equals(big)
    events = row_runs(200, 240, 180, seed=4)
    buffer = codecs.encode_event_packet(events, 180, 240, "evt3", "ab", ros1=True)
    payload_offset = len(buffer) - 2 * len(codecs.encode_evt3_words(events))
    assert payload_offset % 2 == 1
    assert codecs.decode_event_packet(buffer, ros1=True)[0].equals(events)


# ----------------------------------------------------------------------------------------
# Malformed and truncated input


def encoded_messages():
    events = random_events(5, seed=2, microseconds=True)
    origin = int(events.t[0])
    return {
        "EventArray CDR": (codecs.encode_event_array(events, 180, 240, "cam"), codecs.decode_event_array),
        "EventArray ROS 1": (codecs.encode_event_array_ros1(events, 180, 240, "cam"),
                             codecs.decode_event_array_ros1),
        "EventPacket mono": (codecs.encode_event_packet(events, 180, 240, "mono", "cam"),
                             codecs.decode_event_packet),
        "EventPacket evt3": (codecs.encode_event_packet(events, 180, 240, "evt3", "cam",
                                                        sensor_time_offset_ns=origin),
                             codecs.decode_event_packet),
        "EventPacket libcaer": (codecs.encode_event_packet(events, 180, 240, "libcaer", "cam",
                                                           sensor_time_offset_ns=origin - 5 * SECOND),
                                codecs.decode_event_packet),
        "EventPacket libcaer_cmp": (codecs.encode_event_packet(clustered_events(40, 4, width=240, height=180),
                                                               180, 240, "libcaer_cmp", "cam"),
                                    codecs.decode_event_packet),
        "EventPacket libcaer_cmp ROS 1": (
            codecs.encode_event_packet(clustered_events(40, 4, width=240, height=180), 180, 240,
                                       "libcaer_cmp", "cam", ros1=True),
            lambda buffer: codecs.decode_event_packet(buffer, ros1=True)),
        "EventPacket evt3 ROS 1": (
            codecs.encode_event_packet(events, 180, 240, "evt3", "cam", sensor_time_offset_ns=origin, ros1=True),
            lambda buffer: codecs.decode_event_packet(buffer, ros1=True)),
    }


@pytest.mark.parametrize("encoding", ["libcaer", "libcaer_cmp", "evt3"])
def test_payload_cut_anywhere_raises_or_gives_a_prefix_of_the_events(encoding):
    """The event bytes of a packet cut at every length (the length field saying so): a cut
    inside a word is an EventDecodeError; a cut between words decodes to the events before
    it (the formats have no end marker): never to different events."""
    events = clustered_events(24, 5, width=240, height=180)
    origin = int(events.t[0])
    full = codecs.encode_event_packet(events, 180, 240, encoding, sensor_time_offset_ns=origin)
    store = typestore_with_event_types(2)
    payload = store.deserialize_cdr(full, "event_camera_msgs/msg/EventPacket").events.tobytes()
    time_base = store.deserialize_cdr(full, "event_camera_msgs/msg/EventPacket").time_base
    word = 8 if encoding == "libcaer" else 2
    for length in range(len(payload)):
        buffer = packet_with_payload(encoding, payload[:length], time_base)
        if length % word:
            with pytest.raises(EventDecodeError, match="whole number"):
                codecs.decode_event_packet(buffer, codecs.Evt3Decoder(origin))
            continue
        decoded, _ = codecs.decode_event_packet(buffer, codecs.Evt3Decoder(origin))
        assert decoded.equals(events[:len(decoded)])


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
        # accepted: then every event is a valid event of the declared sensor (a dvs_msgs size of
        # 0x0 declares none: the reader bounds the events by its calibration)
        if (info.width, info.height) != (0, 0):
            assert np.all(events.x < info.width) and np.all(events.y < info.height)
        assert set(np.unique(events.p)) <= {-1, 1}


def cdr_event_array_fields(events=None, height=180, width=240):
    events = random_events(3, seed=3) if events is None else events
    return bytearray(codecs.encode_event_array(events, height, width, "ab"))


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
    # later records: 16-byte stride from byte 46 (x@0 y@2 sec@6 nanosec@10 polarity@14)
    bad = bytearray(good); bad[62 + 14] = 3; cases.append((bad, "event 2 .*polarity=3"))
    bad = bytearray(good); bad[32 + 8:32 + 12] = (SECOND).to_bytes(4, "little"); cases.append((bad, "nanosec=1000000000"))
    bad = bytearray(good) + b"\x00" * 8; cases.append((bad, "unexpected bytes"))
    for buffer, message in cases:
        with pytest.raises(EventDecodeError, match=message):
            codecs.decode_event_array(bytes(buffer))


def test_event_array_events_outside_the_declared_size_are_dropped_alone():
    """An EventArray with events outside its declared size (a driver's glitch) keeps the others
    and counts the dropped ones (info.outside_events); a size of 0x0 (not filled in) keeps all,
    for the reader to bound by its calibration. Both layouts, CDR and ROS 1."""
    events = random_events(3, seed=3)
    good = cdr_event_array_fields(events)
    # the second record (16-byte stride from byte 46, y at +2) at y = 180, the first (byte 32) at x = 240
    for offset, value in ((46 + 2, 180), (32, 240)):
        bad = bytearray(good)
        bad[offset:offset + 2] = value.to_bytes(2, "little")
        decoded, info = codecs.decode_event_array(bytes(bad))
        kept = np.arange(3) != (1 if offset == 48 else 0)
        assert decoded.equals(events[kept]) and info.outside_events == 1
    undeclared = bytearray(good)
    undeclared[20:28] = bytes(8)  # height, width = 0, 0
    undeclared[32:34] = (1000).to_bytes(2, "little")
    decoded, info = codecs.decode_event_array(bytes(undeclared))
    assert (info.height, info.width, info.outside_events) == (0, 0, 0) and list(decoded.x[:1]) == [1000]
    ros1 = bytearray(codecs.encode_event_array_ros1(events, 180, 240, "ab"))
    ros1[-13:-11] = (240).to_bytes(2, "little")  # the last record's x
    decoded, info = codecs.decode_event_array_ros1(bytes(ros1))
    assert decoded.equals(events[:2]) and info.outside_events == 1


def redeclared(buffer: bytes, height: int, width: int) -> bytes:
    """The same CDR EventPacket declaring another sensor size (rewritten by rosbags' serializer)."""
    store = ros2_store()
    message = store.deserialize_cdr(buffer, "event_camera_msgs/msg/EventPacket")
    message = dataclasses.replace(message, height=height, width=width)
    return bytes(store.serialize_cdr(message, "event_camera_msgs/msg/EventPacket"))


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_event_packet_events_outside_the_declared_size_are_dropped_alone(encoding):
    """Packets whose events lie partly outside the size they declare (a driver's glitch;
    encoded for a larger sensor) decode, through one stream decoder, to exactly the events
    inside, in ROS time, and count the others (info.outside_events, per packet). evt3: runs
    of up to 40 px on rows (32-px vectors cut by the last column) on the camera's clock;
    the others: bursts of rows on a column (libcaer_cmp's VECT_8 cut by the last row)."""
    ros_start = 1_700_000_000 * SECOND
    if encoding == "evt3":
        events = row_runs(3000, 1280, 720, seed=4)  # the camera's clock, from 5 s
        origin = -ros_start  # encoded with the camera's clock
        events = Events(events.x, events.y, events.t + ros_start, events.p)
        full, declared = (720, 1280), (680, 1200)
    else:
        events = clustered_events(4000, seed=5, start_ns=ros_start + 123_000)
        origin = int(events.t[0]) - 5 * SECOND  # libcaer: the camera started 5 s before
        full, declared = (260, 346), (250, 340)
    inside = (events.x < declared[1]) & (events.y < declared[0])
    assert len(events) // 50 < np.count_nonzero(~inside) < len(events) // 4
    stream = codecs.EventMessageDecoder("event_camera_msgs/EventPacket")
    decoded = []
    for part in np.array_split(np.arange(len(events)), 6):
        chunk, chunk_inside = events[part], inside[part]
        buffer = codecs.encode_event_packet(chunk, *full, encoding, stamp_ns=int(chunk[chunk_inside].t[0]),
                                            sensor_time_offset_ns=ros_start + origin if encoding == "evt3"
                                            else origin)
        got, info = stream(redeclared(buffer, *declared))
        assert info.outside_events == np.count_nonzero(~chunk_inside) and (info.height, info.width) == declared
        decoded.append(got)
    assert Events.concatenate(decoded).equals(events[inside])


def test_evt3_stream_cut_anywhere_drops_only_the_events_outside():
    """An evt3 word stream cut into packets anywhere (inside vectors too), decoded for a
    sensor smaller than the one it was written for: the events inside, in order, and the
    count of the others."""
    events = row_runs(3000, 1280, 720, seed=6)
    inside = (events.x < 1200) & (events.y < 680)
    payload = codecs.encode_evt3_words(events).tobytes()
    cuts = 2 * np.unique(np.random.default_rng(7).integers(0, len(payload) // 2, 30))
    decoder = codecs.Evt3Decoder()
    parts, outside = [], 0
    for begin, end in zip(np.r_[0, cuts], np.r_[cuts, len(payload)]):
        part, _, dropped = decoder.decode_packet(np.frombuffer(payload[begin:end], np.uint8), width=1200, height=680)
        parts.append(part)
        outside += dropped
    assert Events.concatenate(parts).equals(events[inside]) and outside == np.count_nonzero(~inside)


def test_unknown_packet_encoding_and_bad_payloads_raise():
    with pytest.raises(EventDecodeError, match="unknown EventPacket encoding 'evt2'"):
        codecs.decode_event_packet(packet_with_payload("evt2", b"\x00" * 8))
    with pytest.raises(EventDecodeError, match="not a whole number of 8-byte events"):
        codecs.decode_event_packet(packet_with_payload("libcaer", b"\x00" * 12))
    with pytest.raises(EventDecodeError, match="negative timestamp -1 us at byte offset"):
        codecs.decode_event_packet(packet_with_payload("libcaer", np.array([1, 0xFFFFFFFF], "<u4").tobytes()))
    with pytest.raises(EventDecodeError, match="not a whole number of 16-bit words"):
        codecs.decode_event_packet(packet_with_payload("libcaer_cmp", b"\x00" * 5))
    with pytest.raises(EventDecodeError, match="unknown libcaer_cmp word code 6"):
        codecs.decode_event_packet(packet_with_payload("libcaer_cmp", np.array([0x2001, 0x6000], "<u2").tobytes()))
    with pytest.raises(EventDecodeError, match="before any ADDR_X"):
        codecs.decode_event_packet(packet_with_payload("libcaer_cmp", np.array([0x3001], "<u2").tobytes()))
    with pytest.raises(EventDecodeError, match="not a whole number of 8-byte words"):
        codecs.decode_event_packet(packet_with_payload("mono", b"\x00" * 12))
    with pytest.raises(EventDecodeError, match="not a whole number of 16-bit words"):
        codecs.decode_event_packet(packet_with_payload("evt3", b"\x00" * 3))
    with pytest.raises(EventDecodeError, match="unknown EVT3 word type 0x1"):
        codecs.decode_event_packet(packet_with_payload("evt3", np.array([0x8000, 0x6000, 0x1000], "<u2").tobytes()))
    # a structurally invalid word after an event outside the sensor is still an error
    with pytest.raises(EventDecodeError, match="unknown EVT3 word type 0x1 in word 0x1000 at byte offset"):
        codecs.decode_event_packet(packet_with_payload(
            "evt3", np.array([0x8000, 0x6000, 0x0000, 0x2000 | 240, 0x1000], "<u2").tobytes()))
    with pytest.raises(EventDecodeError, match="unknown libcaer_cmp word code 6"):
        codecs.decode_event_packet(packet_with_payload("libcaer_cmp",
                                                       np.array([0x2001, 0x40B0, 0x5010, 0x6000], "<u2").tobytes()))
    with pytest.raises(EventDecodeError, match="negative timestamp -1 us at byte offset"):
        codecs.decode_event_packet(packet_with_payload("libcaer", np.array([240 << 17, 0, 1, 0xFFFFFFFF],
                                                                           "<u4").tobytes()))


# ----------------------------------------------------------------------------------------
# One time convention: event times are ROS time (the header stamps' clock)


def test_camera_clock_streams_are_moved_onto_the_first_header_stamp_once():
    """evt3: the camera's microsecond clock (here 3 s since power-up) is mapped to ROS time
    by the first packet with events (its first event = its header stamp); later packets
    keep the camera's spacing, whatever their own header stamps say (here 2 ms late)."""
    ros_start = 1_700_000_000 * SECOND
    events = clustered_events(3000, seed=6, start_ns=3 * SECOND)  # camera clock
    stream = codecs.EventMessageDecoder("event_camera_msgs/EventPacket")
    empty = codecs.encode_event_packet(Events.empty(), 260, 346, "evt3", stamp_ns=ros_start - SECOND)
    assert len(stream(empty)[0]) == 0 and stream.offset_ns is None  # no events: nothing fixed yet
    decoded = []
    for index, part in enumerate(np.array_split(np.arange(len(events)), 5)):
        chunk = events[part]
        stamp = ros_start + int(chunk.t[0] - events.t[0]) + (2_000_000 if index else 0)
        decoded.append(stream(codecs.encode_event_packet(chunk, 260, 346, "evt3", stamp_ns=stamp))[0])
    assert stream.offset_ns == ros_start - int(events.t[0])
    assert np.array_equal(Events.concatenate(decoded).t, events.t - events.t[0] + ros_start)


@pytest.mark.parametrize("encoding", ["libcaer", "libcaer_cmp", "dvs"])
def test_host_clock_streams_keep_their_times(encoding):
    """libcaer_driver and the dvs drivers stamp events in host (ROS) time already; their
    header stamp comes up to a packet later (10 ms in event_camera_codecs' libcaer bag):
    the times stay as they are."""
    events = clustered_events(500, seed=7, start_ns=1_702_309_120 * SECOND, span_us=10_000)
    stamp = int(events.t[-1]) + 10_000_000
    if encoding == "dvs":
        stream = codecs.EventMessageDecoder("dvs_msgs/msg/EventArray")
        buffer = codecs.encode_event_array(events, 260, 346, stamp_ns=stamp)
    else:
        stream = codecs.EventMessageDecoder("event_camera_msgs/EventPacket")
        buffer = codecs.encode_event_packet(events, 260, 346, encoding, stamp_ns=stamp,
                                            sensor_time_offset_ns=1_702_300_000 * SECOND)
    decoded, info = stream(buffer)
    assert stream.offset_ns == 0 and info.stamp_ns == stamp
    assert decoded.equals(events)


def test_event_message_decoder_refuses_unknown_types():
    with pytest.raises(ValueError, match="unknown event message type 'prophesee_event_msgs/EventArray'"):
        codecs.EventMessageDecoder("prophesee_event_msgs/EventArray")


def test_fast_packet_header_path_agrees_with_the_checked_one():
    """decode_event_packet parses well-formed CDR headers in a few struct calls and falls
    back to the field-by-field path otherwise: on any corruption, the fast path either
    declines or reads exactly what the checked path reads."""
    events = clustered_events(40, 4, width=240, height=180)
    buffer = codecs.encode_event_packet(events, 180, 240, "libcaer_cmp", "camera_frame")
    assert _packet_header_fast(buffer) is not None
    rng = np.random.default_rng(21)
    declined = 0
    for _ in range(3000):
        corrupted = bytearray(buffer)
        for position in rng.integers(0, 90, rng.integers(1, 3)):  # the header and first words
            corrupted[position] = rng.integers(0, 256)
        corrupted = bytes(corrupted)
        fast = _packet_header_fast(corrupted)
        try:
            checked = _packet_header_checked(corrupted, ros1=False)
        except EventDecodeError:
            assert fast is None
            declined += 1
            continue
        if fast is None:
            declined += 1
            continue
        assert fast[:9] == checked[:9] and fast[10] == checked[10]
        assert np.array_equal(fast[9], checked[9])
    assert 0 < declined < 3000


def test_one_table_of_event_message_types_gives_each_use_its_members():
    """The bag readers decode all three types; a ROS 2 node subscribes to the two with an interface
    package here; a replay publishes the legacy type as the EventPacket it equals field for field."""
    from focus_ros.codecs import message_types

    assert message_types.EVENT_MESSAGE_TYPES == (
        "dvs_msgs/EventArray", "event_camera_msgs/EventPacket", "event_array_msgs/EventArray")
    assert message_types.SUBSCRIBABLE_EVENT_MESSAGE_TYPES == ("dvs_msgs/EventArray", "event_camera_msgs/EventPacket")
    assert message_types.ROS2_REPUBLISHED_MESSAGE_TYPES == {"dvs_msgs/msg/EventArray",
                                                            "event_camera_msgs/msg/EventPacket"}
    assert message_types.republished_ros2_type("event_array_msgs/msg/EventArray") == "event_camera_msgs/msg/EventPacket"
    assert message_types.republished_ros2_type("sensor_msgs/msg/Imu") == "sensor_msgs/msg/Imu"
    assert message_types.event_message_type("event_camera_msgs/msg/EventPacket").packet
    assert message_types.event_message_type("sensor_msgs/msg/Imu") is None
