"""Reading a whole bag, or one kind of message from it: a :class:`Recording` (events, IMU,
camera info, poses, depth ground truth, the simulator's record), poses from a
``geometry_msgs/PoseStamped`` or ``nav_msgs/Odometry`` topic, the calibration, the depth maps.
The small messages go through rosbags' typestore (:mod:`.messages` turns them into values);
events stream through :func:`~focus_ros.sources.bags.events.iter_bag_events`.
"""

from __future__ import annotations

from contextlib import closing
from pathlib import Path

import numpy as np

from focus_ros.camera import Calibration
from focus_ros.events import Events
from focus_ros.sources.bags.events import iter_bag_events
from focus_ros.sources.bags.messages import calibration_from_camera_info, depth_from_image_message, stamp_ns
from focus_ros.sources.bags.opening import bag_topics, deserialized_messages, open_bag
from focus_ros.sources.bags.topics import (
    CAMERA_INFO_TYPE, DEFAULT_TOPICS, EVENT_TYPES, IMAGE_TYPE, IMU_TYPE, ODOMETRY_TYPE, POSE_TYPE, STRING_TYPE, BagTopics)
from focus_ros.sources.depth_maps import DepthGroundTruth
from focus_ros.sources.errors import BagError
from focus_ros.sources.recording import ImuSamples, Poses, Recording, simulation_from_text

__all__ = ["read_bag", "read_bag_calibration", "read_bag_depth", "read_bag_poses"]


def _read_imu(reader, path, topic) -> ImuSamples:
    t, gyro, accel = [], [], []
    for message in deserialized_messages(reader, path, topic, (IMU_TYPE,)):
        t.append(stamp_ns(message.header))
        w, a = message.angular_velocity, message.linear_acceleration
        gyro.append((w.x, w.y, w.z))
        accel.append((a.x, a.y, a.z))
    return ImuSamples(np.array(t, np.int64), np.array(gyro, float).reshape(-1, 3),
                      np.array(accel, float).reshape(-1, 3))


def _read_poses(reader, path, topic) -> Poses:
    t, position, orientation = [], [], []
    for message in deserialized_messages(reader, path, topic, (POSE_TYPE,)):
        t.append(stamp_ns(message.header))
        p, q = message.pose.position, message.pose.orientation
        position.append((p.x, p.y, p.z))
        orientation.append((q.x, q.y, q.z, q.w))
    return Poses(np.array(t, np.int64), np.array(position, float).reshape(-1, 3),
                 np.array(orientation, float).reshape(-1, 4))


def _read_odometry_poses(reader, path, topic) -> Poses:
    t, position, orientation = [], [], []
    for message in deserialized_messages(reader, path, topic, (ODOMETRY_TYPE,)):
        t.append(stamp_ns(message.header))
        p, q = message.pose.pose.position, message.pose.pose.orientation
        position.append((p.x, p.y, p.z))
        orientation.append((q.x, q.y, q.z, q.w))
    return Poses(np.array(t, np.int64), np.array(position, float).reshape(-1, 3),
                 np.array(orientation, float).reshape(-1, 4))


def read_bag_poses(path, topic: str | None = None) -> tuple[Poses, str]:
    """(poses, topic) from a bag's ``geometry_msgs/PoseStamped`` or ``nav_msgs/Odometry``
    topic (header stamps; Odometry's pose.pose). ``topic`` None: the one topic of either
    type. BagError naming the file when there is none, several, or the topic is of
    another type."""
    path = Path(path)
    readers = {POSE_TYPE: _read_poses, ODOMETRY_TYPE: _read_odometry_poses}
    with closing(open_bag(path)) as reader:
        available = bag_topics(reader)
        if topic is None:
            candidates = sorted(t for t, m in available.items() if m in readers)
            if not candidates:
                raise BagError(f"{path}: no poses (no geometry_msgs/PoseStamped or nav_msgs/Odometry topic)")
            if len(candidates) > 1:
                raise BagError(f"{path}: several pose topics ({', '.join(candidates)}): choose one")
            topic = candidates[0]
        if topic not in available:
            raise BagError(f"{path}: pose topic {topic} not in the bag")
        if available[topic] not in readers:
            raise BagError(f"{path}: topic {topic} is {available[topic]}, not PoseStamped or Odometry")
        return readers[available[topic]](reader, path, topic), topic


def _read_calibration(reader, path, topic) -> Calibration | None:
    for message in deserialized_messages(reader, path, topic, (CAMERA_INFO_TYPE,)):
        return calibration_from_camera_info(message, f"{path}: topic {topic}")
    return None


def _read_depth(reader, path, topic):
    times, maps = [], []
    for message in deserialized_messages(reader, path, topic, (IMAGE_TYPE,)):
        try:
            t_ns, depth = depth_from_image_message(message, f"{path}: topic {topic}")
        except ValueError as error:
            raise BagError(str(error)) from None
        times.append(t_ns)
        maps.append(depth)
    if not maps:
        return None
    return DepthGroundTruth(np.array(times, np.int64), np.stack(maps))


def read_bag_depth(path, topic: str = DEFAULT_TOPICS.depth):
    """The bag's depth ground truth (:class:`~focus_ros.sources.depth_maps.DepthGroundTruth`
    from 32FC1 images on ``topic``), or None when the topic is absent."""
    path = Path(path)
    with closing(open_bag(path)) as reader:
        if topic not in bag_topics(reader):
            return None
        return _read_depth(reader, path, topic)


def read_bag_calibration(path, topic: str = DEFAULT_TOPICS.camera_info) -> Calibration | None:
    """The calibration in a bag's first camera_info on ``topic`` (None when the topic is absent)."""
    path = Path(path)
    with closing(open_bag(path)) as reader:
        if topic not in bag_topics(reader):
            return None
        return _read_calibration(reader, path, topic)


def read_bag(path, topics: BagTopics = DEFAULT_TOPICS, event_topic: str | None = None,
             require: tuple[str, ...] = ()) -> Recording:
    """Read a whole bag into a Recording: events (from ``event_topic``, default
    ``topics.events`` when present, else the one event topic), IMU, camera info and poses
    from their topics when present. ``require``: names among ("imu", "camera_info",
    "poses") that must be present (BagError otherwise)."""
    path = Path(path)
    with closing(open_bag(path)) as reader:
        available = bag_topics(reader)
        for name in require:
            if getattr(topics, name) not in available:
                raise BagError(f"{path}: topic {getattr(topics, name)} not in the bag")
        imu = _read_imu(reader, path, topics.imu) if topics.imu in available else None
        poses = _read_poses(reader, path, topics.poses) if topics.poses in available else None
        calibration = (_read_calibration(reader, path, topics.camera_info)
                       if topics.camera_info in available else None)
        depth = _read_depth(reader, path, topics.depth) if topics.depth in available else None
        simulation = (_read_simulation(reader, path, topics.simulation)
                      if available.get(topics.simulation) == STRING_TYPE else None)
        if event_topic is None and available.get(topics.events) in EVENT_TYPES:
            event_topic = topics.events
    events = Events.concatenate([events for events, _ in iter_bag_events(path, event_topic)])
    return Recording(events=events, calibration=calibration, imu=imu, poses=poses,
                     depth_times=depth.t if depth is not None else None,
                     depth_maps=depth.depth_m if depth is not None else None, simulation=simulation)


def _read_simulation(reader, path, topic) -> dict | None:
    """The simulator's record from its topic's first message (see write_bag), or None."""
    for message in deserialized_messages(reader, path, topic, (STRING_TYPE,)):
        return simulation_from_text(message.data, f"{path}: {topic}")
    return None
