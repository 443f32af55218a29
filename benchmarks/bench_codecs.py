"""Event message codecs: decode / encode rates (Mev/s).

Three tables:

1. **Fast cameras** (issue 21): streams of 1-ms EventPacket messages as the drivers of
   today's cameras publish them, decoded on one core by one stream decoder, as the node
   does: a Prophesee IMX636 (1280x720, metavision_driver, ``evt3``) at 15-50 Mev/s and a
   DVXplorer (640x480, libcaer_driver, ``libcaer_cmp``) at 10-145 Mev/s; the same
   DVXplorer events as uncompressed ``libcaer`` and as ``mono`` too. Every message is
   different (a decoder fed one message over and over lets the CPU's branch predictor
   learn it by heart and looks a quarter faster than it is). Times are the thread's CPU
   time, so other processes on a shared machine cost little; median and range of
   ``--runs`` runs, each decoding the whole stream once after an untimed pass (the
   steady state of a node decoding all the time). ``--baseline REV`` decodes the same
   messages with the whole ``focus_ros.codecs`` package of git revision REV too (its
   stream decoder, header parser and codecs, taken with ``git show`` into a temporary
   folder), interleaved run by run with the current ones (which goes first alternates), and
   gives the ratio.
2. **30,000-event messages** of every message type and encoding on synthetic
   DAVIS240C-like events (random pixels: the worst case for the run-length vectors) and
   the real boxes_rotation slice; rclpy's own object (de)serialization of
   ``dvs_msgs/EventArray`` for comparison (when the interface packages are built).
3. **Real bags** of the ros-event-camera projects (../shared/data/peer_bags) through the
   stream decoder the node and the readers use.

Run: ``.venv/bin/python benchmarks/bench_codecs.py`` (all three), ``--only fast``
(table 1), ``--only fast --baseline HEAD`` (before / after an uncommitted change).
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import closing
from pathlib import Path

import numpy as np

from focus_ros import codecs
from focus_ros.codecs import event_packet
from focus_ros.events import Events

EVENTS_PER_MESSAGE = 30_000
REPOSITORY = Path(__file__).resolve().parents[1]
SHARED_DATA = REPOSITORY.parent / "shared" / "data"
PEER_BAGS = {
    "evt3 (Prophesee 1280x720, event_camera_codecs test_data_evt3_trigger)":
        "event_camera_codecs/test_data_evt3_trigger",
    "evt3 (Prophesee 640x480, event_camera_py test_events_1)": "event_camera_py/test_events_1",
    "libcaer (DVXplorer 640x480, event_camera_codecs test_data_libcaer_rollover)":
        "event_camera_codecs/test_data_libcaer_rollover",
}
PACKET_US = 1000  # the drivers' default message period

# ----------------------------------------------------------------------------------------
# Fast cameras: synthetic streams shaped as the sensors read out


def _runs(count: int, mean_length: float, lone_share: float, rng) -> np.ndarray:
    """Lengths of runs of neighbouring pixels firing together (an edge crossing them):
    geometric with the given mean, a share of them lone events; they sum to ``count``."""
    lengths = np.where(rng.random(count) < lone_share, 1, rng.geometric(1 / mean_length, count))
    ends = np.cumsum(lengths)
    lengths = lengths[: np.searchsorted(ends, count) + 1]
    lengths[-1] -= max(0, int(lengths.sum()) - count)
    return lengths[lengths > 0]


def _run_events(rate_mev_s: float, duration_us: int, along_size: int, across_size: int,
                mean_length: float, lone_share: float, seed: int):
    """(t_us, along, across, on) of runs along one axis: each run at one microsecond, on
    one line ``across``, pixels ``along`` in a row, one polarity."""
    rng = np.random.default_rng(seed)
    lengths = _runs(int(rate_mev_s * duration_us), mean_length, lone_share, rng)
    runs = len(lengths)
    run = np.repeat(np.arange(runs), lengths)
    first = np.repeat(np.cumsum(lengths) - lengths, lengths)
    start = rng.integers(0, along_size - 1, runs)
    along = np.minimum(start[run] + np.arange(len(run)) - first, along_size - 1)
    keep = np.r_[True, (along[1:] != along[:-1]) | (run[1:] != run[:-1])]  # clipped at the edge
    t_us = np.sort(rng.integers(0, duration_us, runs))
    across = rng.integers(0, across_size, runs)
    on = rng.integers(0, 2, runs)
    return t_us[run][keep], along[keep], across[run][keep], on[run][keep]


def imx636_events(rate_mev_s: float, duration_us: int, seed: int = 0, width: int = 1280,
                  height: int = 720, start_us: int = 3_000_000) -> Events:
    """A Prophesee IMX636 under motion: at each microsecond, runs of a few neighbouring
    pixels on a row (mean 3.5 px, a fifth of them lone events) read out row by row with
    increasing x; times on the camera's clock (``start_us`` after power-up)."""
    t_us, x, y, on = _run_events(rate_mev_s, duration_us, width, height, 3.5, 0.2, seed)
    order = np.lexsort((x, y, t_us))
    return Events.from_arrays(x[order], y[order], (start_us + t_us[order]) * 1000, on[order])


def dvxplorer_events(rate_mev_s: float, duration_us: int, flicker: bool, seed: int = 0,
                     width: int = 640, height: int = 480,
                     start_ns: int = 1_700_000_000_000_000_000) -> Events:
    """A DVXplorer in its readout order (libcaer: per time stamp, column by column, each
    column's rows in groups of 8, ON group then OFF group). Under motion, runs of a few
    rows on a column (mean 4, 30 % lone events); under flicker, long runs (mean 24 rows,
    5 % lone) that fill the 8-row groups. Host-clock times from ``start_ns``."""
    mean, lone = (24, 0.05) if flicker else (4, 0.3)
    t_us, y, x, on = _run_events(rate_mev_s, duration_us, height, width, mean, lone, seed)
    order = np.lexsort((y, 1 - on, y // 8, x, t_us))
    return Events.from_arrays(x[order], y[order], start_ns + t_us[order] * 1000, on[order])


def evt3_stream(rate_mev_s: float, packets: int, seed: int = 0, vectors: bool = True) -> tuple[list[bytes], int]:
    """(CDR EventPackets, events) of a 1280x720 evt3 camera: the stream's words cut into
    equal parts of about 1 ms, anywhere (inside a vector too), as metavision_driver
    forwards the camera's buffers. ``vectors``: 4 or more events of a 32-pixel group as a
    vector (see :func:`codecs.encode_evt3_words`); else one ADDR_X per event, as in the
    real (low-rate) evt3 bags of the peer projects."""
    events = imx636_events(rate_mev_s, packets * PACKET_US, seed)
    words = codecs.encode_evt3_words(events, vectors=vectors).tobytes()
    cuts = np.linspace(0, len(words) // 2, packets + 1).astype(int) * 2
    host_start_ns = 1_700_000_000_000_000_000  # header stamps in ROS time, events on the camera's clock
    messages = [event_packet._serialize_packet(host_start_ns + k * PACKET_US * 1000, "camera", 720, 1280,
                                               k, 0, "evt3", False, words[begin:end], False)
                for k, (begin, end) in enumerate(zip(cuts[:-1], cuts[1:]))]
    return messages, len(events)


def dvxplorer_stream(rate_mev_s: float, packets: int, flicker: bool, seed: int = 0,
                     encoding: str = "libcaer_cmp") -> tuple[list[bytes], int]:
    """(CDR EventPackets, events) of a 640x480 DVXplorer through libcaer_driver: one
    message per 1 ms of events, each encoded on its own (libcaer_cmp: compressed from its
    time_base; libcaer: the host clock's microseconds; mono: ns after its first event)."""
    events = dvxplorer_events(rate_mev_s, packets * PACKET_US, flicker, seed)
    bounds = np.searchsorted(events.t, events.t[0] + np.arange(packets + 1) * PACKET_US * 1000)
    return [codecs.encode_event_packet(events[begin:end], 480, 640, encoding, "camera", seq=k)
            for k, (begin, end) in enumerate(zip(bounds[:-1], bounds[1:]))], len(events)


FAST_CAMERAS = [  # (name, encoding, stream maker)
    ("IMX636 1280x720 evt3, motion, 15 Mev/s", "evt3", lambda n: evt3_stream(15, n)),
    ("IMX636 1280x720 evt3, motion, 30 Mev/s", "evt3", lambda n: evt3_stream(30, n)),
    ("IMX636 1280x720 evt3, motion, 50 Mev/s", "evt3", lambda n: evt3_stream(50, n)),
    ("IMX636 1280x720 evt3, motion, 15 Mev/s, ADDR_X only", "evt3", lambda n: evt3_stream(15, n, vectors=False)),
    ("DVXplorer 640x480 libcaer_cmp, motion, 10 Mev/s", "libcaer_cmp", lambda n: dvxplorer_stream(10, n, False)),
    ("DVXplorer 640x480 libcaer_cmp, motion, 50 Mev/s", "libcaer_cmp", lambda n: dvxplorer_stream(50, n, False)),
    ("DVXplorer 640x480 libcaer_cmp, flicker, 145 Mev/s", "libcaer_cmp",
     lambda n: dvxplorer_stream(145, n, True)),
    ("DVXplorer 640x480 libcaer (uncompressed), motion, 10 Mev/s", "libcaer",
     lambda n: dvxplorer_stream(10, n, False, encoding="libcaer")),
    ("DVXplorer 640x480 mono, motion, 10 Mev/s", "mono", lambda n: dvxplorer_stream(10, n, False, encoding="mono")),
]


#: where older codec packages are imported from (removed when the benchmark ends)
_TEMPORARY = tempfile.TemporaryDirectory(prefix="bench_codecs_")


def _codecs_at_revision(revision: str):
    """The focus_ros.codecs package as it was at git ``revision``, imported under a name of
    its own from a temporary folder (its imports of focus_ros.codecs rewritten to that
    name; other focus_ros imports resolve to the current package)."""
    def git(*args):
        return subprocess.run(["git", *args], cwd=REPOSITORY, check=True, capture_output=True, text=True).stdout

    package = "codecs_at_" + "".join(c if c.isalnum() else "_" for c in revision)
    folder = Path(_TEMPORARY.name) / package
    folder.mkdir(exist_ok=True)
    for path in git("ls-tree", "--name-only", f"{revision}:focus_ros/codecs").split():
        if path.endswith(".py"):
            source = git("show", f"{revision}:focus_ros/codecs/{path}")
            (folder / path).write_text(source.replace("focus_ros.codecs", package))
    if _TEMPORARY.name not in sys.path:
        sys.path.insert(0, _TEMPORARY.name)
    return importlib.import_module(package)


def fast_camera_rates(packets: int, runs: int, baseline: str | None) -> None:
    """Table 1: Mev/s per camera and rate on one core, median (range) of ``runs``."""
    old = _codecs_at_revision(baseline) if baseline else None
    print(f"Fast cameras: {packets} messages of 1 ms each, thread CPU time, median (range) of {runs} runs\n")
    header = "| camera, scene, rate | B/event | Mev/s |"
    rule = "|---|---:|---:|"
    if baseline:
        header += f" Mev/s at {baseline} | ratio |"
        rule += "---:|---:|"
    print(header)
    print(rule)
    for name, encoding, make in FAST_CAMERAS:
        messages, count = make(packets)
        size = sum(len(message) for message in messages)

        def decode_all(package=codecs):
            stream = package.EventMessageDecoder("event_camera_msgs/EventPacket")
            return sum(len(stream(message)[0]) for message in messages)

        variants = {"current": decode_all}
        if baseline:
            variants["before"] = lambda: decode_all(old)
        for variant in variants.values():
            if variant() != count:
                raise SystemExit(f"{name}: decoded a different number of events than were encoded")
        seconds = {key: [] for key in variants}
        for run in range(runs):
            order = list(variants.items())
            for key, variant in order[::-1] if run % 2 else order:  # alternating: no bias for going first
                variant()  # caches warm again after the other variant
                start = time.thread_time()
                variant()
                seconds[key].append(time.thread_time() - start)
        rates = {key: sorted(count / value / 1e6 for value in values) for key, values in seconds.items()}
        row = f"| {name} | {size / count:.2f} | {_median_range(rates['current'])} |"
        if baseline:
            ratio = statistics.median(rates["current"]) / statistics.median(rates["before"])
            row += f" {_median_range(rates['before'])} | {ratio:.2f} |"
        print(row)
    print()


def _median_range(rates) -> str:
    return f"{statistics.median(rates):.0f} ({min(rates):.0f}-{max(rates):.0f})"


# ----------------------------------------------------------------------------------------
# 30,000-event messages


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


def message_rates(repeats: int) -> None:
    """Table 2: 30,000-event messages, median of ``repeats`` (wall time)."""
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
    print(f"{EVENTS_PER_MESSAGE:,} events per message (synthetic unless said), median of {repeats} runs\n")
    print("| message | operation | ms per message | Mev/s |")
    print("|---|---|---:|---:|")
    for name, operation, function in cases:
        count = repeats if not name.startswith("rclpy") else max(3, repeats // 5)
        seconds = median_seconds(function, count)
        print(f"| {name} | {operation} | {seconds * 1e3:.3f} | {EVENTS_PER_MESSAGE / seconds / 1e6:.1f} |")
    print()


def _real_slice() -> Events | None:
    folder = SHARED_DATA / "ec_slices" / "boxes_rotation"
    if not (folder / "events.txt").is_file():
        print(f"({folder} not found: real-slice rows skipped)")
        return None
    from focus_ros.sources.ecd import read_events
    events = read_events(folder / "events.txt")
    return Events(events.x, events.y, events.t // 1000 * 1000, events.p)


# ----------------------------------------------------------------------------------------
# Real bags


def peer_bag_rates(repeats: int) -> None:
    """Table 3: whole bags, messages already in memory, through EventMessageDecoder (ROS time)."""
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
        print("Real bags, every message through the stream decoder (ROS time)\n")
        print("| bag | messages | events | ms per message | Mev/s |")
        print("|---|---:|---:|---:|---:|")
        print("\n".join(rows))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=("fast", "messages", "bags"), help="run one table only")
    parser.add_argument("--repeats", type=int, default=20, help="tables 2 and 3: runs per median")
    parser.add_argument("--runs", type=int, default=7, help="table 1: runs (median and range)")
    parser.add_argument("--packets", type=int, default=40, help="table 1: 1-ms messages per stream")
    parser.add_argument("--baseline", metavar="REV",
                        help="table 1: also decode with the whole codecs package of git revision REV "
                             "(its stream decoder too)")
    args = parser.parse_args(argv)
    if args.only in (None, "fast"):
        fast_camera_rates(args.packets, args.runs, args.baseline)
    if args.only in (None, "messages"):
        message_rates(args.repeats)
    if args.only in (None, "bags"):
        peer_bag_rates(args.repeats)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
