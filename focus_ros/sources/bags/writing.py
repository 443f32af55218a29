"""Writing a :class:`Recording` as a ROS 1 ``.bag`` file or a ROS 2 bag folder (mcap or sqlite3)
with the dataset's topics and types: events serialized by :mod:`focus_ros.codecs`, the small
messages (:mod:`.messages`) by rosbags, all merged in log-time order; optionally a TF tree on
``/tf`` and ``/tf_static`` as a robot records it (:class:`~.transforms.BagTransforms`).
"""

from __future__ import annotations

from pathlib import Path

from rosbags.rosbag1 import Writer as Ros1Writer
from rosbags.rosbag2 import StoragePlugin
from rosbags.rosbag2 import Writer as Ros2Writer

from focus_ros import codecs
from focus_ros.camera import Calibration
from focus_ros.events import Events
from focus_ros.sources.bags.messages import (
    camera_info_message, depth_image_message, imu_message, pose_message, tf_message)
from focus_ros.sources.bags.topics import (
    CAMERA_INFO_TYPE, DEFAULT_TOPICS, EVENT_ARRAY_TYPE, EVENT_PACKET_TYPE, IMAGE_TYPE, IMU_TYPE, POSE_TYPE, STRING_TYPE,
    TF_STATIC_TOPIC, TF_TOPIC, BagTopics, typestore_with_event_types)
from focus_ros.sources.bags.transforms import BagTransforms
from focus_ros.sources.recording import Recording, simulation_to_text

__all__ = ["write_bag"]


def _event_messages(events: Events, calibration: Calibration | None, events_per_message: int,
                    ros_version: int, frame_id: str, encoding: str | None):
    """(log time ns, serialized bytes) of the event messages."""
    width = calibration.width if calibration else int(events.x.max()) + 1 if len(events) else 240
    height = calibration.height if calibration else int(events.y.max()) + 1 if len(events) else 180
    sensor_origin = (int(events.t[0]) // 1000) * 1000 if len(events) else 0
    if sensor_origin <= codecs.HOST_CLOCK_TOLERANCE_NS:
        # readers take a camera clock this close to its header stamps for ROS time (focus_ros.codecs
        # EventMessageDecoder): let it read ROS time then, or every event would move by the origin
        sensor_origin = 0
    for index, start in enumerate(range(0, len(events), events_per_message)):
        chunk = events[start:start + events_per_message]
        if encoding is None:
            if ros_version == 1:
                raw = codecs.encode_event_array_ros1(chunk, height, width, frame_id, seq=index)
            else:
                raw = codecs.encode_event_array(chunk, height, width, frame_id)
        else:
            if encoding != codecs.ENCODING_MONO:  # microsecond clocks: 1 us (floor)
                chunk = Events(chunk.x, chunk.y, chunk.t // 1000 * 1000, chunk.p)
            raw = codecs.encode_event_packet(chunk, height, width, encoding, frame_id, seq=index,
                                                sensor_time_offset_ns=sensor_origin,
                                                ros1=ros_version == 1)
        yield int(chunk.t[-1]), raw


def _tf_messages(transforms: BagTransforms):
    """(log time ns, topic, transforms of one message) of a TF tree, as robots publish it: the
    static transforms in one /tf_static message (logged at their earliest stamp), the dynamic ones
    one /tf message per stamp (the transforms sharing a stamp together, logged at it)."""
    if transforms.static:
        yield min(transform.t_ns for transform in transforms.static), TF_STATIC_TOPIC, list(transforms.static)
    by_stamp: dict[int, list] = {}
    for transform in transforms.dynamic:
        by_stamp.setdefault(int(transform.t_ns), []).append(transform)
    for t_ns, group in sorted(by_stamp.items()):
        yield t_ns, TF_TOPIC, group


def write_bag(path, recording: Recording, version: int = 2, storage: str = "mcap",
              topics: BagTopics = DEFAULT_TOPICS, events_per_message: int = 30_000,
              frame_id: str = "dvs", event_encoding: str | None = None,
              transforms: BagTransforms | None = None) -> None:
    """Write a Recording as a bag with the dataset's topics and types.

    version 1: a ROS 1 ``.bag`` file; version 2: a ROS 2 bag folder with ``storage``
    "mcap" or "sqlite3". Events go as ``dvs_msgs/EventArray`` messages of
    ``events_per_message`` events serialized with :mod:`focus_ros.codecs` (or
    ``event_camera_msgs/EventPacket`` with ``event_encoding`` "evt3", "libcaer_cmp",
    "libcaer" or "mono"; all but mono have 1 us resolution, so event times are rounded
    down to whole microseconds; the camera clock starts at the first event's microsecond);
    log time = the message's last event time, header stamp = its first. IMU, camera info
    (once, at the first event), poses and depth maps (32FC1 images) go through rosbags' serializer. Refuses to
    overwrite an existing path (ValueError). ``transforms``: a TF tree to write too, on ``/tf``
    and ``/tf_static`` as ``transforms.message_type`` (ROS 1 may use tf/tfMessage).
    """
    path = Path(path)
    if version not in (1, 2):
        raise ValueError(f"bag version must be 1 or 2, got {version}")
    if storage not in ("mcap", "sqlite3"):
        raise ValueError(f"bag storage must be 'mcap' or 'sqlite3', got {storage!r}")
    if event_encoding is not None and event_encoding not in codecs.SUPPORTED_PACKET_ENCODINGS:
        raise ValueError(f"unknown event encoding {event_encoding!r} (supported: "
                         f"{', '.join(codecs.SUPPORTED_PACKET_ENCODINGS)})")
    if version == 1 and path.suffix != ".bag":
        raise ValueError(f"{path}: a ROS 1 bag file name must end in .bag")
    if events_per_message < 1:
        raise ValueError(f"events_per_message must be at least 1, got {events_per_message}")
    if path.exists():
        raise ValueError(f"{path} already exists: refusing to overwrite")
    store = typestore_with_event_types(version)
    event_type = EVENT_ARRAY_TYPE if event_encoding is None else EVENT_PACKET_TYPE
    events = recording.events

    # (log time, topic, serialized bytes), merged in time order
    records: list[tuple[int, str, bytes]] = []
    for t_ns, raw in _event_messages(events, recording.calibration, events_per_message, version,
                                     frame_id, event_encoding):
        records.append((t_ns, topics.events, raw))
    serialize = store.serialize_ros1 if version == 1 else store.serialize_cdr

    def add(t_ns, topic, message, msgtype):
        records.append((int(t_ns), topic, bytes(serialize(message, msgtype))))

    if recording.calibration is not None:
        t0 = int(events.t[0]) if len(events) else 0
        add(t0, topics.camera_info,
            camera_info_message(store, t0, recording.calibration, frame_id, version),
            CAMERA_INFO_TYPE)
    if recording.imu is not None:
        imu = recording.imu
        for t_ns, gyro, accel in zip(imu.t.tolist(), imu.angular_velocity, imu.linear_acceleration):
            add(t_ns, topics.imu, imu_message(store, t_ns, gyro, accel, frame_id, version), IMU_TYPE)
    if recording.poses is not None:
        poses = recording.poses
        for t_ns, position, orientation in zip(poses.t.tolist(), poses.position, poses.orientation):
            add(t_ns, topics.poses,
                pose_message(store, t_ns, position, orientation, "world", version), POSE_TYPE)
    if recording.depth_maps is not None:
        for t_ns, depth in zip(recording.depth_times.tolist(), recording.depth_maps):
            add(t_ns, topics.depth, depth_image_message(store, t_ns, depth, frame_id, version), IMAGE_TYPE)
    if recording.simulation is not None:
        t0 = int(events.t[0]) if len(events) else 0
        add(t0, topics.simulation, store.types[STRING_TYPE](data=simulation_to_text(recording.simulation)),
            STRING_TYPE)

    types = {topics.events: event_type, topics.camera_info: CAMERA_INFO_TYPE,
             topics.imu: IMU_TYPE, topics.poses: POSE_TYPE, topics.depth: IMAGE_TYPE, topics.simulation: STRING_TYPE}
    if transforms is not None:
        types.update({TF_TOPIC: transforms.message_type, TF_STATIC_TOPIC: transforms.message_type})
        for t_ns, topic, group in _tf_messages(transforms):
            add(t_ns, topic, tf_message(store, group, version, transforms.message_type), transforms.message_type)
    records.sort(key=lambda record: record[0])

    used = {topic for _, topic, _ in records}
    if version == 1:
        writer = Ros1Writer(path)
    else:
        plugin = StoragePlugin.MCAP if storage == "mcap" else StoragePlugin.SQLITE3
        writer = Ros2Writer(path, version=9 if storage == "mcap" else 8, storage_plugin=plugin)
    with writer:
        connections = {topic: writer.add_connection(topic, types[topic], typestore=store)
                       for topic in types if topic in used}
        for t_ns, topic, raw in records:
            writer.write(connections[topic], t_ns, raw)
