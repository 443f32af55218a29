"""One topic's stream of event messages -> Events in ROS time: the one clock rule of the
node, the bag readers and the command line (see :class:`EventMessageDecoder`)."""

from __future__ import annotations

import numpy as np

from focus_ros.codecs.dvs_msgs import decode_event_array, decode_event_array_ros1
from focus_ros.codecs.event_packet import PacketStreamState, decode_event_packet
from focus_ros.codecs.message_types import EVENT_MESSAGE_TYPES, event_message_type, short_message_type
from focus_ros.events import NANOSECONDS_PER_SECOND

#: a stream whose first event lies within this of its message's header stamp is already
#: stamped in ROS time (host clock); otherwise it runs on the camera's own clock
HOST_CLOCK_TOLERANCE_NS = NANOSECONDS_PER_SECOND


class EventMessageDecoder:
    """Decodes one topic's stream of event messages into Events whose times are ROS time.

    ``decoder(buffer) -> (Events, info)``, one decoder per subscription or bag topic, fed
    in message order (EVT3 and libcaer_cmp state carries over, and so does the clock
    mapping). message_type: ``dvs_msgs/EventArray``, ``event_camera_msgs/EventPacket`` or
    ``event_array_msgs/EventArray`` (with or without ``/msg/``); ``ros1``: ROS 1
    serialization (bag bytes) instead of ROS 2 CDR.

    **Time convention** (the same in the node, the bag readers, ``focus-ros estimate``,
    ``replay``, ``evaluate`` and ``info``): every event time is ROS time, the clock of the
    message headers. The codec gives each event its *sensor time* s (see
    :func:`decode_event_packet`; dvs_msgs: the event's ``ts``), with the 24-bit (evt3) and
    31-bit (libcaer) microsecond rollovers unwrapped. Event time = s + offset, with one
    offset per stream fixed at the first message that holds events: 0 when that message's
    first event lies within 1 s (:data:`HOST_CLOCK_TOLERANCE_NS`) of the message's header
    stamp (the driver already stamps in ROS time: libcaer, libcaer_cmp, dvs_msgs), else
    header stamp - s of that first event (the camera's own clock: evt3, and mono as
    recorded by the ros-event-camera tools). :attr:`offset_ns` is None until fixed.
    """

    def __init__(self, message_type: str, ros1: bool = False):
        self.message_type = short_message_type(message_type)
        row = event_message_type(self.message_type)
        if row is None:
            raise ValueError(f"unknown event message type '{message_type}': use one of "
                             f"{', '.join(EVENT_MESSAGE_TYPES)}")
        self._packet = row.packet
        self.ros1 = ros1
        self.packets = PacketStreamState()
        self.offset_ns: int | None = None

    def decode_sensor_time(self, buffer):
        """(Events in the codec's sensor time, info), advancing the stream state."""
        if not self._packet:
            return decode_event_array_ros1(buffer) if self.ros1 else decode_event_array(buffer)
        return decode_event_packet(buffer, self.packets, ros1=self.ros1)

    def __call__(self, buffer):
        events, info = self.decode_sensor_time(buffer)
        if self.offset_ns is None and len(events):
            lag = info.stamp_ns - int(events.t[0])
            self.offset_ns = 0 if abs(lag) <= HOST_CLOCK_TOLERANCE_NS else lag
        if self.offset_ns:
            # in place: the codecs hand back fresh arrays (no copy of every packet's times)
            offset = np.int64(self.offset_ns)
            if len(events):
                np.add(events.t, offset, out=events.t)
            triggers = getattr(info, "triggers", None)
            if triggers is not None and len(triggers):
                np.add(triggers.t, offset, out=triggers.t)
        return events, info
