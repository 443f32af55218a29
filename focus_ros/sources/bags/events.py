"""Streaming a bag's event messages as :class:`~focus_ros.events.Events`, one per message.

Events are never turned into per-event Python objects: their serialized bytes go through
:mod:`focus_ros.codecs`. Event times are ROS time, by the rule of
:class:`focus_ros.codecs.EventMessageDecoder`. A ROS 1 bag rosbags cannot open (cut short, no
index) still gives the events recorded before the damage (:mod:`.ros1_salvage`).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

from focus_ros import codecs
from focus_ros.events import Events
from focus_ros.sources.bags.opening import bag_version, find_event_topic, open_bag, raw_messages, topic_connections
from focus_ros.sources.bags.topics import EVENT_TYPES
from focus_ros.sources.errors import BagError

__all__ = ["event_frame_id", "event_message_decoder", "iter_bag_events"]


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
        connections = topic_connections(reader, path, topic, EVENT_TYPES)
        decoders = {}  # one stream decoder per topic and type
        for connection, _, raw in raw_messages(reader, connections, path, topic):
            decode = decoders.get(connection.msgtype)
            if decode is None:
                decode = decoders[connection.msgtype] = event_message_decoder(connection.msgtype, version)
            try:
                events, info = decode(raw)
            except codecs.EventDecodeError as error:
                raise BagError(f"{path}: topic {topic}: {error}") from None
            yield events, info


def event_frame_id(path, topic: str | None = None) -> str:
    """The frame of a bag's events: the header frame_id of its first event message (the camera's
    optical frame in the robot's TF tree; '' when the message names none or there is no message).
    BagError as :func:`iter_bag_events`."""
    messages = iter_bag_events(path, topic)
    try:
        for _, info in messages:
            return info.frame_id
        return ""
    finally:
        messages.close()  # closes the bag


def _salvage_ros1_events(path: Path, topic: str | None, open_error: BagError):
    """The events of a ROS 1 bag rosbags cannot open (cut short, no index), read record by
    record up to the damage; then BagError saying how far it got and why it stopped."""
    from focus_ros.sources.bags.ros1_salvage import Ros1Scan

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
