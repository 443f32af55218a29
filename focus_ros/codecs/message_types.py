"""The event message types focus_ros reads: one table, and every list derived from it.

Names come in two spellings: short ``package/Name`` (ROS 1, the node's
``event_message_type`` parameter) and ROS 2 full ``package/msg/Name`` (ROS 2 bags,
rosbags' typestore, rclpy). Each type says:

- ``packet``: it has the EventPacket fields (header, height, width, seq, time_base,
  encoding, is_bigendian, uint8[] events) rather than ``dvs_msgs`` Event records;
- ``subscribable``: a ROS 2 node can subscribe to it (its interface package is built
  from ``interfaces/``; the legacy ``event_array_msgs/EventArray`` has none here);
- ``republished_as``: the type a ROS 2 replay publishes it as (the legacy type goes out
  as the ``event_camera_msgs/EventPacket`` it equals field for field).

A new event message type is one row of :data:`EVENT_MESSAGE_TABLE`.
"""

from __future__ import annotations

from dataclasses import dataclass

EVENT_ARRAY = "dvs_msgs/EventArray"
EVENT_PACKET = "event_camera_msgs/EventPacket"
LEGACY_EVENT_ARRAY = "event_array_msgs/EventArray"


def short_message_type(message_type: str) -> str:
    """'package/msg/Name' or 'package/Name' -> 'package/Name'."""
    parts = message_type.split("/")
    return f"{parts[0]}/{parts[-1]}" if len(parts) == 3 and parts[1] == "msg" else message_type


def ros2_message_type(message_type: str) -> str:
    """'package/Name' or 'package/msg/Name' -> 'package/msg/Name'."""
    package, name = short_message_type(message_type).split("/")
    return f"{package}/msg/{name}"


@dataclass(frozen=True)
class EventMessageType:
    """One event message type (see the module docstring): its short name, whether it has
    the EventPacket fields, whether a ROS 2 node can subscribe to it, and the short name
    of the type a ROS 2 replay publishes it as."""

    name: str
    packet: bool
    subscribable: bool
    republished_as: str

    @property
    def ros2_name(self) -> str:
        """'package/msg/Name'."""
        return ros2_message_type(self.name)

    @property
    def python_module(self) -> str:
        """The module of its generated rclpy class ('package.msg')."""
        return self.name.split("/")[0] + ".msg"

    @property
    def python_class(self) -> str:
        """The name of its generated rclpy class."""
        return self.name.split("/")[1]


#: every event message type focus_ros reads, in the order error messages list them
EVENT_MESSAGE_TABLE = (
    EventMessageType(EVENT_ARRAY, packet=False, subscribable=True, republished_as=EVENT_ARRAY),
    EventMessageType(EVENT_PACKET, packet=True, subscribable=True, republished_as=EVENT_PACKET),
    EventMessageType(LEGACY_EVENT_ARRAY, packet=True, subscribable=False, republished_as=EVENT_PACKET),
)
_BY_NAME = {row.name: row for row in EVENT_MESSAGE_TABLE}
_BY_ROS2_NAME = {row.ros2_name: row for row in EVENT_MESSAGE_TABLE}

#: short names of every type the codecs decode (bags, the stream decoder)
EVENT_MESSAGE_TYPES = tuple(row.name for row in EVENT_MESSAGE_TABLE)
#: short names of the types a ROS 2 node can subscribe to (``event_message_type``)
SUBSCRIBABLE_EVENT_MESSAGE_TYPES = tuple(row.name for row in EVENT_MESSAGE_TABLE if row.subscribable)
#: ROS 2 full names of every type the codecs decode
ROS2_EVENT_MESSAGE_TYPES = tuple(row.ros2_name for row in EVENT_MESSAGE_TABLE)
#: ROS 2 full names of the types a ROS 2 replay publishes events as
ROS2_REPUBLISHED_MESSAGE_TYPES = frozenset(ros2_message_type(row.republished_as) for row in EVENT_MESSAGE_TABLE)


def event_message_type(message_type: str) -> EventMessageType | None:
    """The table's row of a type (short or ROS 2 full name), or None when it is not an
    event message type."""
    return _BY_NAME.get(short_message_type(message_type))


def republished_ros2_type(message_type: str) -> str:
    """The ROS 2 full name a replay publishes a message of ``message_type`` (a ROS 2 full
    name) as: its table row's ``republished_as`` for an event type, itself otherwise."""
    row = _BY_ROS2_NAME.get(message_type)
    return message_type if row is None else ros2_message_type(row.republished_as)
