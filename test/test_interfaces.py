"""The interface packages built from interfaces/ by `make setup` import and serialize in rclpy.

No skip here: `make test` builds them first, so a missing module is a broken build (in a ROS 2
install, tf2_msgs is the system's: interfaces/tf2_msgs is COLCON_IGNOREd there).
"""

import numpy as np
import pytest

from focus_ros import codecs
from focus_ros.events import Events


def test_dvs_msgs_and_event_camera_msgs_import_with_the_fields_of_the_drivers():
    from dvs_msgs.msg import Event, EventArray
    from event_camera_msgs.msg import EventPacket

    assert list(Event.get_fields_and_field_types()) == ["x", "y", "ts", "polarity"]
    assert list(EventArray.get_fields_and_field_types()) == ["header", "height", "width", "events"]
    assert list(EventPacket.get_fields_and_field_types()) == [
        "header", "height", "width", "seq", "time_base", "encoding", "is_bigendian", "events"]


def test_rclpy_deserializes_what_the_numpy_codec_writes():
    from dvs_msgs.msg import EventArray
    from rclpy.serialization import deserialize_message

    events = Events.from_arrays([0, 239, 17], [0, 179, 5], np.array([1, 2, 3_000_000_007]), [1, 0, 1])
    message = deserialize_message(codecs.encode_event_array(events, 180, 240, "dvs"), EventArray)
    assert (message.height, message.width, message.header.frame_id) == (180, 240, "dvs")
    assert [(e.x, e.y, e.ts.sec, e.ts.nanosec, e.polarity) for e in message.events] == [
        (0, 0, 0, 1, True), (239, 179, 0, 2, False), (17, 5, 3, 7, True)]


def tf_messages(typestore):
    """One TFMessage, twice: for rclpy and for rosbags' type store, the same content (two
    transforms with different stamps, frames, translations and unit quaternions; no field zero
    or equal to another, so any field misplaced in the wire format changes the bytes)."""
    from builtin_interfaces.msg import Time
    from geometry_msgs.msg import Quaternion, Transform, TransformStamped, Vector3
    from std_msgs.msg import Header
    from tf2_msgs.msg import TFMessage

    transforms = [  # (sec, nanosec, frame_id, child_frame_id, translation, rotation x y z w)
        (1_700_000_123, 456_789_012, "world", "dvs", (1.25, -0.5, 2.75),
         tuple(np.array([0.1, -0.2, 0.3, 0.9]) / np.linalg.norm([0.1, -0.2, 0.3, 0.9]))),
        (1_700_000_124, 7, "odom", "camera_optical_frame", (-3.5, 0.125, 0.0625),
         tuple(np.array([-0.6, 0.05, 0.7, 0.2]) / np.linalg.norm([-0.6, 0.05, 0.7, 0.2]))),
    ]
    ours = TFMessage(transforms=[
        TransformStamped(header=Header(stamp=Time(sec=sec, nanosec=nanosec), frame_id=frame),
                         child_frame_id=child,
                         transform=Transform(translation=Vector3(x=t[0], y=t[1], z=t[2]),
                                             rotation=Quaternion(x=q[0], y=q[1], z=q[2], w=q[3])))
        for sec, nanosec, frame, child, t, q in transforms])
    types = typestore.types
    theirs = types["tf2_msgs/msg/TFMessage"](transforms=[
        types["geometry_msgs/msg/TransformStamped"](
            header=types["std_msgs/msg/Header"](stamp=types["builtin_interfaces/msg/Time"](sec=sec, nanosec=nanosec),
                                                frame_id=frame),
            child_frame_id=child,
            transform=types["geometry_msgs/msg/Transform"](
                translation=types["geometry_msgs/msg/Vector3"](x=t[0], y=t[1], z=t[2]),
                rotation=types["geometry_msgs/msg/Quaternion"](x=q[0], y=q[1], z=q[2], w=q[3])))
        for sec, nanosec, frame, child, t, q in transforms])
    return ours, theirs, transforms


def tf_message_cdr_padding(data: bytes) -> set[int]:
    """The indices of the alignment bytes in the CDR of a tf2_msgs/msg/TFMessage (XCDR1, little
    endian): their content is unspecified (rosbags writes zeros, rmw_fastrtps whatever its buffer
    held), every other byte is the message's."""
    padding, position = set(), 4   # after the encapsulation header; alignment counts from there

    def align(size):
        nonlocal position
        gap = -(position - 4) % size
        padding.update(range(position, position + gap))
        position += gap

    def uint32():
        nonlocal position
        align(4)
        position += 4
        return int.from_bytes(data[position - 4:position], "little")

    assert data[:2] == b"\x00\x01"   # CDR, little endian
    for _ in range(uint32()):   # transforms
        uint32(), uint32()   # header.stamp.sec, nanosec
        for _string in ("header.frame_id", "child_frame_id"):
            length = uint32()   # counts the terminating NUL
            position += length
        align(8)
        position += 7 * 8   # transform.translation x y z, transform.rotation x y z w
    assert position == len(data)
    return padding


@pytest.fixture(scope="module")
def ros2_typestore():
    """rosbags' type store of the newest ROS 2 distribution it knows (Kilted, this .venv's, or later):
    the official tf2_msgs definitions, independent of interfaces/tf2_msgs."""
    from rosbags.typesys import Stores, get_typestore

    return get_typestore(getattr(Stores, "ROS2_KILTED", Stores.LATEST))


def test_tf2_msgs_serializes_tf_messages_as_the_official_definition(ros2_typestore):
    """interfaces/tf2_msgs (the wheels have no tf2_msgs) is wire-compatible with the tf2_msgs of ROS 2:
    rclpy's CDR bytes of a TFMessage are rosbags' for tf2_msgs/msg/TFMessage, and rclpy reads
    rosbags' bytes back field for field."""
    from rclpy.serialization import deserialize_message, serialize_message
    from tf2_msgs.msg import TFMessage

    ours, theirs, transforms = tf_messages(ros2_typestore)
    expected = bytes(ros2_typestore.serialize_cdr(theirs, "tf2_msgs/msg/TFMessage"))
    assert len(expected) > 2 * 7 * 8   # two transforms' seven doubles and more: not an empty message
    padding = tf_message_cdr_padding(expected)
    assert padding and all(expected[i] == 0 for i in padding)   # the frame ids leave alignment gaps
    for _ in range(3):   # Fast CDR leaves the alignment gaps as the allocator hands them over
        serialized = serialize_message(ours)
        assert len(serialized) == len(expected)
        assert bytes(0 if i in padding else b for i, b in enumerate(serialized)) == expected
    assert ros2_typestore.deserialize_cdr(serialized, "tf2_msgs/msg/TFMessage") == theirs

    back = deserialize_message(expected, TFMessage)
    assert [(m.header.stamp.sec, m.header.stamp.nanosec, m.header.frame_id, m.child_frame_id,
             (m.transform.translation.x, m.transform.translation.y, m.transform.translation.z),
             (m.transform.rotation.x, m.transform.rotation.y, m.transform.rotation.z, m.transform.rotation.w))
            for m in back.transforms] == transforms
    assert back == ours


def test_tf2_msgs_is_the_type_of_real_tf2_publishers(ros2_typestore, monkeypatch):
    """A publisher of this TFMessage is, for the middleware, tf2_msgs/msg/TFMessage with the type
    hash (RIHS01) of the official definition: what tf2's /tf publishers and subscribers use, so
    they match it (fields and nested types alike enter the hash). TF2Error likewise, as a type."""
    from tf2_msgs.msg import TF2Error, TFMessage

    from ros_harness import client_node

    assert (TFMessage.__module__, TFMessage.__name__) == ("tf2_msgs.msg._tf_message", "TFMessage")
    assert list(TFMessage.get_fields_and_field_types()) == ["transforms"]
    assert list(TF2Error.get_fields_and_field_types()) == ["error", "error_string"]
    assert (TF2Error.NO_ERROR, TF2Error.LOOKUP_ERROR, TF2Error.TRANSFORM_ERROR) == (0, 1, 6)
    with client_node("tf2_msgs_check", monkeypatch) as (_env, node, _executor):
        node.create_publisher(TFMessage, "/tf", 10)
        node.create_publisher(TF2Error, "tf2_error", 10)
        for topic, name in (("/tf", "tf2_msgs/msg/TFMessage"), ("/tf2_error", "tf2_msgs/msg/TF2Error")):
            [info] = node.get_publishers_info_by_topic(topic)
            assert info.topic_type == name
            assert str(info.topic_type_hash) == ros2_typestore.hash_rihs01(name), name
