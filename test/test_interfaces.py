"""The interface packages built from interfaces/ by `make setup` import and serialize in rclpy.

No skip here: `make test` builds them first, so a missing module is a broken build.
"""

import numpy as np

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
