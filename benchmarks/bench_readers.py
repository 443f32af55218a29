"""Readers: events per second from ECD text, a ROS 1 bag and a ROS 2 mcap / sqlite3 bag
(dvs_msgs/EventArray, and event_camera_msgs/EventPacket of the drivers' encodings).

Generates --events synthetic DAVIS240C events into a temporary folder, writes them in each
format (write time reported too), then streams them back. Prints a Markdown table.
Run: .venv/bin/python benchmarks/bench_readers.py [--events 3000000]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from focus_ros.camera import Calibration
from focus_ros.sources import bags, ecd
from focus_ros.sources.recording import Recording

from bench_codecs import synthetic_events


def timed(function) -> float:
    start = time.perf_counter()
    function()
    return time.perf_counter() - start


def count_ecd(folder: Path) -> int:
    return sum(len(chunk) for chunk in ecd.iter_event_chunks(folder))


def count_bag(path: Path) -> int:
    return sum(len(events) for events, _ in bags.iter_bag_events(path))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=3_000_000)
    args = parser.parse_args(argv)
    events = synthetic_events(args.events)
    recording = Recording(events=events, calibration=Calibration.davis240c())
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        folder = Path(folder)
        ecd.write_ecd_folder(folder / "warm", Recording(events=events[:10]))  # compile numba first
        count_ecd(folder / "warm")
        formats = [
            ("ECD events.txt", folder / "ecd", lambda p: ecd.write_ecd_folder(p, recording), count_ecd),
            ("ROS 1 bag", folder / "seq.bag", lambda p: bags.write_bag(p, recording, version=1), count_bag),
            ("ROS 2 mcap", folder / "mcap", lambda p: bags.write_bag(p, recording, version=2, storage="mcap"),
             count_bag),
            ("ROS 2 sqlite3", folder / "sqlite",
             lambda p: bags.write_bag(p, recording, version=2, storage="sqlite3"), count_bag),
        ]
        for encoding in ("evt3", "libcaer_cmp", "libcaer"):  # EventPacket, as the drivers record
            formats.append((f"ROS 2 mcap, EventPacket {encoding}", folder / f"mcap_{encoding}",
                            lambda p, e=encoding: bags.write_bag(p, recording, version=2, storage="mcap",
                                                                 event_encoding=e), count_bag))
        formats.append(("ROS 1 bag, EventPacket libcaer_cmp", folder / "cmp.bag",
                        lambda p: bags.write_bag(p, recording, version=1, event_encoding="libcaer_cmp"),
                        count_bag))
        for name, path, write, read in formats:
            write_s = timed(lambda: write(path))
            counted = []
            read_s = timed(lambda: counted.append(read(path)))
            assert counted[0] == len(events), (name, counted[0])
            rows.append((name, write_s, read_s))
    print(f"{len(events):,} events, 30,000 per bag message\n")
    print("| format | write Mev/s | read Mev/s |")
    print("|---|---:|---:|")
    for name, write_s, read_s in rows:
        print(f"| {name} | {len(events) / write_s / 1e6:.1f} | {len(events) / read_s / 1e6:.1f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
