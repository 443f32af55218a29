"""Camera poses: a trajectory of timestamped poses (:mod:`.trajectory`: world-from-camera poses,
interpolated linearly and by slerp) and the TF tree a robot publishes them in
(:mod:`.transforms`: frames over time, and the camera's poses read from them).

The names most code needs are here: ``from focus_ros.poses import Trajectory``.
"""

from focus_ros.poses.trajectory import (PoseCoverageError, PoseError, Trajectory, matrix_to_quaternion, pose_matrix,
                                        quaternion_to_matrix, slerp)

__all__ = ["PoseCoverageError", "PoseError", "Trajectory", "matrix_to_quaternion", "pose_matrix",
           "quaternion_to_matrix", "slerp", "trajectory", "transforms"]
