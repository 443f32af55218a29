"""Camera trajectories (:class:`focus_ros.poses.Trajectory`) read from the files that hold them:
the Event Camera Dataset's ``groundtruth.txt`` (``t px py pz qx qy qz qw``) and a bag's
``geometry_msgs/PoseStamped`` or ``nav_msgs/Odometry`` topic. The core knows no file format;
these readers build its trajectories (the simulator's own motion is :mod:`.trajectories`).

Each reader takes the trajectory's ``camera_from_body`` (4×4, m; None when the poses are the
camera's) and ``time_offset_ns`` (added to the pose times to put them on the events' clock),
as :meth:`focus_ros.poses.Trajectory.from_poses` does, and names the file in the trajectory's
``source`` and in its errors.
"""

from __future__ import annotations

from pathlib import Path

from focus_ros.poses import Trajectory

__all__ = ["read_bag_trajectory", "read_groundtruth_trajectory"]


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
