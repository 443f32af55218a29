"""Replaying a bag on ROS 2: its messages as ROS 2 CDR bytes in log-time order, ROS 1 messages
converted on the way (events with :mod:`focus_ros.codecs`, the others field by field through
rosbags), the legacy ``event_array_msgs/EventArray`` republished as the EventPacket it equals and
ROS 1's ``tf/tfMessage`` as the ``tf2_msgs/TFMessage`` it equals. The timing (when to publish) is
the replay node's.
"""

from __future__ import annotations

import dataclasses
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path

from focus_ros import codecs
from focus_ros.codecs.message_types import republished_ros2_type
from focus_ros.sources.bags.events import event_message_decoder
from focus_ros.sources.bags.opening import bag_topics, bag_version, one_line, open_bag, raw_messages
from focus_ros.sources.bags.topics import (
    CAMERA_INFO_TYPE, EVENT_ARRAY_TYPE, EVENT_TYPES, IMU_TYPE, LEGACY_TF_MESSAGE_TYPE, ODOMETRY_TYPE, POSE_TYPE,
    TF_MESSAGE_TYPE, TF_TYPES, typestore_with_event_types)
from focus_ros.sources.errors import BagError

__all__ = ["BagMessages", "open_bag_messages"]


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
            for connection, t_ns, raw in raw_messages(reader, connections, self.path, "(all)"):
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
                        msgtype = _ros2_type(msgtype)
                        message = _ros1_to_ros2(reader.deserialize(raw, connection.msgtype), store, msgtype)
                        raw = bytes(store.serialize_cdr(message, msgtype))
                    except Exception as error:
                        raise BagError(f"{self.path}: topic {topic}: cannot convert {msgtype} "
                                       f"to ROS 2: {one_line(error)}") from None
                yield topic, msgtype, int(t_ns), bytes(raw), count, first


def _ros2_type(msgtype: str) -> str:
    """The ROS 2 type a bag's message type is published as: the legacy event array as EventPacket,
    ROS 1's tf/tfMessage as tf2_msgs/TFMessage (the same fields), others as themselves."""
    return TF_MESSAGE_TYPE if msgtype == LEGACY_TF_MESSAGE_TYPE else republished_ros2_type(msgtype)


def _ros1_to_ros2(message, store, msgtype: str | None = None):
    """The ROS 2 message (of ``msgtype``, default the message's own type) equal to a deserialized
    ROS 1 message: same fields by name (ROS 1 upper-case names such as CameraInfo's D K R P matched
    case-insensitively); fields ROS 2 lacks (Header.seq) are dropped."""
    target = store.types[msgtype or message.__msgtype__]
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
    IMU, camera info, PoseStamped and Odometry poses, TF); otherwise exactly these (BagError when
    one is missing)."""
    path = Path(path)
    known = set(EVENT_TYPES) | {IMU_TYPE, CAMERA_INFO_TYPE, POSE_TYPE, ODOMETRY_TYPE, *TF_TYPES}
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
    selected = {t: _ros2_type(m) for t, m in selected.items()}
    if not selected:
        raise BagError(f"{path}: no topic of a known type ({', '.join(sorted(known))})")
    return BagMessages(path, selected)
