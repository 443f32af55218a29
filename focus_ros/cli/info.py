"""Show what a sequence holds for events: topics, encodings, sensor size, event counts, times, rates.

Like ``ros2 bag info``, but the event messages are decoded (at the decoders' speed): for an
Event Camera Dataset folder or a ROS 1 / ROS 2 bag, per event stream its message type and
encodings, sensor size, number of events (ON / OFF), first and last event time (ROS time),
mean and peak event rate (per 10 ms), messages per second, external triggers; and whether
camera_info, IMU and poses are there (a calibration that is there but unusable is said so,
with the reason), and a bag's TF frames (/tf, /tf_static): each frame's parent, whether the edge
is static or dynamic, and a dynamic one's transform count and rate. A sequence without events
is reported, then refused (exit status 1): no command can estimate from it.
"""

from __future__ import annotations

import json
import sys
from datetime import datetime, timezone

from focus_ros.cli import UserError
from focus_ros.events import NANOSECONDS_PER_SECOND

#: times above this (ns) are shown as UTC dates too (after 2001)
_EPOCH_DISPLAY_NS = 1_000_000_000 * NANOSECONDS_PER_SECOND


def add_arguments(parser) -> None:
    parser.add_argument("sequence", help="ECD folder (events.txt), a ROS 1 .bag or a ROS 2 bag folder")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")


def _time_text(t_ns: int | None) -> str:
    if t_ns is None:
        return "-"
    seconds = f"{t_ns // NANOSECONDS_PER_SECOND}.{t_ns % NANOSECONDS_PER_SECOND:09d} s"
    if t_ns >= _EPOCH_DISPLAY_NS:
        date = datetime.fromtimestamp(t_ns / NANOSECONDS_PER_SECOND, timezone.utc)
        return f"{seconds} ({date.strftime('%Y-%m-%d %H:%M:%S.%f')} UTC)"
    return seconds


def _stream_record(stream) -> dict:
    return {
        "source": stream.source, "message_type": stream.message_type, "messages": stream.messages,
        "encodings": sorted(stream.encodings),
        "sensor_sizes": [f"{w}x{h}" for w, h in sorted(stream.sensor_sizes)],
        "max_x": stream.max_x, "max_y": stream.max_y,
        "events": stream.events, "on": stream.on, "off": stream.off, "triggers": stream.triggers,
        "first_event_ns": stream.first_t, "last_event_ns": stream.last_t,
        "duration_s": stream.duration_s, "mean_rate_ev_per_s": stream.mean_rate,
        "peak_rate_ev_per_s_10ms": stream.peak_rate, "messages_per_s": stream.message_rate,
    }


def _tf_frame_record(frame) -> dict:
    return {"parent": frame.parent, "child": frame.child, "static": frame.static, "transforms": frame.transforms,
            "rate_hz": frame.rate_hz}


def _tf_frame_text(frame) -> str:
    """'odom -> base_link (dynamic, 2,400 transforms, 200.0 Hz)' or 'base_link -> camera_link (static)'."""
    if frame.static:
        return f"{frame.parent} -> {frame.child} (static)"
    return f"{frame.parent} -> {frame.child} (dynamic, {frame.transforms:,} transforms, {frame.rate_hz:.1f} Hz)"


def render(summary, unusable: dict | None = None) -> str:
    """The summary as aligned text lines; unusable: calibration name -> why it cannot be used
    (see :func:`unusable_calibrations`)."""
    unusable = unusable or {}
    lines = [f"{'sequence:':<22}{summary.path}", f"{'format:':<22}{summary.kind}"]
    if summary.topics:
        lines.append("topics:")
        width = max(len(topic) for topic in summary.topics)
        for topic, (msgtype, count) in sorted(summary.topics.items()):
            lines.append(f"  {topic:<{width}}  {msgtype}  ({count} messages)")
    for stream in summary.streams:
        lines.append(f"events on {stream.source}:")
        rows = []
        if stream.message_type:
            rows.append(("message type", stream.message_type))
        if stream.encodings:
            rows.append(("encoding", ", ".join(sorted(stream.encodings))))
        if stream.sensor_sizes:
            rows.append(("sensor size", ", ".join(f"{w}x{h} px" for w, h in sorted(stream.sensor_sizes))))
        rows.append(("largest x, y", f"{stream.max_x}, {stream.max_y} px" if stream.events else "-"))
        rows.append(("events", f"{stream.events:,} (ON {stream.on:,}, OFF {stream.off:,})"))
        if stream.triggers:
            rows.append(("trigger events", f"{stream.triggers:,}"))
        rows.append(("first event", _time_text(stream.first_t)))
        rows.append(("last event", _time_text(stream.last_t)))
        rows.append(("duration", f"{stream.duration_s:.3f} s"))
        rows.append(("event rate", f"mean {stream.mean_rate / 1e6:.3f} Mev/s, "
                                   f"peak {stream.peak_rate / 1e6:.3f} Mev/s (10 ms bins)"))
        if stream.messages:
            rows.append(("messages", f"{stream.messages:,} ({stream.message_rate:.1f} per second)"))
        lines += [f"  {name + ':':<20}{value}" for name, value in rows]
    if not summary.streams:
        lines.append(f"{'events:':<22}none")
    camera_info = [f"{name} (unusable: {unusable[name]})" if name in unusable else name for name in summary.camera_info]
    for name, found in (("camera_info", camera_info), ("IMU", summary.imu), ("poses", summary.poses)):
        lines.append(f"{name + ':':<22}{', '.join(found) if found else 'none'}")
    if summary.tf_frames:
        lines.append("tf frames:")
        lines += [f"  {_tf_frame_text(frame)}" for frame in summary.tf_frames]
    return "\n".join(lines)


def unusable_calibrations(summary) -> dict[str, str]:
    """name -> why, for each calibration the sequence holds that cannot be used as it stands:
    an ECD calib.txt read as ``focus-ros estimate`` reads it, or a bag's camera_info topic
    (its first message)."""
    from focus_ros.sources import bags
    from focus_ros.sources.sequence import ECD, sequence_calibration, sequence_format

    unusable = {}
    ecd = sequence_format(summary.path) == ECD
    for name in summary.camera_info:
        try:
            if ecd:
                sequence_calibration(summary.path)
            elif bags.read_bag_calibration(summary.path, name) is None:
                unusable[name] = "no message"
        except (FileNotFoundError, ValueError) as error:
            unusable[name] = str(error)
    return unusable


def missing_events(summary) -> str | None:
    """Why the sequence holds no event at all (None when it holds some)."""
    from focus_ros.sources import bags
    from focus_ros.sources.bags import topics_listing

    if any(stream.events for stream in summary.streams):
        return None
    if not summary.streams:
        return (f"{summary.path}: the bag holds no event messages (no topic of type "
                f"{' or '.join(bags.EVENT_TYPES)}); it holds {topics_listing(summary.topics)}")
    messages = sum(stream.messages for stream in summary.streams)
    sources = ", ".join(stream.source for stream in summary.streams)
    if messages == 0 and summary.streams[0].message_type:
        return f"{summary.path}: the bag holds no event messages (its event topic {sources} has none)"
    return f"{summary.path}: {sources} holds no events" + (f" ({messages} empty messages)" if messages else "")


def run(args) -> int:
    from tqdm import tqdm

    from focus_ros.sources.summary import summarize_sequence

    with tqdm(unit="ev", unit_scale=True, desc="info", file=sys.stderr,
              disable=True if args.quiet else None, leave=False) as progress:
        summary = summarize_sequence(args.sequence, progress)
    unusable = unusable_calibrations(summary)
    if args.json:
        print(json.dumps({
            "sequence": str(summary.path), "format": summary.kind,
            "topics": {t: {"type": m, "messages": c} for t, (m, c) in summary.topics.items()},
            "event_streams": [_stream_record(s) for s in summary.streams],
            "camera_info": summary.camera_info, "camera_info_unusable": unusable,
            "imu": summary.imu, "poses": summary.poses,
            "tf_frames": [_tf_frame_record(frame) for frame in summary.tf_frames],
        }, indent=2))
    else:
        print(render(summary, unusable))
    reason = missing_events(summary)
    if reason:
        sys.stdout.flush()  # the report first, then the one-line error
        raise UserError(reason)
    return 0
