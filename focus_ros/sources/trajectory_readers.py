"""Camera trajectories (:class:`focus_ros.poses.Trajectory`) read from the files that hold them:
the Event Camera Dataset's ``groundtruth.txt`` (``t px py pz qx qy qz qw``), a bag's
``geometry_msgs/PoseStamped`` or ``nav_msgs/Odometry`` topic, and a bag's TF tree (``/tf`` and
``/tf_static``, as robots record their frames: the camera frame's pose in a world frame). The core
knows no file format; these readers build its trajectories (the simulator's own motion is
:mod:`.trajectories`); :func:`bag_pose_source` says which of a bag's two kinds of poses to read.

Each reader takes the trajectory's ``camera_from_body`` (4×4, m; None when the poses are the
camera's) and ``time_offset_ns`` (added to the pose times to put them on the events' clock),
as :meth:`focus_ros.poses.Trajectory.from_poses` does, and names the file in the trajectory's
``source`` and in its errors.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np

from focus_ros.poses import Trajectory
from focus_ros.poses.transforms import POSE_SOURCES

__all__ = ["bag_pose_source", "read_bag_tf_trajectory", "read_bag_trajectory",
           "read_groundtruth_trajectory"]

#: dynamic transforms handed to the TF buffer at a time: CameraPoses bounds the stamps waiting to
#: resolve (max_pending), so a long bag goes in slices
_TF_SLICE = 1000


def read_groundtruth_trajectory(path, camera_from_body=None, time_offset_ns: int = 0) -> Trajectory:
    """From an Event Camera Dataset ``groundtruth.txt`` (``t px py pz qx qy qz qw``) or
    the folder holding it. FileNotFoundError / PoseError naming the file."""
    from focus_ros.sources.ecd import GROUNDTRUTH_FILE, read_groundtruth

    path = Path(path)
    if path.is_dir():
        path = path / GROUNDTRUTH_FILE
    if not path.is_file():
        raise FileNotFoundError(f"no poses: {path} not found")
    return Trajectory.from_poses(read_groundtruth(path), camera_from_body, time_offset_ns, str(path))


def read_bag_trajectory(path, topic: str | None = None, camera_from_body=None,
                        time_offset_ns: int = 0) -> Trajectory:
    """From a ROS 1 / ROS 2 bag's ``geometry_msgs/PoseStamped`` or ``nav_msgs/Odometry``
    topic (default: the one pose topic of either type; BagError if none or several)."""
    from focus_ros.sources.bags import read_bag_poses

    poses, found = read_bag_poses(path, topic)
    return Trajectory.from_poses(poses, camera_from_body, time_offset_ns, f"{path}: topic {found}")


def bag_pose_source(path, pose_source: str = "auto", prefer_tf: bool = False) -> str:
    """"topic" or "tf": where the poses of a bag are read from. ``pose_source`` "auto": a
    PoseStamped or Odometry topic when the bag has one (a mocap's, a VIO's: the camera's pose
    already), else its TF when it has some; ``prefer_tf``: TF first when the bag has both (the
    user named frames). BagError naming the bag's topics when it has neither."""
    from contextlib import closing

    from focus_ros.sources.bags import (
        ODOMETRY_TYPE, POSE_TYPE, BagError, bag_has_tf, bag_topics, open_bag, topic_counts, topics_listing)

    if pose_source not in POSE_SOURCES:
        raise ValueError(f"pose source must be one of {', '.join(POSE_SOURCES)}, got {pose_source!r}")
    if pose_source != "auto":
        return pose_source
    with closing(open_bag(path)) as reader:
        topics, listing = bag_topics(reader), topics_listing(topic_counts(reader.connections))
    has_topic = any(msgtype in (POSE_TYPE, ODOMETRY_TYPE) for msgtype in topics.values())
    has_tf = bag_has_tf(topics)
    if has_tf and (prefer_tf or not has_topic):
        return "tf"
    if has_topic:
        return "topic"
    raise BagError(f"{path}: no poses (no geometry_msgs/PoseStamped or nav_msgs/Odometry topic, no /tf); the bag "
                   f"holds {listing}")


def read_bag_tf_trajectory(path, world_frame: str, camera_frame: str, camera_from_body=None,
                           time_offset_ns: int = 0, on_problem: Callable[[str], None] | None = None) -> Trajectory:
    """The pose of ``camera_frame`` in ``world_frame`` ('' = the root of the camera's tree, e.g.
    a robot's odom or map) over a ROS 1 / ROS 2 bag, from its ``/tf_static`` and ``/tf``, as tf2
    composes them (:class:`focus_ros.poses.transforms.CameraPoses`): a pose at each stamp of the dynamic
    edges between the two frames.

    Every static transform goes first (a mounting holds at all times, whenever it was recorded),
    then the dynamic ones in stamp order, into a buffer that forgets nothing (the whole bag is at
    hand). BagError (one line) when no pose results, with the buffer's reason, e.g. "no transform
    from 'odom' to 'dvs': 'dvs' is unknown; known frames: ...". Transforms the buffer ignores
    (not finite, not unit quaternions) are told once to ``on_problem``, with their count.
    """
    from focus_ros.sources.bags import BagError, read_bag_transforms
    from focus_ros.sources.recording import Poses
    from focus_ros.poses.transforms import CameraPoses, TransformBuffer

    transforms = read_bag_transforms(path)
    camera_poses = CameraPoses(world_frame, camera_frame, TransformBuffer(cache_ns=None))
    poses, problems = camera_poses.add(transforms.static, static=True)
    dynamic = sorted(transforms.dynamic, key=lambda transform: transform.t_ns)
    for start in range(0, len(dynamic), _TF_SLICE):
        resolved, slice_problems = camera_poses.add(dynamic[start:start + _TF_SLICE])
        poses += resolved
        problems += slice_problems
    if problems and on_problem is not None:
        on_problem(f"{path}: {len(problems)} TF problem{'s' if len(problems) > 1 else ''}, the first: {problems[0]}")
    world = camera_poses.world_frame or world_frame
    if not poses:
        reason = camera_poses.problem() or f"no pose of '{camera_frame}' in '{world or 'its root'}'"
        raise BagError(f"{path}: {reason}")
    recorded = Poses(np.array([t_ns for t_ns, _, _ in poses], np.int64), np.array([p for _, p, _ in poses]),
                     np.array([q for _, _, q in poses]))
    return Trajectory.from_poses(recorded, camera_from_body, time_offset_ns,
                                 f"{path}: /tf '{world}' -> '{camera_poses.camera_frame}'")
