"""ROS 1 and ROS 2 bags (through the pure-Python ``rosbags``): stream events, read and
write whole recordings, replay them.

- ROS 1: a ``.bag`` file (the Event Camera Dataset's own bags, or event_camera_msgs
  recorded on ROS 1).
- ROS 2: a bag folder with ``metadata.yaml`` and sqlite3 (``.db3``) or mcap storage (when
  the metadata names no storage, as some recorders leave it, it is taken from the files).

One module per role, as rosbags has them:

- ``topics``: the dataset's topic names (:class:`BagTopics`), the message type names, and the
  typestore that knows the event messages (:func:`typestore_with_event_types`);
- ``opening``: which kind of bag a path is, opening it (:func:`open_bag`), its topics and the
  one-line listing errors show, raw messages with reader faults made :class:`BagError`;
- ``ros2_idl``: definitions stored as ROS 2 IDL made readable by rosbags;
- ``ros1_salvage``: the records of a ROS 1 bag cut short (no index), read up to the damage;
- ``events``: event messages streamed as Events (:func:`iter_bag_events`);
- ``messages``: ROS messages <-> values (header stamps, IMU, poses, camera info, 32FC1 depth
  images); no file;
- ``reading``: a whole bag as a Recording (:func:`read_bag`), or its poses, calibration or depth;
- ``transforms``: its TF tree, ``/tf`` and ``/tf_static``, as stamped transforms (:func:`read_bag_transforms`);
- ``writing``: a Recording as a bag (:func:`write_bag`);
- ``replay``: every message as ROS 2 CDR bytes for republishing (:func:`open_bag_messages`).

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
  :class:`~focus_ros.sources.depth_maps.DepthGroundTruth`, :func:`depth_image_message`);
- ``/tf`` and ``/tf_static``: ``tf2_msgs/msg/TFMessage`` (or ROS 1's ``tf/tfMessage``), a robot's
  TF tree -> :class:`BagTransforms` (the poses of the camera's frame: trajectory_readers).

Event times are ROS time, by the rule of :class:`focus_ros.codecs.EventMessageDecoder`.
Failures (missing file, corrupt or truncated bag, missing topic, unknown type, bad
event message) raise :class:`BagError` naming the file and topic; events read before
the fault are yielded first.
"""

from focus_ros.sources.bags.events import event_frame_id, event_message_decoder, iter_bag_events
from focus_ros.sources.bags.messages import (
    DEPTH_ENCODING, calibration_from_camera_info, depth_from_image_message, depth_image_message)
from focus_ros.sources.bags.opening import (
    bag_topics, bag_version, find_event_topic, open_bag, ros2_storage_identifier, topic_counts, topics_listing)
from focus_ros.sources.bags.reading import read_bag, read_bag_calibration, read_bag_depth, read_bag_poses
from focus_ros.sources.bags.replay import BagMessages, open_bag_messages
from focus_ros.sources.bags.topics import (
    CAMERA_INFO_TYPE, DEFAULT_TOPICS, DEPTH_TOPIC, EVENT_ARRAY_TYPE, EVENT_PACKET_TYPE, EVENT_TYPES, IMAGE_TYPE,
    IMU_TYPE, LEGACY_EVENT_ARRAY_TYPE, LEGACY_TF_MESSAGE_TYPE, ODOMETRY_TYPE, POSE_TYPE, STRING_TYPE, TF_MESSAGE_TYPE,
    TF_STATIC_TOPIC, TF_TOPIC, TF_TYPES, BagTopics, typestore_with_event_types)
from focus_ros.sources.bags.transforms import BagTransforms, bag_has_tf, read_bag_transforms
from focus_ros.sources.bags.writing import write_bag
from focus_ros.sources.errors import BagError

__all__ = ["CAMERA_INFO_TYPE", "DEFAULT_TOPICS", "DEPTH_ENCODING", "DEPTH_TOPIC", "EVENT_ARRAY_TYPE",
           "EVENT_PACKET_TYPE", "EVENT_TYPES", "IMAGE_TYPE", "IMU_TYPE", "LEGACY_EVENT_ARRAY_TYPE",
           "LEGACY_TF_MESSAGE_TYPE", "ODOMETRY_TYPE", "POSE_TYPE", "STRING_TYPE", "TF_MESSAGE_TYPE", "TF_STATIC_TOPIC",
           "TF_TOPIC", "TF_TYPES", "BagError", "BagMessages", "BagTopics", "BagTransforms", "bag_has_tf", "bag_topics",
           "bag_version", "calibration_from_camera_info", "depth_from_image_message", "depth_image_message",
           "event_frame_id", "event_message_decoder", "find_event_topic", "iter_bag_events", "open_bag",
           "open_bag_messages", "read_bag", "read_bag_calibration", "read_bag_depth", "read_bag_poses",
           "read_bag_transforms", "ros2_storage_identifier", "topic_counts", "topics_listing",
           "typestore_with_event_types", "write_bag"]
