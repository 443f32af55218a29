"""A bag's TF tree as robots record it: every transform of ``/tf_static`` (static edges, e.g. how
the camera is mounted) and ``/tf`` (dynamic edges, e.g. odometry) as
:class:`~focus_ros.poses.transforms.StampedTransform` lists, for :class:`~focus_ros.poses.transforms.TransformBuffer`.

The messages are ``tf2_msgs/TFMessage`` (ROS 2, and ROS 1 recorded with tf2) or ROS 1's
``tf/tfMessage`` (the older tf package; the same fields); both are read. They go through rosbags'
typestore (:func:`.messages.transforms_from_tf_message`): a robot's TF is small next to its events.
"""

from __future__ import annotations

from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path

from focus_ros.sources.bags.messages import transforms_from_tf_message
from focus_ros.sources.bags.opening import (
    deserialized_messages, open_bag, topic_connections, topic_counts, topics_listing)
from focus_ros.sources.bags.topics import TF_MESSAGE_TYPE, TF_STATIC_TOPIC, TF_TOPIC, TF_TYPES
from focus_ros.sources.errors import BagError
from focus_ros.poses.transforms import StampedTransform

__all__ = ["BagTransforms", "bag_has_tf", "read_bag_transforms"]


@dataclass
class BagTransforms:
    """A bag's TF: the transforms of ``/tf_static`` and of ``/tf``, each in the bag's (log time)
    order, and the message type they came as (:data:`~.topics.TF_TYPES`). What
    :func:`read_bag_transforms` returns and :func:`~focus_ros.sources.bags.write_bag` writes."""

    static: list[StampedTransform] = field(default_factory=list)
    dynamic: list[StampedTransform] = field(default_factory=list)
    message_type: str = TF_MESSAGE_TYPE


def bag_has_tf(topics: dict[str, str]) -> bool:
    """Whether a bag's topics (topic -> message type, :func:`.opening.bag_topics`) hold TF."""
    return any(topics.get(topic) in TF_TYPES for topic in (TF_TOPIC, TF_STATIC_TOPIC))


def read_bag_transforms(path) -> BagTransforms:
    """Every transform of a ROS 1 or ROS 2 bag's ``/tf_static`` and ``/tf``. BagError (one line)
    when the bag holds neither topic (naming the topics it holds), when one has another type, or
    when a message cannot be decoded."""
    path = Path(path)
    found = BagTransforms()
    with closing(open_bag(path)) as reader:
        present = {connection.topic for connection in reader.connections}
        if TF_TOPIC not in present and TF_STATIC_TOPIC not in present:
            raise BagError(f"{path}: no TF (no {TF_TOPIC} or {TF_STATIC_TOPIC} topic); the bag holds "
                           f"{topics_listing(topic_counts(reader.connections))}")
        for topic, transforms in ((TF_STATIC_TOPIC, found.static), (TF_TOPIC, found.dynamic)):
            if topic not in present:
                continue
            found.message_type = topic_connections(reader, path, topic, TF_TYPES)[0].msgtype
            for message in deserialized_messages(reader, path, topic, TF_TYPES):
                transforms.extend(transforms_from_tf_message(message))
    return found
