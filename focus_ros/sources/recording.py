"""A recording in memory: events plus whatever ground truth and calibration came with it.

This is what readers return and writers take, whether the events come from the
Event Camera Dataset, a bag or the simulator, so that downstream code cannot tell a
simulated sequence from a recorded one. All times are int64 nanoseconds.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from focus_ros.camera import Calibration
from focus_ros.events import Events


@dataclass
class ImuSamples:
    """IMU samples: t (int64 ns, shape N), angular_velocity (N, 3) rad/s in the camera
    frame (x right, y down, z forward), linear_acceleration (N, 3) m/s^2."""

    t: np.ndarray
    angular_velocity: np.ndarray
    linear_acceleration: np.ndarray

    def __len__(self) -> int:
        return len(self.t)


@dataclass
class Poses:
    """Camera poses: t (int64 ns, N), position (N, 3) m, orientation (N, 4) unit quaternion
    (qx, qy, qz, qw) of the camera frame in the world frame, as in ``groundtruth.txt``."""

    t: np.ndarray
    position: np.ndarray
    orientation: np.ndarray

    def __len__(self) -> int:
        return len(self.t)


@dataclass
class Recording:
    """Events with calibration and optional ground truth.

    depth_maps: optional (t int64 ns of shape M, depth (M, height, width) m) for
    simulated scenes with depth.
    """

    events: Events
    calibration: Calibration | None = None
    imu: ImuSamples | None = None
    poses: Poses | None = None
    depth_times: np.ndarray | None = None
    depth_maps: np.ndarray | None = None
