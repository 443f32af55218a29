"""Opening a bag: which kind it is (a ROS 1 ``.bag`` file or a ROS 2 bag folder with
``metadata.yaml`` and sqlite3 or mcap storage), the rosbags reader over it, its topics, and its
messages as raw bytes with every reader fault turned into a one-line :class:`BagError`.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from rosbags.highlevel import AnyReader
import yaml

from focus_ros.sources.bags.ros2_idl import Ros2BagReader
from focus_ros.sources.bags.topics import EVENT_TYPES, typestore_with_event_types
from focus_ros.sources.errors import BagError

__all__ = ["bag_topics", "bag_version", "deserialized_messages", "find_event_topic", "one_line", "open_bag",
           "raw_messages",
           "ros2_storage_identifier", "topic_connections", "topic_counts", "topics_listing"]


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
        raise BagError(f"{path}: unreadable metadata.yaml: {one_line(error)}") from None
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
    if version == 2:  # definitions stored as ROS 2 IDL made readable (see focus_ros.sources.bags.ros2_idl)
        reader.readers = [Ros2BagReader(open_path)]
    try:
        reader.open()
    except Exception as error:  # rosbags raises several types for damaged files
        if temporary is not None:
            temporary.cleanup()
        message = one_line(error).replace(str(open_path), str(path))
        raise BagError(f"{path}: cannot open ROS {version} bag: {message}") from None
    reader.focus_ros_temporary_folder = temporary  # lives as long as the reader
    return reader


def one_line(error: Exception) -> str:
    """An error's message on one line of at most 300 characters (its type name when empty)."""
    text = " ".join(str(error).split()) or type(error).__name__
    return text[:300]


def bag_topics(reader: AnyReader) -> dict[str, str]:
    """topic -> ROS 2 style message type ('package/msg/Name') of an open bag."""
    return {connection.topic: connection.msgtype for connection in reader.connections}


def topic_counts(connections) -> dict[str, tuple[str, int]]:
    """topic -> (message type, message count) of a bag's connections (rosbags Connection)."""
    topics: dict[str, tuple[str, int]] = {}
    for connection in connections:
        _, count = topics.get(connection.topic, (None, 0))
        topics[connection.topic] = (connection.msgtype, count + int(connection.msgcount or 0))
    return topics


def topics_listing(topics: dict[str, tuple[str, int]]) -> str:
    """'topic (type, N messages), ...' sorted by topic, of :func:`topic_counts`' mapping;
    'no topics' for an empty bag."""
    if not topics:
        return "no topics"
    return ", ".join(f"{topic} ({msgtype}, {count} message{'' if count == 1 else 's'})"
                     for topic, (msgtype, count) in sorted(topics.items()))


def topic_connections(reader: AnyReader, path: Path, topic: str, expected_types=None):
    """The reader's connections of ``topic``; BagError when it is absent or of a type not in
    ``expected_types`` (None: any type)."""
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


def raw_messages(reader: AnyReader, connections, path: Path, topic: str):
    """(connection, log time ns, raw bytes), turning any reader fault into BagError."""
    iterator = reader.messages(connections=connections)
    while True:
        try:
            item = next(iterator)
        except StopIteration:
            return
        except Exception as error:
            raise BagError(f"{path}: topic {topic}: corrupt or truncated bag: "
                           f"{one_line(error)}") from None
        yield item


def deserialized_messages(reader: AnyReader, path: Path, topic: str, expected_types):
    """The messages of one topic deserialized by rosbags' typestore, in log-time order (for the
    small messages; events go through focus_ros.codecs). BagError when the topic is absent, of a
    type not in ``expected_types``, or a message cannot be decoded."""
    connections = topic_connections(reader, path, topic, expected_types)
    for connection, _, raw in raw_messages(reader, connections, path, topic):
        try:
            yield reader.deserialize(raw, connection.msgtype)
        except Exception as error:
            raise BagError(f"{path}: topic {topic}: cannot decode {connection.msgtype}: "
                           f"{one_line(error)}") from None
