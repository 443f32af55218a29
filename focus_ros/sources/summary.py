"""What a sequence holds, for events (``focus-ros info``): like ``ros2 bag info``, decoded.

:func:`summarize_sequence` streams an Event Camera Dataset folder or a ROS 1 / ROS 2 bag
once, at the decoders' speed, and returns a :class:`SequenceSummary`: topics and types,
and per event stream its message type, encodings, sensor size, ON/OFF counts, first and
last event time (ROS time, ns), mean and peak event rate (per 10 ms bins), messages per
second, trigger events; plus whether camera_info, IMU and poses are there, and the bag's TF
frames (/tf and /tf_static): each frame's parent, static or dynamic, and how often it moves.
"""

from __future__ import annotations

from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from focus_ros.events import NANOSECONDS_PER_SECOND, Events

#: bin of the peak event rate (ns)
RATE_BIN_NS = 10_000_000

CAMERA_INFO_TYPES = ("sensor_msgs/msg/CameraInfo",)
IMU_TYPES = ("sensor_msgs/msg/Imu",)
POSE_TYPES = ("geometry_msgs/msg/PoseStamped", "nav_msgs/msg/Odometry", "tf2_msgs/msg/TFMessage", "tf/msg/tfMessage")


@dataclass
class EventStreamSummary:
    """One stream of events (a bag topic, or an ECD events.txt). Times in ns (ROS time)."""

    source: str
    message_type: str = ""
    messages: int = 0
    encodings: set = field(default_factory=set)
    sensor_sizes: set = field(default_factory=set)  # {(width, height)} declared by messages
    on: int = 0
    off: int = 0
    triggers: int = 0
    first_t: int | None = None
    last_t: int | None = None
    first_stamp: int | None = None
    last_stamp: int | None = None
    max_x: int = -1
    max_y: int = -1
    _bins: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64), repr=False)
    _bin_origin: int | None = field(default=None, repr=False)

    @property
    def events(self) -> int:
        return self.on + self.off

    @property
    def duration_s(self) -> float:
        if self.first_t is None:
            return 0.0
        return (self.last_t - self.first_t) / NANOSECONDS_PER_SECOND

    @property
    def mean_rate(self) -> float:
        """Mean event rate (events/s) over first..last event."""
        return self.events / self.duration_s if self.duration_s > 0 else 0.0

    @property
    def peak_rate(self) -> float:
        """Highest event rate (events/s) in a 10 ms bin; the first and last bins, which the
        events may fill only in part, count only when there are no others (then: the mean)."""
        if len(self._bins) <= 2:
            return self.mean_rate
        return float(self._bins[1:-1].max()) * NANOSECONDS_PER_SECOND / RATE_BIN_NS

    @property
    def message_rate(self) -> float:
        """Messages per second over the header stamps' span (0 with fewer than 2)."""
        if self.first_stamp is None or self.last_stamp == self.first_stamp:
            return 0.0
        return (self.messages - 1) * NANOSECONDS_PER_SECOND / (self.last_stamp - self.first_stamp)

    def add(self, events: Events, info=None) -> None:
        """Account one message (or chunk) of events and its info (None for ECD chunks)."""
        if info is not None:
            self.messages += 1
            self.first_stamp = info.stamp_ns if self.first_stamp is None else self.first_stamp
            self.last_stamp = info.stamp_ns
            self.sensor_sizes.add((info.width, info.height))
            encoding = getattr(info, "encoding", None)
            if encoding:
                self.encodings.add(encoding)
            triggers = getattr(info, "triggers", None)
            self.triggers += len(triggers) if triggers is not None else 0
        if not len(events):
            return
        on = int(np.count_nonzero(events.p > 0))
        self.on += on
        self.off += len(events) - on
        t_min, t_max = int(events.t.min()), int(events.t.max())
        self.first_t = t_min if self.first_t is None else min(self.first_t, t_min)
        self.last_t = t_max if self.last_t is None else max(self.last_t, t_max)
        self.max_x = max(self.max_x, int(events.x.max()))
        self.max_y = max(self.max_y, int(events.y.max()))
        if self._bin_origin is None:
            self._bin_origin = t_min
        if t_min < self._bin_origin:  # earlier than anything so far: shift the bins
            shift = -((t_min - self._bin_origin) // RATE_BIN_NS)
            self._bins = np.r_[np.zeros(shift, np.int64), self._bins]
            self._bin_origin -= shift * RATE_BIN_NS
        counts = np.bincount((events.t - self._bin_origin) // RATE_BIN_NS)
        if len(counts) > len(self._bins):
            self._bins = np.r_[self._bins, np.zeros(len(counts) - len(self._bins), np.int64)]
        self._bins[:len(counts)] += counts


@dataclass
class TfFrameSummary:
    """One edge of a bag's TF tree: ``child``'s pose in ``parent``, static (/tf_static) or
    dynamic (/tf: how many transforms, and their rate over their stamps' span)."""

    parent: str
    child: str
    static: bool
    transforms: int
    first_stamp: int
    last_stamp: int

    @property
    def rate_hz(self) -> float:
        """Transforms per second over the stamps' span (0 with fewer than 2, or static)."""
        if self.static or self.last_stamp == self.first_stamp:
            return 0.0
        return (self.transforms - 1) * NANOSECONDS_PER_SECOND / (self.last_stamp - self.first_stamp)


def summarize_tf(transforms) -> list[TfFrameSummary]:
    """The edges of a :class:`~focus_ros.sources.bags.BagTransforms`, in tree order (each frame
    after its parent: by depth below its root, then by name)."""
    from focus_ros.poses.transforms import frame_name

    edges: dict[tuple[str, str, bool], TfFrameSummary] = {}
    for static, group in ((True, transforms.static), (False, transforms.dynamic)):
        for transform in group:
            key = (frame_name(transform.parent), frame_name(transform.child), static)
            edge = edges.get(key)
            if edge is None:
                edges[key] = TfFrameSummary(*key, 1, transform.t_ns, transform.t_ns)
            else:
                edge.transforms += 1
                edge.first_stamp = min(edge.first_stamp, transform.t_ns)
                edge.last_stamp = max(edge.last_stamp, transform.t_ns)
    parents = {edge.child: edge.parent for edge in edges.values()}

    def depth(frame: str) -> int:
        seen = [frame]
        while seen[-1] in parents and parents[seen[-1]] not in seen:  # a loop ends the walk
            seen.append(parents[seen[-1]])
        return len(seen) - 1

    return sorted(edges.values(), key=lambda edge: (depth(edge.child), edge.parent, edge.child, not edge.static))


@dataclass
class SequenceSummary:
    """What :func:`summarize_sequence` found. topics: name -> (type, message count)."""

    path: Path
    kind: str  # "Event Camera Dataset folder", "ROS 1 bag", "ROS 2 bag (sqlite3)", ...
    topics: dict = field(default_factory=dict)
    streams: list = field(default_factory=list)
    camera_info: list = field(default_factory=list)
    imu: list = field(default_factory=list)
    poses: list = field(default_factory=list)
    tf_frames: list = field(default_factory=list)  # TfFrameSummary, in tree order


def summarize_sequence(path, progress=None) -> SequenceSummary:
    """Summarize a sequence (see the module docstring). progress: an optional tqdm-like
    object updated with the number of events read. Raises FileNotFoundError / ValueError
    (BagError, EventFileError) naming the file when it cannot be read."""
    from focus_ros.sources.sequence import ECD, ROSBAG1, sequence_format

    path = Path(path)
    kind = sequence_format(path)
    if kind == ECD:
        return _summarize_ecd(path, progress)
    from focus_ros.sources import bags

    with closing(bags.open_bag(path)) as reader:
        topics = {c.topic: (c.msgtype, 0) for c in reader.connections}
        for connection in reader.connections:
            msgtype, count = topics[connection.topic]
            topics[connection.topic] = (msgtype, count + int(connection.msgcount or 0))
    if kind == ROSBAG1:
        label = "ROS 1 bag"
    else:
        storage, named = bags.ros2_storage_identifier(path)
        label = f"ROS 2 bag ({storage}{'' if named else ', storage taken from the file names'})"
    summary = SequenceSummary(path, label, topics)
    for topic, (msgtype, _) in sorted(topics.items()):
        if msgtype in bags.EVENT_TYPES:
            stream = EventStreamSummary(topic, msgtype)
            for events, info in bags.iter_bag_events(path, topic):
                stream.add(events, info)
                if progress is not None:
                    progress.update(len(events))
            summary.streams.append(stream)
        elif msgtype in CAMERA_INFO_TYPES:
            summary.camera_info.append(topic)
        elif msgtype in IMU_TYPES:
            summary.imu.append(topic)
        elif msgtype in POSE_TYPES:
            summary.poses.append(topic)
    if bags.bag_has_tf({topic: msgtype for topic, (msgtype, _) in topics.items()}):
        summary.tf_frames = summarize_tf(bags.read_bag_transforms(path))
    return summary


def _summarize_ecd(path: Path, progress) -> SequenceSummary:
    from focus_ros.sources import ecd

    folder = path if path.is_dir() else path.parent
    events_file = path / ecd.EVENTS_FILE if path.is_dir() else path
    summary = SequenceSummary(path, "Event Camera Dataset folder")
    stream = EventStreamSummary(str(events_file.name))
    for chunk in ecd.iter_event_chunks(events_file):
        stream.add(chunk)
        if progress is not None:
            progress.update(len(chunk))
    summary.streams.append(stream)
    for name, found in ((ecd.CALIBRATION_FILE, summary.camera_info), (ecd.IMU_FILE, summary.imu),
                        (ecd.GROUNDTRUTH_FILE, summary.poses)):
        if (folder / name).is_file():
            found.append(name)
    return summary
