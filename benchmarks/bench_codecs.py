"""Event message codecs: decode / encode rates (Mev/s) for 30,000-event messages.

Compares focus_ros.codecs with rclpy's own object (de)serialization of
dvs_msgs/EventArray (when the interface packages are built). Every EventPacket encoding
(evt3, libcaer_cmp, libcaer, mono) on synthetic DAVIS240C-like events (random pixels: the
worst case for libcaer_cmp's run-length vectors) and on the real boxes_rotation slice;
then whole real bags of the ros-event-camera projects (../shared/data/peer_bags) through
the stream decoder the node and the readers use. Prints Markdown tables; medians of
--repeats runs. Run: .venv/bin/python benchmarks/bench_codecs.py
"""

from __future__ import annotations

import argparse
import statistics
import time
from contextlib import closing
from pathlib import Path

import numpy as np

from focus_ros import codecs
from focus_ros.events import Events

EVENTS_PER_MESSAGE = 30_000
SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
PEER_BAGS = {
    "evt3 (Prophesee 1280x720, event_camera_codecs test_data_evt3_trigger)":
        "event_camera_codecs/test_data_evt3_trigger",
    "evt3 (Prophesee 640x480, event_camera_py test_events_1)": "event_camera_py/test_events_1",
    "libcaer (DVXplorer 640x480, event_camera_codecs test_data_libcaer_rollover)":
        "event_camera_codecs/test_data_libcaer_rollover",
}


def synthetic_events(count: int, seed: int = 0) -> Events:
    """DAVIS240C-like events at 5.4 Mev/s (boxes_rotation's peak), whole microseconds."""
    rng = np.random.default_rng(seed)
    t = 49_000_000_000 + np.sort(rng.integers(0, count * 185, count)) // 1000 * 1000
    return Events.from_arrays(rng.integers(0, 240, count), rng.integers(0, 180, count), t,
                              rng.integers(0, 2, count))


def median_seconds(function, repeats: int) -> float:
    function()  # warm up (JIT, caches)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args(argv)
    events = synthetic_events(EVENTS_PER_MESSAGE)
    origin = int(events.t[0])
    cdr = codecs.encode_event_array(events, 180, 240, "dvs")
    ros1 = codecs.encode_event_array_ros1(events, 180, 240, "dvs")
    packets = {encoding: codecs.encode_event_packet(events, 180, 240, encoding,
                                                    sensor_time_offset_ns=origin)
               for encoding in codecs.SUPPORTED_PACKET_ENCODINGS}
    cases = [
        ("EventArray CDR", "decode", lambda: codecs.decode_event_array(cdr)),
        ("EventArray CDR", "encode", lambda: codecs.encode_event_array(events, 180, 240, "dvs")),
        ("EventArray ROS 1", "decode", lambda: codecs.decode_event_array_ros1(ros1)),
        ("EventArray ROS 1", "encode", lambda: codecs.encode_event_array_ros1(events, 180, 240, "dvs")),
    ]
    for encoding, packet in packets.items():
        cases += [
            (f"EventPacket {encoding} ({len(packet) / len(events):.1f} B/event)", "decode",
             lambda packet=packet: codecs.decode_event_packet(packet)),
            (f"EventPacket {encoding}", "encode",
             lambda encoding=encoding: codecs.encode_event_packet(
                 events, 180, 240, encoding, sensor_time_offset_ns=origin)),
        ]
    real = _real_slice()
    if real is not None:
        for encoding in ("libcaer_cmp", "evt3"):
            packet = codecs.encode_event_packet(real, 180, 240, encoding,
                                                sensor_time_offset_ns=int(real.t[0]))
            cases.append((f"EventPacket {encoding}, real boxes_rotation slice "
                          f"({len(packet) / len(real):.1f} B/event)", "decode",
                          lambda packet=packet: codecs.decode_event_packet(packet)))
    try:
        from dvs_msgs.msg import EventArray
        from rclpy.serialization import deserialize_message, serialize_message

        message = deserialize_message(cdr, EventArray)
        cases += [("rclpy EventArray (objects)", "decode", lambda: deserialize_message(cdr, EventArray)),
                  ("rclpy EventArray (objects)", "encode", lambda: serialize_message(message))]
    except ImportError:
        print("(rclpy or dvs_msgs not available: rclpy rows skipped)")
    print(f"{EVENTS_PER_MESSAGE:,} events per message (synthetic unless said), median of {args.repeats} runs\n")
    print("| message | operation | ms per message | Mev/s |")
    print("|---|---|---:|---:|")
    for name, operation, function in cases:
        repeats = args.repeats if not name.startswith("rclpy") else max(3, args.repeats // 5)
        seconds = median_seconds(function, repeats)
        print(f"| {name} | {operation} | {seconds * 1e3:.3f} | {EVENTS_PER_MESSAGE / seconds / 1e6:.1f} |")
    _peer_bag_rates(args.repeats)
    return 0


def _real_slice() -> Events | None:
    folder = SHARED_DATA / "ec_slices" / "boxes_rotation"
    if not (folder / "events.txt").is_file():
        print(f"({folder} not found: real-slice rows skipped)")
        return None
    from focus_ros.sources.ecd import read_events
    events = read_events(folder / "events.txt")
    return Events(events.x, events.y, events.t // 1000 * 1000, events.p)


def _peer_bag_rates(repeats: int) -> None:
    """Whole bags, messages already in memory, through EventMessageDecoder (ROS time)."""
    from focus_ros.sources import bags

    rows = []
    for name, relative in PEER_BAGS.items():
        path = SHARED_DATA / "peer_bags" / relative
        if not path.exists():
            print(f"({path} not found: skipped)")
            continue
        with closing(bags.open_bag(path)) as reader:
            msgtype = reader.connections[0].msgtype
            raw = [bytes(data) for _, _, data in reader.messages()]

        def decode_all():
            stream = codecs.EventMessageDecoder(msgtype)
            return sum(len(stream(buffer)[0]) for buffer in raw)

        count = decode_all()
        seconds = median_seconds(decode_all, max(3, repeats // 2))
        rows.append(f"| {name} | {len(raw)} | {count:,} | {seconds * 1e3 / len(raw):.3f} | "
                    f"{count / seconds / 1e6:.1f} |")
    if rows:
        print("\nReal bags, every message through the stream decoder (ROS time)\n")
        print("| bag | messages | events | ms per message | Mev/s |")
        print("|---|---:|---:|---:|---:|")
        print("\n".join(rows))


if __name__ == "__main__":
    raise SystemExit(main())
