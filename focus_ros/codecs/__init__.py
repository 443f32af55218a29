"""Event message codecs: serialized ROS bytes <-> :class:`~focus_ros.events.Events` arrays.

rclpy turns every event of a ``dvs_msgs/EventArray`` into a Python object, far too slow
for an event camera (``docs/design.md``, "ROS 2 from PyPI wheels and the serialization
speed trap"; figures in BENCHMARKS.md, "Event transport"). These codecs read and write
the serialized bytes directly with numpy strided views and numba kernels, with no
per-event Python object anywhere. One module per wire format:

- :mod:`~focus_ros.codecs.dvs_msgs`: ``dvs_msgs/EventArray`` in ROS 2 CDR and ROS 1;
- :mod:`~focus_ros.codecs.event_packet`: ``event_camera_msgs/EventPacket`` (and the legacy
  ``event_array_msgs/EventArray``, the same fields) in ROS 2 CDR and ROS 1, its event bytes
  handed to one codec per encoding: :mod:`~focus_ros.codecs.evt3` (Prophesee,
  metavision_driver), :mod:`~focus_ros.codecs.libcaer_cmp` and
  :mod:`~focus_ros.codecs.libcaer` (iniVation DAVIS / DVXplorer, libcaer_driver),
  :mod:`~focus_ros.codecs.mono`;
- :mod:`~focus_ros.codecs.stream_decoder`: :class:`EventMessageDecoder`, one topic's
  stream of messages -> Events in ROS time, the one time convention of the node, the bag
  readers and the command line;
- :mod:`~focus_ros.codecs.message_types`: the one table of event message types;
- ``_cdr`` (field reader and writer, :class:`EventDecodeError`) and ``_payload``
  (word helpers), shared by the above.

A fifth EventPacket encoding is one module (``decode_packet``, ``encode_packet`` and,
when it keeps state from packet to packet, ``new_stream_state``) and one row of
``event_packet._PACKET_CODECS``. A new event message type is one row of
:data:`~focus_ros.codecs.message_types.EVENT_MESSAGE_TABLE`.

Malformed or truncated input raises :class:`EventDecodeError` (a ``ValueError``) with one
line saying what is wrong and at which byte offset.
"""

from focus_ros.codecs._cdr import MAX_SEQUENCE_LENGTH, EventDecodeError
from focus_ros.codecs.dvs_msgs import (
    EventArrayInfo, cdr_event_sequence_bytes, decode_event_array, decode_event_array_ros1,
    encode_event_array, encode_event_array_ros1)
from focus_ros.codecs.event_packet import (
    SUPPORTED_PACKET_ENCODINGS, EventPacketInfo, PacketStreamState, decode_event_packet,
    encode_event_packet, event_packet_ros1_to_cdr)
from focus_ros.codecs.evt3 import (
    ENCODING_EVT3, EVT3_ADDR_X, EVT3_ADDR_Y, EVT3_EXT_TRIGGER, EVT3_TIME_HIGH, EVT3_TIME_LOW,
    EVT3_VECT_8, EVT3_VECT_12, EVT3_VECT_BASE_X, Evt3Decoder, Triggers, encode_evt3_words)
from focus_ros.codecs.libcaer import ENCODING_LIBCAER
from focus_ros.codecs.libcaer_cmp import (
    CMP_ADDR_X, CMP_ADDR_Y, CMP_TIME_HIGH, CMP_TIME_LOW, CMP_VECT_8, CMP_VECT_BASE_Y,
    ENCODING_LIBCAER_CMP)
from focus_ros.codecs.message_types import (
    EVENT_ARRAY, EVENT_MESSAGE_TABLE, EVENT_MESSAGE_TYPES, EVENT_PACKET, LEGACY_EVENT_ARRAY,
    EventMessageType, short_message_type)
from focus_ros.codecs.mono import ENCODING_MONO
from focus_ros.codecs.stream_decoder import HOST_CLOCK_TOLERANCE_NS, EventMessageDecoder

__all__ = [
    # errors and limits
    "EventDecodeError", "MAX_SEQUENCE_LENGTH",
    # dvs_msgs/EventArray
    "EventArrayInfo", "cdr_event_sequence_bytes", "decode_event_array", "decode_event_array_ros1",
    "encode_event_array", "encode_event_array_ros1",
    # event_camera_msgs/EventPacket and its encodings
    "SUPPORTED_PACKET_ENCODINGS", "ENCODING_EVT3", "ENCODING_LIBCAER_CMP", "ENCODING_LIBCAER",
    "ENCODING_MONO", "EventPacketInfo", "PacketStreamState", "Triggers", "decode_event_packet",
    "encode_event_packet", "event_packet_ros1_to_cdr",
    "Evt3Decoder", "encode_evt3_words", "EVT3_ADDR_Y", "EVT3_ADDR_X", "EVT3_VECT_BASE_X",
    "EVT3_VECT_12", "EVT3_VECT_8", "EVT3_TIME_LOW", "EVT3_TIME_HIGH", "EVT3_EXT_TRIGGER",
    "CMP_TIME_HIGH", "CMP_TIME_LOW", "CMP_ADDR_X", "CMP_ADDR_Y", "CMP_VECT_BASE_Y", "CMP_VECT_8",
    # message types and the stream decoder
    "EVENT_ARRAY", "EVENT_PACKET", "LEGACY_EVENT_ARRAY", "EVENT_MESSAGE_TYPES", "EVENT_MESSAGE_TABLE",
    "EventMessageType", "short_message_type", "EventMessageDecoder", "HOST_CLOCK_TOLERANCE_NS",
]
