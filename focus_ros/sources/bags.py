"""ROS 1 and ROS 2 bags (through the pure-Python ``rosbags``): stream events, read and
write whole recordings.

- ROS 1: a ``.bag`` file (the Event Camera Dataset's own bags, or event_camera_msgs
  recorded on ROS 1).
- ROS 2: a bag folder with ``metadata.yaml`` and sqlite3 (``.db3``) or mcap storage (when
  the metadata names no storage, as some recorders leave it, it is taken from the files).

Events are never turned into per-event Python objects: their serialized bytes go through
:mod:`focus_ros.codecs`. The small messages (IMU, camera info, poses) use rosbags'
typestore. Default topics and types are those of the dataset's bags (docs/design.md, sections
2 "ROS 2 conventions" and 3 "The Event Camera Dataset"):

- ``/dvs/events``: ``dvs_msgs/msg/EventArray`` (or ``event_camera_msgs/msg/EventPacket``
  with encoding evt3, libcaer_cmp, libcaer or mono, or its legacy twin
  ``event_array_msgs/msg/EventArray``);
- ``/dvs/imu``: ``sensor_msgs/msg/Imu`` -> :class:`ImuSamples`;
- ``/dvs/camera_info``: ``sensor_msgs/msg/CameraInfo`` -> :class:`Calibration` (plumb bob);
- ``/optitrack/davis``: ``geometry_msgs/msg/PoseStamped`` -> :class:`Poses`;
- ``/dvs/depthmap``: ``sensor_msgs/msg/Image`` 32FC1 depth ground truth (simulator; see
  :class:`~focus_ros.sources.depth_maps.DepthGroundTruth`, :func:`depth_image_message`).

Event times are ROS time, by the rule of :class:`focus_ros.codecs.EventMessageDecoder`.
Failures (missing file, corrupt or truncated bag, missing topic, unknown type, bad
event message) raise :class:`BagError` naming the file and topic; events read before
the fault are yielded first.
"""

from __future__ import annotations

import dataclasses
import tempfile
from collections.abc import Iterator
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from rosbags.highlevel import AnyReader
from rosbags.rosbag1 import Writer as Ros1Writer
from rosbags.rosbag2 import StoragePlugin
from rosbags.rosbag2 import Writer as Ros2Writer
from rosbags.typesys import Stores, get_types_from_msg, get_typestore
import yaml

from focus_ros import codecs
from focus_ros.camera import Calibration
from focus_ros.codecs.message_types import (
    EVENT_ARRAY, EVENT_PACKET, LEGACY_EVENT_ARRAY, ROS2_EVENT_MESSAGE_TYPES, republished_ros2_type, ros2_message_type)
from focus_ros.events import NANOSECONDS_PER_SECOND, Events
from focus_ros.sources._bag_types import Ros2BagReader, topic_counts, topics_listing
from focus_ros.sources.depth_maps import DepthGroundTruth
from focus_ros.sources.errors import BagError
from focus_ros.sources.recording import ImuSamples, Poses, Recording, simulation_from_text, simulation_to_text

EVENT_ARRAY_TYPE = ros2_message_type(EVENT_ARRAY)
EVENT_PACKET_TYPE = ros2_message_type(EVENT_PACKET)
LEGACY_EVENT_ARRAY_TYPE = ros2_message_type(LEGACY_EVENT_ARRAY)
IMU_TYPE = "sensor_msgs/msg/Imu"
CAMERA_INFO_TYPE = "sensor_msgs/msg/CameraInfo"
POSE_TYPE = "geometry_msgs/msg/PoseStamped"
IMAGE_TYPE = "sensor_msgs/msg/Image"
STRING_TYPE = "std_msgs/msg/String"
#: depth ground truth (the simulator's): 32FC1 images on this topic
DEPTH_TOPIC = "/dvs/depthmap"
#: the event message types (ROS 2 full names), from the table of focus_ros.codecs.message_types
EVENT_TYPES = ROS2_EVENT_MESSAGE_TYPES


@dataclass(frozen=True)
class BagTopics:
    """Topic names used by :func:`read_bag` and :func:`write_bag` (dataset defaults)."""

    events: str = "/dvs/events"
    imu: str = "/dvs/imu"
    camera_info: str = "/dvs/camera_info"
    poses: str = "/optitrack/davis"
    depth: str = DEPTH_TOPIC
    #: the simulator's record (std_msgs/String, YAML; see recording.simulation_to_text): the bag is simulated
    simulation: str = "/focus_ros/simulation"


DEFAULT_TOPICS = BagTopics()

# Message definitions (as in interfaces/; ROS 1 variants use ROS 1 builtins)
_PACKET_FIELDS = ("uint32 height\nuint32 width\nuint64 seq\nuint64 time_base\nstring encoding\n"
                  "bool is_bigendian\nuint8[] events\n")
_ROS2_DEFINITIONS = {
    "dvs_msgs/msg/Event": "uint16 x\nuint16 y\nbuiltin_interfaces/Time ts\nbool polarity\n",
    EVENT_ARRAY_TYPE: "std_msgs/Header header\nuint32 height\nuint32 width\nEvent[] events\n",
    EVENT_PACKET_TYPE: "std_msgs/Header header\n" + _PACKET_FIELDS,
    LEGACY_EVENT_ARRAY_TYPE: "std_msgs/Header header\n" + _PACKET_FIELDS,
}
_ROS1_DEFINITIONS = {
    "dvs_msgs/msg/Event": "uint16 x\nuint16 y\ntime ts\nbool polarity\n",
    EVENT_ARRAY_TYPE: "Header header\nuint32 height\nuint32 width\nEvent[] events\n",
    EVENT_PACKET_TYPE: "Header header\n" + _PACKET_FIELDS,
    LEGACY_EVENT_ARRAY_TYPE: "Header header\n" + _PACKET_FIELDS,
}


def typestore_with_event_types(ros_version: int = 2):
    """A rosbags typestore (ROS 2 Humble or ROS 1 Noetic) with dvs_msgs and
    event_camera_msgs registered from their message text."""
    store = get_typestore(Stores.ROS2_HUMBLE if ros_version == 2 else Stores.ROS1_NOETIC)
    definitions = _ROS2_DEFINITIONS if ros_version == 2 else _ROS1_DEFINITIONS
    types = {}
    for name, text in definitions.items():
        types.update(get_types_from_msg(text, name))
    store.register(types)
    return store


# ----------------------------------------------------------------------------------------
# Opening


def bag_version(path) -> int:
    """1 for a ROS 1 ``.bag`` file, 2 for a ROS 2 bag folder (metadata.yaml); BagError else."""
    path = Path(path)
    if path.is_file() and path.suffix == ".bag":
        return 1
    if path.is_dir() and (path / "metadata.yaml").is_file():
        return 2
    if not path.exists():
        raise BagError(f"bag not found: {path}")
    if path.is_file() and path.suffix in _STORAGE_BY_SUFFIX:
        raise BagError(f"{path}: a ROS 2 bag's storage file; give the bag folder {path.parent} "
                       f"(with its metadata.yaml)")
    raise BagError(f"{path}: not a bag (expected a ROS 1 .bag file or a ROS 2 bag folder "
                   f"with metadata.yaml)")


#: ROS 2 storage plugin by storage file suffix
_STORAGE_BY_SUFFIX = {".mcap": "mcap", ".db3": "sqlite3"}


def ros2_storage_identifier(path) -> tuple[str, bool]:
    """(storage identifier, whether metadata.yaml names it) of a ROS 2 bag folder.

    Recorders sometimes leave ``storage_identifier`` empty (event_camera_py's test bag
    does): it is then taken from the storage files' suffix (``.mcap``, ``.db3``). Raises
    BagError when it can be neither read nor inferred.
    """
    path = Path(path)
    try:
        metadata = yaml.safe_load((path / "metadata.yaml").read_text())
        information = metadata["rosbag2_bagfile_information"]
    except Exception as error:
        raise BagError(f"{path}: unreadable metadata.yaml: {_one_line(error)}") from None
    named = str(information.get("storage_identifier") or "").strip()
    if named:
        return named, True
    files = [Path(name) for name in information.get("relative_file_paths") or []]
    if not files:
        files = [f for f in path.iterdir() if f.suffix in _STORAGE_BY_SUFFIX]
    suffixes = {f.suffix for f in files}
    if len(suffixes) != 1 or next(iter(suffixes)) not in _STORAGE_BY_SUFFIX:
        raise BagError(f"{path}: metadata.yaml names no storage_identifier and the storage "
                       f"files ({', '.join(sorted(str(f) for f in files)) or 'none'}) do not "
                       f"tell it (expected .mcap or .db3)")
    return _STORAGE_BY_SUFFIX[suffixes.pop()], False


def _with_storage_identifier(path: Path, storage: str) -> tempfile.TemporaryDirectory:
    """A temporary bag folder: metadata.yaml with ``storage`` filled in, the storage files
    linked (not copied). Removed when the returned object is cleaned up."""
    folder = tempfile.TemporaryDirectory(prefix="focus_ros_bag_")
    metadata = yaml.safe_load((path / "metadata.yaml").read_text())
    metadata["rosbag2_bagfile_information"]["storage_identifier"] = storage
    with open(Path(folder.name) / "metadata.yaml", "w") as stream:
        yaml.safe_dump(metadata, stream)
    for item in path.iterdir():
        if item.name != "metadata.yaml":
            (Path(folder.name) / item.name).symlink_to(item.resolve())
    return folder


def open_bag(path) -> AnyReader:
    """Open a ROS 1 or ROS 2 bag for reading (a rosbags AnyReader, already open: close it,
    e.g. ``with contextlib.closing(open_bag(path)) as reader``). Raises BagError for a
    missing, corrupt or truncated bag. A ROS 2 bag whose metadata names no storage
    identifier is opened with the one its files show (see :func:`ros2_storage_identifier`);
    one whose types are stored as ROS 2 IDL (rosbag2's ``ros2idl``) opens too."""
    path = Path(path)
    version = bag_version(path)
    open_path, temporary = path, None
    if version == 2:
        storage, named = ros2_storage_identifier(path)
        if not named:
            temporary = _with_storage_identifier(path, storage)
            open_path = Path(temporary.name)
    reader = AnyReader([open_path], default_typestore=typestore_with_event_types(2))
    if version == 2:  # definitions stored as ROS 2 IDL made readable (see focus_ros.sources._bag_types)
        reader.readers = [Ros2BagReader(open_path)]
    try:
        reader.open()
    except Exception as error:  # rosbags raises several types for damaged files
        if temporary is not None:
            temporary.cleanup()
        message = _one_line(error).replace(str(open_path), str(path))
        raise BagError(f"{path}: cannot open ROS {version} bag: {message}") from None
    reader.focus_ros_temporary_folder = temporary  # lives as long as the reader
    return reader


def _one_line(error: Exception) -> str:
    text = " ".join(str(error).split()) or type(error).__name__
    return text[:300]


def bag_topics(reader: AnyReader) -> dict[str, str]:
    """topic -> ROS 2 style message type ('package/msg/Name') of an open bag."""
    return {connection.topic: connection.msgtype for connection in reader.connections}


def _connections(reader: AnyReader, path: Path, topic: str, expected_types=None):
    found = [c for c in reader.connections if c.topic == topic]
    if not found:
        raise BagError(f"{path}: topic {topic} not in the bag (topics: "
                       f"{', '.join(sorted(bag_topics(reader))) or 'none'})")
    if expected_types is not None:
        for connection in found:
            if connection.msgtype not in expected_types:
                raise BagError(f"{path}: topic {topic} has type {connection.msgtype}, "
                               f"expected {' or '.join(expected_types)}")
    return found


def find_event_topic(reader: AnyReader, path) -> str:
    """The one topic with an event message type; BagError when there is none or several."""
    topics = sorted({c.topic for c in reader.connections if c.msgtype in EVENT_TYPES})
    if not topics:
        raise BagError(f"{path}: the bag holds no event messages (no topic of type {' or '.join(EVENT_TYPES)}); "
                       f"it holds {topics_listing(topic_counts(reader.connections))}")
    if len(topics) != 1:
        raise BagError(f"{path}: expected one event topic ({' or '.join(EVENT_TYPES)}), found "
                       f"{len(topics)}{': ' + ', '.join(topics) if topics else ''}; give the topic")
    return topics[0]


def _iter_raw(reader: AnyReader, connections, path: Path, topic: str):
    """(connection, log time ns, raw bytes), turning any reader fault into BagError."""
    iterator = reader.messages(connections=connections)
    while True:
        try:
            item = next(iterator)
        except StopIteration:
            return
        except Exception as error:
            raise BagError(f"{path}: topic {topic}: corrupt or truncated bag: "
                           f"{_one_line(error)}") from None
        yield item


# ----------------------------------------------------------------------------------------
# Events


def event_message_decoder(msgtype: str, ros_version: int) -> codecs.EventMessageDecoder:
    """The stream decoder of one bag topic (ROS time, as the node's; see focus_ros.codecs)."""
    return codecs.EventMessageDecoder(msgtype, ros1=ros_version == 1)


def iter_bag_events(path, topic: str | None = None) -> Iterator[tuple[Events, object]]:
    """Stream the event messages of a bag as (Events, info) pairs, one per message, in
    log-time order. info is an EventArrayInfo or EventPacketInfo.

    topic None: the one topic of an event type (dvs_msgs/EventArray,
    event_camera_msgs/EventPacket, event_array_msgs/EventArray). Event times are ROS time
    (:class:`focus_ros.codecs.EventMessageDecoder`: the drivers' host-clock stamps as
    they are, a camera clock such as evt3's moved onto the first packet's header stamp).
    Raises BagError (file, topic, what) after yielding the events read before the fault.
    """
    path = Path(path)
    version = bag_version(path)
    try:
        reader = open_bag(path)
    except BagError as error:
        if version != 1:
            raise
        yield from _salvage_ros1_events(path, topic, error)
        return
    with closing(reader):
        if topic is None:
            topic = find_event_topic(reader, path)
        connections = _connections(reader, path, topic, EVENT_TYPES)
        decoders = {}  # one stream decoder per topic and type
        for connection, _, raw in _iter_raw(reader, connections, path, topic):
            decode = decoders.get(connection.msgtype)
            if decode is None:
                decode = decoders[connection.msgtype] = event_message_decoder(connection.msgtype, version)
            try:
                events, info = decode(raw)
            except codecs.EventDecodeError as error:
                raise BagError(f"{path}: topic {topic}: {error}") from None
            yield events, info


def _salvage_ros1_events(path: Path, topic: str | None, open_error: BagError):
    """The events of a ROS 1 bag rosbags cannot open (cut short, no index), read record by
    record up to the damage; then BagError saying how far it got and why it stopped."""
    from focus_ros.sources.ros1_salvage import Ros1Scan

    scan = Ros1Scan(path)
    count = 0
    decode = None
    for message_topic, msgtype, _, raw in scan.messages():
        if (codecs.short_message_type(msgtype) not in codecs.EVENT_MESSAGE_TYPES
                or (topic is not None and message_topic != topic)):
            continue
        if topic is None:
            topic = message_topic  # the first event topic found
        if decode is None:
            decode = event_message_decoder(msgtype, 1)
        try:
            events, info = decode(raw)
        except codecs.EventDecodeError as error:
            raise BagError(f"{path}: topic {topic}: {error} (after {count} messages)") from None
        count += 1
        yield events, info
    reason = scan.fault or "no index"
    raise BagError(f"{path}: damaged ROS 1 bag ({open_error}); read {count} event messages "
                   f"record by record, stopped at {reason}")


# ----------------------------------------------------------------------------------------
# Whole recordings


def _stamp_ns(header) -> int:
    return int(header.stamp.sec) * NANOSECONDS_PER_SECOND + int(header.stamp.nanosec)


def _deserialized(reader: AnyReader, path: Path, topic: str, msgtype: str):
    """Deserialized messages of one topic (BagError when absent or of another type)."""
    connections = _connections(reader, path, topic, (msgtype,))
    for connection, _, raw in _iter_raw(reader, connections, path, topic):
        try:
            yield reader.deserialize(raw, connection.msgtype)
        except Exception as error:
            raise BagError(f"{path}: topic {topic}: cannot decode {msgtype}: "
                           f"{_one_line(error)}") from None


def _read_imu(reader, path, topic) -> ImuSamples:
    t, gyro, accel = [], [], []
    for message in _deserialized(reader, path, topic, IMU_TYPE):
        t.append(_stamp_ns(message.header))
        w, a = message.angular_velocity, message.linear_acceleration
        gyro.append((w.x, w.y, w.z))
        accel.append((a.x, a.y, a.z))
    return ImuSamples(np.array(t, np.int64), np.array(gyro, float).reshape(-1, 3),
                      np.array(accel, float).reshape(-1, 3))


def _read_poses(reader, path, topic) -> Poses:
    t, position, orientation = [], [], []
    for message in _deserialized(reader, path, topic, POSE_TYPE):
        t.append(_stamp_ns(message.header))
        p, q = message.pose.position, message.pose.orientation
        position.append((p.x, p.y, p.z))
        orientation.append((q.x, q.y, q.z, q.w))
    return Poses(np.array(t, np.int64), np.array(position, float).reshape(-1, 3),
                 np.array(orientation, float).reshape(-1, 4))


ODOMETRY_TYPE = "nav_msgs/msg/Odometry"


def _read_odometry_poses(reader, path, topic) -> Poses:
    t, position, orientation = [], [], []
    for message in _deserialized(reader, path, topic, ODOMETRY_TYPE):
        t.append(_stamp_ns(message.header))
        p, q = message.pose.pose.position, message.pose.pose.orientation
        position.append((p.x, p.y, p.z))
        orientation.append((q.x, q.y, q.z, q.w))
    return Poses(np.array(t, np.int64), np.array(position, float).reshape(-1, 3),
                 np.array(orientation, float).reshape(-1, 4))


def read_bag_poses(path, topic: str | None = None) -> tuple[Poses, str]:
    """(poses, topic) from a bag's ``geometry_msgs/PoseStamped`` or ``nav_msgs/Odometry``
    topic (header stamps; Odometry's pose.pose). ``topic`` None: the one topic of either
    type. BagError naming the file when there is none, several, or the topic is of
    another type."""
    path = Path(path)
    readers = {POSE_TYPE: _read_poses, ODOMETRY_TYPE: _read_odometry_poses}
    with closing(open_bag(path)) as reader:
        available = bag_topics(reader)
        if topic is None:
            candidates = sorted(t for t, m in available.items() if m in readers)
            if not candidates:
                raise BagError(f"{path}: no poses (no geometry_msgs/PoseStamped or nav_msgs/Odometry topic)")
            if len(candidates) > 1:
                raise BagError(f"{path}: several pose topics ({', '.join(candidates)}): choose one")
            topic = candidates[0]
        if topic not in available:
            raise BagError(f"{path}: pose topic {topic} not in the bag")
        if available[topic] not in readers:
            raise BagError(f"{path}: topic {topic} is {available[topic]}, not PoseStamped or Odometry")
        return readers[available[topic]](reader, path, topic), topic


def _read_calibration(reader, path, topic) -> Calibration | None:
    for message in _deserialized(reader, path, topic, CAMERA_INFO_TYPE):
        return calibration_from_camera_info(message, f"{path}: topic {topic}")
    return None


# ----------------------------------------------------------------------------------------
# depth ground truth: 32FC1 sensor_msgs/Image messages (REP-118), header stamp = the map's time

DEPTH_ENCODING = "32FC1"


def depth_image_message(store, t_ns: int, depth_m: np.ndarray, frame_id: str, ros_version: int = 2):
    """A sensor_msgs/Image (32FC1, little endian, REP-118) of a depth map, for rosbags' typestore."""
    depth = np.ascontiguousarray(depth_m, dtype="<f4")
    height, width = depth.shape
    return store.types[IMAGE_TYPE](header=_header(store, t_ns, frame_id, ros_version), height=height,
                                   width=width, encoding=DEPTH_ENCODING, is_bigendian=0, step=4 * width,
                                   data=depth.view(np.uint8).ravel())


def depth_from_image_message(message, where: str = DEPTH_TOPIC) -> tuple[int, np.ndarray]:
    """(t ns, depth (height, width) float32 m) from a 32FC1 sensor_msgs/Image; ValueError naming
    ``where`` for another encoding or a size that does not add up."""
    if message.encoding != DEPTH_ENCODING:
        raise ValueError(f"{where}: depth images must be {DEPTH_ENCODING}, got {message.encoding!r}")
    height, width, step = int(message.height), int(message.width), int(message.step)
    data = np.asarray(message.data, np.uint8)
    if step < 4 * width or len(data) < step * height:
        raise ValueError(f"{where}: image of {width}x{height} px with step {step} needs {step * height} "
                         f"bytes, got {len(data)}")
    rows = data[:step * height].reshape(height, step)[:, :4 * width]
    depth = np.ascontiguousarray(rows).view(">f4" if message.is_bigendian else "<f4").reshape(height, width)
    stamp = message.header.stamp
    return int(stamp.sec) * 1_000_000_000 + int(stamp.nanosec), depth.astype(np.float32)


def _read_depth(reader, path, topic):
    times, maps = [], []
    for message in _deserialized(reader, path, topic, IMAGE_TYPE):
        try:
            t_ns, depth = depth_from_image_message(message, f"{path}: topic {topic}")
        except ValueError as error:
            raise BagError(str(error)) from None
        times.append(t_ns)
        maps.append(depth)
    if not maps:
        return None
    return DepthGroundTruth(np.array(times, np.int64), np.stack(maps))


def read_bag_depth(path, topic: str = DEFAULT_TOPICS.depth):
    """The bag's depth ground truth (:class:`~focus_ros.sources.depth_maps.DepthGroundTruth`
    from 32FC1 images on ``topic``), or None when the topic is absent."""
    path = Path(path)
    with closing(open_bag(path)) as reader:
        if topic not in bag_topics(reader):
            return None
        return _read_depth(reader, path, topic)


def read_bag_calibration(path, topic: str = DEFAULT_TOPICS.camera_info) -> Calibration | None:
    """The calibration in a bag's first camera_info on ``topic`` (None when the topic is absent)."""
    path = Path(path)
    with closing(open_bag(path)) as reader:
        if topic not in bag_topics(reader):
            return None
        return _read_calibration(reader, path, topic)


def calibration_from_camera_info(message, where: str = "camera_info") -> Calibration:
    """Calibration from a sensor_msgs/CameraInfo (see Calibration.from_camera_info_message);
    BagError naming ``where`` when it is unusable."""
    try:
        return Calibration.from_camera_info_message(message)
    except ValueError as error:
        raise BagError(f"{where}: {error}") from None


def read_bag(path, topics: BagTopics = DEFAULT_TOPICS, event_topic: str | None = None,
             require: tuple[str, ...] = ()) -> Recording:
    """Read a whole bag into a Recording: events (from ``event_topic``, default
    ``topics.events`` when present, else the one event topic), IMU, camera info and poses
    from their topics when present. ``require``: names among ("imu", "camera_info",
    "poses") that must be present (BagError otherwise)."""
    path = Path(path)
    with closing(open_bag(path)) as reader:
        available = bag_topics(reader)
        for name in require:
            if getattr(topics, name) not in available:
                raise BagError(f"{path}: topic {getattr(topics, name)} not in the bag")
        imu = _read_imu(reader, path, topics.imu) if topics.imu in available else None
        poses = _read_poses(reader, path, topics.poses) if topics.poses in available else None
        calibration = (_read_calibration(reader, path, topics.camera_info)
                       if topics.camera_info in available else None)
        depth = _read_depth(reader, path, topics.depth) if topics.depth in available else None
        simulation = (_read_simulation(reader, path, topics.simulation)
                      if available.get(topics.simulation) == STRING_TYPE else None)
        if event_topic is None and available.get(topics.events) in EVENT_TYPES:
            event_topic = topics.events
    events = Events.concatenate([events for events, _ in iter_bag_events(path, event_topic)])
    return Recording(events=events, calibration=calibration, imu=imu, poses=poses,
                     depth_times=depth.t if depth is not None else None,
                     depth_maps=depth.depth_m if depth is not None else None, simulation=simulation)


def _read_simulation(reader, path, topic) -> dict | None:
    """The simulator's record from its topic's first message (see write_bag), or None."""
    for message in _deserialized(reader, path, topic, STRING_TYPE):
        return simulation_from_text(message.data, f"{path}: {topic}")
    return None


# ----------------------------------------------------------------------------------------
# Writing


def _time(store, t_ns: int):
    seconds, nanoseconds = divmod(int(t_ns), NANOSECONDS_PER_SECOND)
    return store.types["builtin_interfaces/msg/Time"](sec=seconds, nanosec=nanoseconds)


def _header(store, t_ns: int, frame_id: str, ros_version: int):
    Header = store.types["std_msgs/msg/Header"]
    if ros_version == 1:
        return Header(seq=0, stamp=_time(store, t_ns), frame_id=frame_id)
    return Header(stamp=_time(store, t_ns), frame_id=frame_id)


def _imu_message(store, t_ns, gyro, accel, frame_id, ros_version):
    types = store.types
    Vector3 = types["geometry_msgs/msg/Vector3"]
    unknown = np.zeros(9)
    unknown[0] = -1.0  # REP 145: orientation not estimated
    return types[IMU_TYPE](
        header=_header(store, t_ns, frame_id, ros_version),
        orientation=types["geometry_msgs/msg/Quaternion"](x=0.0, y=0.0, z=0.0, w=1.0),
        orientation_covariance=unknown, angular_velocity=Vector3(*map(float, gyro)),
        angular_velocity_covariance=np.zeros(9), linear_acceleration=Vector3(*map(float, accel)),
        linear_acceleration_covariance=np.zeros(9))


def _pose_message(store, t_ns, position, orientation, frame_id, ros_version):
    types = store.types
    pose = types["geometry_msgs/msg/Pose"](
        position=types["geometry_msgs/msg/Point"](*map(float, position)),
        orientation=types["geometry_msgs/msg/Quaternion"](*map(float, orientation)))
    return types[POSE_TYPE](header=_header(store, t_ns, frame_id, ros_version), pose=pose)


def _camera_info_message(store, t_ns, calibration: Calibration, frame_id, ros_version):
    c = calibration
    k = np.array([c.fx, 0, c.cx, 0, c.fy, c.cy, 0, 0, 1], float)
    p = np.array([c.fx, 0, c.cx, 0, 0, c.fy, c.cy, 0, 0, 0, 1, 0], float)
    roi = store.types["sensor_msgs/msg/RegionOfInterest"](
        x_offset=0, y_offset=0, height=0, width=0, do_rectify=False)
    fields = dict(header=_header(store, t_ns, frame_id, ros_version), height=c.height,
                  width=c.width, distortion_model="plumb_bob",
                  binning_x=0, binning_y=0, roi=roi)
    if ros_version == 1:  # ROS 1 field names are upper case
        fields.update(D=np.array(c.distortion, float), K=k, R=np.eye(3).ravel(), P=p)
    else:
        fields.update(d=np.array(c.distortion, float), k=k, r=np.eye(3).ravel(), p=p)
    return store.types[CAMERA_INFO_TYPE](**fields)


def _event_messages(events: Events, calibration: Calibration | None, events_per_message: int,
                    ros_version: int, frame_id: str, encoding: str | None):
    """(log time ns, serialized bytes) of the event messages."""
    width = calibration.width if calibration else int(events.x.max()) + 1 if len(events) else 240
    height = calibration.height if calibration else int(events.y.max()) + 1 if len(events) else 180
    sensor_origin = (int(events.t[0]) // 1000) * 1000 if len(events) else 0
    if sensor_origin <= codecs.HOST_CLOCK_TOLERANCE_NS:
        # readers take a camera clock this close to its header stamps for ROS time (focus_ros.codecs
        # EventMessageDecoder): let it read ROS time then, or every event would move by the origin
        sensor_origin = 0
    for index, start in enumerate(range(0, len(events), events_per_message)):
        chunk = events[start:start + events_per_message]
        if encoding is None:
            if ros_version == 1:
                raw = codecs.encode_event_array_ros1(chunk, height, width, frame_id, seq=index)
            else:
                raw = codecs.encode_event_array(chunk, height, width, frame_id)
        else:
            if encoding != codecs.ENCODING_MONO:  # microsecond clocks: 1 us (floor)
                chunk = Events(chunk.x, chunk.y, chunk.t // 1000 * 1000, chunk.p)
            raw = codecs.encode_event_packet(chunk, height, width, encoding, frame_id, seq=index,
                                                sensor_time_offset_ns=sensor_origin,
                                                ros1=ros_version == 1)
        yield int(chunk.t[-1]), raw


def write_bag(path, recording: Recording, version: int = 2, storage: str = "mcap",
              topics: BagTopics = DEFAULT_TOPICS, events_per_message: int = 30_000,
              frame_id: str = "dvs", event_encoding: str | None = None) -> None:
    """Write a Recording as a bag with the dataset's topics and types.

    version 1: a ROS 1 ``.bag`` file; version 2: a ROS 2 bag folder with ``storage``
    "mcap" or "sqlite3". Events go as ``dvs_msgs/EventArray`` messages of
    ``events_per_message`` events serialized with :mod:`focus_ros.codecs` (or
    ``event_camera_msgs/EventPacket`` with ``event_encoding`` "evt3", "libcaer_cmp",
    "libcaer" or "mono"; all but mono have 1 us resolution, so event times are rounded
    down to whole microseconds; the camera clock starts at the first event's microsecond);
    log time = the message's last event time, header stamp = its first. IMU, camera info
    (once, at the first event), poses and depth maps (32FC1 images) go through rosbags' serializer. Refuses to
    overwrite an existing path (ValueError).
    """
    path = Path(path)
    if version not in (1, 2):
        raise ValueError(f"bag version must be 1 or 2, got {version}")
    if storage not in ("mcap", "sqlite3"):
        raise ValueError(f"bag storage must be 'mcap' or 'sqlite3', got {storage!r}")
    if event_encoding is not None and event_encoding not in codecs.SUPPORTED_PACKET_ENCODINGS:
        raise ValueError(f"unknown event encoding {event_encoding!r} (supported: "
                         f"{', '.join(codecs.SUPPORTED_PACKET_ENCODINGS)})")
    if version == 1 and path.suffix != ".bag":
        raise ValueError(f"{path}: a ROS 1 bag file name must end in .bag")
    if events_per_message < 1:
        raise ValueError(f"events_per_message must be at least 1, got {events_per_message}")
    if path.exists():
        raise ValueError(f"{path} already exists: refusing to overwrite")
    store = typestore_with_event_types(version)
    event_type = EVENT_ARRAY_TYPE if event_encoding is None else EVENT_PACKET_TYPE
    events = recording.events

    # (log time, topic, serialized bytes), merged in time order
    records: list[tuple[int, str, bytes]] = []
    for t_ns, raw in _event_messages(events, recording.calibration, events_per_message, version,
                                     frame_id, event_encoding):
        records.append((t_ns, topics.events, raw))
    serialize = store.serialize_ros1 if version == 1 else store.serialize_cdr

    def add(t_ns, topic, message, msgtype):
        records.append((int(t_ns), topic, bytes(serialize(message, msgtype))))

    if recording.calibration is not None:
        t0 = int(events.t[0]) if len(events) else 0
        add(t0, topics.camera_info,
            _camera_info_message(store, t0, recording.calibration, frame_id, version),
            CAMERA_INFO_TYPE)
    if recording.imu is not None:
        imu = recording.imu
        for t_ns, gyro, accel in zip(imu.t.tolist(), imu.angular_velocity, imu.linear_acceleration):
            add(t_ns, topics.imu, _imu_message(store, t_ns, gyro, accel, frame_id, version), IMU_TYPE)
    if recording.poses is not None:
        poses = recording.poses
        for t_ns, position, orientation in zip(poses.t.tolist(), poses.position, poses.orientation):
            add(t_ns, topics.poses,
                _pose_message(store, t_ns, position, orientation, "world", version), POSE_TYPE)
    if recording.depth_maps is not None:
        for t_ns, depth in zip(recording.depth_times.tolist(), recording.depth_maps):
            add(t_ns, topics.depth, depth_image_message(store, t_ns, depth, frame_id, version), IMAGE_TYPE)
    if recording.simulation is not None:
        t0 = int(events.t[0]) if len(events) else 0
        add(t0, topics.simulation, store.types[STRING_TYPE](data=simulation_to_text(recording.simulation)),
            STRING_TYPE)
    records.sort(key=lambda record: record[0])

    types = {topics.events: event_type, topics.camera_info: CAMERA_INFO_TYPE,
             topics.imu: IMU_TYPE, topics.poses: POSE_TYPE, topics.depth: IMAGE_TYPE, topics.simulation: STRING_TYPE}
    used = {topic for _, topic, _ in records}
    if version == 1:
        writer = Ros1Writer(path)
    else:
        plugin = StoragePlugin.MCAP if storage == "mcap" else StoragePlugin.SQLITE3
        writer = Ros2Writer(path, version=9 if storage == "mcap" else 8, storage_plugin=plugin)
    with writer:
        connections = {topic: writer.add_connection(topic, types[topic], typestore=store)
                       for topic in types if topic in used}
        for t_ns, topic, raw in records:
            writer.write(connections[topic], t_ns, raw)


# ----------------------------------------------------------------------------------------
# Replay: every message as ROS 2 CDR bytes


@dataclass
class BagMessages:
    """A bag's messages for republishing on ROS 2 (see :func:`open_bag_messages`).

    topics: topic -> ROS 2 message type. :meth:`messages` yields
    ``(topic, msgtype, log time ns, CDR bytes, event count, first event time ns)``
    (event count 0 and first event time -1 for non-event messages); ROS 1 messages are
    converted to CDR (events with :mod:`focus_ros.codecs`, others with rosbags).
    """

    path: Path
    topics: dict[str, str] = field(default_factory=dict)

    def messages(self):
        store = typestore_with_event_types(2)
        with closing(open_bag(self.path)) as reader:
            version = bag_version(self.path)
            connections = [c for c in reader.connections if c.topic in self.topics]
            decoders = {}  # (topic, type) -> stream decoder: times as the node will see them
            for connection, t_ns, raw in _iter_raw(reader, connections, self.path, "(all)"):
                topic, msgtype = connection.topic, connection.msgtype
                count, first = 0, -1
                if msgtype in EVENT_TYPES:
                    decode = decoders.get((topic, msgtype))
                    if decode is None:
                        decode = decoders[topic, msgtype] = event_message_decoder(msgtype, version)
                    try:
                        events, info = decode(raw)
                        if version == 1 and msgtype == EVENT_ARRAY_TYPE:
                            recorded, _ = codecs.decode_event_array_ros1(raw)  # as stored
                            raw = codecs.encode_event_array(recorded, info.height, info.width,
                                                               info.frame_id, info.stamp_ns)
                        elif version == 1:
                            raw = codecs.event_packet_ros1_to_cdr(raw)
                    except codecs.EventDecodeError as error:
                        raise BagError(f"{self.path}: topic {topic}: {error}") from None
                    count = len(events)
                    first = int(events.t[0]) if count else -1
                    msgtype = republished_ros2_type(msgtype)
                elif version == 1:
                    try:
                        message = _ros1_to_ros2(reader.deserialize(raw, msgtype), store)
                        raw = bytes(store.serialize_cdr(message, msgtype))
                    except Exception as error:
                        raise BagError(f"{self.path}: topic {topic}: cannot convert {msgtype} "
                                       f"to ROS 2: {_one_line(error)}") from None
                yield topic, msgtype, int(t_ns), bytes(raw), count, first


def _ros1_to_ros2(message, store):
    """The ROS 2 message equal to a deserialized ROS 1 message: same fields by name (ROS 1
    upper-case names such as CameraInfo's D K R P matched case-insensitively); fields
    ROS 2 lacks (Header.seq) are dropped."""
    target = store.types[message.__msgtype__]
    values = {}
    for target_field in dataclasses.fields(target):
        name = target_field.name
        if name.startswith("__"):
            continue
        value = getattr(message, name) if hasattr(message, name) else getattr(message, name.upper())
        if hasattr(value, "__msgtype__"):
            value = _ros1_to_ros2(value, store)
        elif isinstance(value, list):
            value = [_ros1_to_ros2(v, store) if hasattr(v, "__msgtype__") else v for v in value]
        values[name] = value
    return target(**values)


def open_bag_messages(path, topics: list[str] | None = None) -> BagMessages:
    """Prepare a bag for replay: ``topics`` None = every topic of a known type (events,
    IMU, camera info, PoseStamped and Odometry poses); otherwise exactly these (BagError when one is missing)."""
    path = Path(path)
    known = set(EVENT_TYPES) | {IMU_TYPE, CAMERA_INFO_TYPE, POSE_TYPE, ODOMETRY_TYPE}
    with closing(open_bag(path)) as reader:
        available = bag_topics(reader)
    if topics is None:
        selected = {t: m for t, m in available.items() if m in known}
    else:
        missing = [t for t in topics if t not in available]
        if missing:
            raise BagError(f"{path}: topic {', '.join(missing)} not in the bag (topics: "
                           f"{', '.join(sorted(available)) or 'none'})")
        selected = {t: available[t] for t in topics}
    # the legacy event_array_msgs/EventArray goes out as the EventPacket it equals field for field
    selected = {t: republished_ros2_type(m) for t, m in selected.items()}
    if not selected:
        raise BagError(f"{path}: no topic of a known type ({', '.join(sorted(known))})")
    return BagMessages(path, selected)
