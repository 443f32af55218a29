"""Event message codecs: decode / encode rates (Mev/s) for 30,000-event messages.

Compares focus_ros.transport with rclpy's own object (de)serialization of
dvs_msgs/EventArray (when the interface packages are built). Prints a Markdown table;
medians of --repeats runs. Run: .venv/bin/python benchmarks/bench_transport.py
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from focus_ros import transport
from focus_ros.events import Events

EVENTS_PER_MESSAGE = 30_000


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
    cdr = transport.encode_event_array(events, 180, 240, "dvs")
    ros1 = transport.encode_event_array_ros1(events, 180, 240, "dvs")
    mono = transport.encode_event_packet(events, 180, 240, "mono")
    evt3 = transport.encode_event_packet(events, 180, 240, "evt3", evt3_time_offset_ns=origin)
    cases = [
        ("EventArray CDR", "decode", lambda: transport.decode_event_array(cdr)),
        ("EventArray CDR", "encode", lambda: transport.encode_event_array(events, 180, 240, "dvs")),
        ("EventArray ROS 1", "decode", lambda: transport.decode_event_array_ros1(ros1)),
        ("EventArray ROS 1", "encode", lambda: transport.encode_event_array_ros1(events, 180, 240, "dvs")),
        ("EventPacket mono", "decode", lambda: transport.decode_event_packet(mono)),
        ("EventPacket mono", "encode", lambda: transport.encode_event_packet(events, 180, 240, "mono")),
        ("EventPacket evt3", "decode",
         lambda: transport.decode_event_packet(evt3, transport.Evt3Decoder(origin))),
        ("EventPacket evt3", "encode",
         lambda: transport.encode_event_packet(events, 180, 240, "evt3", evt3_time_offset_ns=origin)),
    ]
    try:
        from dvs_msgs.msg import EventArray
        from rclpy.serialization import deserialize_message, serialize_message

        message = deserialize_message(cdr, EventArray)
        cases += [("rclpy EventArray (objects)", "decode", lambda: deserialize_message(cdr, EventArray)),
                  ("rclpy EventArray (objects)", "encode", lambda: serialize_message(message))]
    except ImportError:
        print("(rclpy or dvs_msgs not available: rclpy rows skipped)")
    print(f"{EVENTS_PER_MESSAGE:,} events per message, median of {args.repeats} runs\n")
    print("| message | operation | ms per message | Mev/s |")
    print("|---|---|---:|---:|")
    for name, operation, function in cases:
        repeats = args.repeats if not name.startswith("rclpy") else max(3, args.repeats // 5)
        seconds = median_seconds(function, repeats)
        print(f"| {name} | {operation} | {seconds * 1e3:.3f} | {EVENTS_PER_MESSAGE / seconds / 1e6:.1f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
