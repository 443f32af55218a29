"""The topics and message types of a bag: the Event Camera Dataset's defaults (docs/design.md,
sections 2 "ROS 2 conventions" and 3 "The Event Camera Dataset"), and the rosbags typestore that
knows the event messages (dvs_msgs, event_camera_msgs, event_array_msgs) besides ROS' own.
"""

from __future__ import annotations

from dataclasses import dataclass

from rosbags.typesys import Stores, get_types_from_msg, get_typestore

from focus_ros.codecs.message_types import (
    EVENT_ARRAY, EVENT_PACKET, LEGACY_EVENT_ARRAY, ROS2_EVENT_MESSAGE_TYPES, ros2_message_type)

__all__ = ["CAMERA_INFO_TYPE", "DEFAULT_TOPICS", "DEPTH_TOPIC", "EVENT_ARRAY_TYPE", "EVENT_PACKET_TYPE", "EVENT_TYPES",
           "IMAGE_TYPE", "IMU_TYPE", "LEGACY_EVENT_ARRAY_TYPE", "LEGACY_TF_MESSAGE_TYPE", "ODOMETRY_TYPE", "POSE_TYPE",
           "STRING_TYPE", "TF_MESSAGE_TYPE", "TF_STATIC_TOPIC", "TF_TOPIC", "TF_TYPES", "BagTopics",
           "typestore_with_event_types"]

EVENT_ARRAY_TYPE = ros2_message_type(EVENT_ARRAY)
EVENT_PACKET_TYPE = ros2_message_type(EVENT_PACKET)
LEGACY_EVENT_ARRAY_TYPE = ros2_message_type(LEGACY_EVENT_ARRAY)
IMU_TYPE = "sensor_msgs/msg/Imu"
CAMERA_INFO_TYPE = "sensor_msgs/msg/CameraInfo"
POSE_TYPE = "geometry_msgs/msg/PoseStamped"
ODOMETRY_TYPE = "nav_msgs/msg/Odometry"
IMAGE_TYPE = "sensor_msgs/msg/Image"
STRING_TYPE = "std_msgs/msg/String"
#: the TF tree as robots record it (tf2, REP-105): dynamic edges on /tf, static ones on /tf_static
TF_TOPIC = "/tf"
TF_STATIC_TOPIC = "/tf_static"
TF_MESSAGE_TYPE = "tf2_msgs/msg/TFMessage"
#: ROS 1's older tf package's twin of TFMessage (the same fields), still in bags recorded with tf
LEGACY_TF_MESSAGE_TYPE = "tf/msg/tfMessage"
TF_TYPES = (TF_MESSAGE_TYPE, LEGACY_TF_MESSAGE_TYPE)
#: depth ground truth (the simulator's): 32FC1 images on this topic
DEPTH_TOPIC = "/dvs/depthmap"
#: the event message types (ROS 2 full names), from the table of focus_ros.codecs.message_types
EVENT_TYPES = ROS2_EVENT_MESSAGE_TYPES


@dataclass(frozen=True)
class BagTopics:
    """Topic names used by :func:`~focus_ros.sources.bags.read_bag` and
    :func:`~focus_ros.sources.bags.write_bag` (dataset defaults)."""

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
    # rosbags' Noetic store lacks tf2_msgs and tf (needed to write TF into a ROS 1 bag)
    TF_MESSAGE_TYPE: "geometry_msgs/TransformStamped[] transforms\n",
    LEGACY_TF_MESSAGE_TYPE: "geometry_msgs/TransformStamped[] transforms\n",
}


def typestore_with_event_types(ros_version: int = 2):
    """A rosbags typestore (ROS 2 Humble or ROS 1 Noetic) with dvs_msgs and
    event_camera_msgs registered from their message text (and, for ROS 1, tf2_msgs/TFMessage and
    tf/tfMessage, which the Noetic store lacks)."""
    store = get_typestore(Stores.ROS2_HUMBLE if ros_version == 2 else Stores.ROS1_NOETIC)
    definitions = _ROS2_DEFINITIONS if ros_version == 2 else _ROS1_DEFINITIONS
    types = {}
    for name, text in definitions.items():
        types.update(get_types_from_msg(text, name))
    store.register(types)
    return store
