"""Ground-truth angular velocity (rad/s, camera frame) and its value at window reference times.

Two sources, as in published evaluations of the Event Camera Dataset:

- the IMU gyro, delayed by a fixed time (default 2.4 ms): the sample stamped ``t_imu``
  describes the motion at ``t_imu + delay``; a simulated sequence's IMU is the exact ω at
  its stamps (:func:`from_simulated_imu`, no delay);
- the motion-capture orientations: ω between consecutive orientations R_i, R_{i+1}
  (camera-in-world) is ``log(R_i^T R_{i+1}) / (t_{i+1} - t_i)`` in the camera (body)
  frame, assigned to the midpoint time.

Estimates are compared at each window's reference time t_ref, where the ground truth is
linearly interpolated (NaN outside its time span).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from focus_ros.events import NANOSECONDS_PER_SECOND
from focus_ros.sources.recording import ImuSamples, Poses

#: default gyro delay (ns): 2.4 ms, as in published evaluations of the rotation sequences
DEFAULT_IMU_DELAY_NS = 2_400_000


@dataclass(frozen=True)
class GroundTruth:
    """Angular velocity samples: t (int64 ns, increasing, shape N), angular_velocity (N, 3) rad/s
    in the camera frame (x right, y down, z forward); source says where it came from."""

    t: np.ndarray
    angular_velocity: np.ndarray
    source: str = ""

    def __post_init__(self):
        t = np.asarray(self.t)
        omega = np.asarray(self.angular_velocity)
        if t.ndim != 1 or omega.shape != (len(t), 3):
            raise ValueError(f"ground truth needs t of shape (N,) and angular_velocity of shape (N, 3), "
                             f"got {t.shape} and {omega.shape}")
        if len(t) < 2:
            raise ValueError(f"ground truth needs at least 2 samples, got {len(t)}")
        decreasing = np.flatnonzero(np.diff(t) <= 0)
        if decreasing.size:
            index = int(decreasing[0]) + 1
            raise ValueError(f"ground-truth times must increase: sample {index} at {t[index]} ns "
                             f"follows {t[index - 1]} ns")

    def __len__(self) -> int:
        return len(self.t)

    def at(self, t_ns) -> np.ndarray:
        """ω (rad/s, shape (M, 3)) linearly interpolated at times t_ns (ns); NaN outside the span."""
        t_ns = np.asarray(t_ns, dtype=np.int64)
        # interpolate in float seconds relative to the first sample, exact enough at ns scale
        origin = self.t[0]
        query = (t_ns - origin).astype(np.float64)
        samples = (self.t - origin).astype(np.float64)
        result = np.empty((len(t_ns), 3))
        for axis in range(3):
            result[:, axis] = np.interp(query, samples, self.angular_velocity[:, axis],
                                        left=np.nan, right=np.nan)
        return result

    def shifted(self, offset_ns: int) -> "GroundTruth":
        """The same signal with its times moved by offset_ns (ns): new t = t + offset."""
        return GroundTruth(self.t + np.int64(offset_ns), self.angular_velocity, self.source)

    def with_signs(self, signs) -> "GroundTruth":
        """The same signal with each axis multiplied by signs[axis] (±1)."""
        signs = np.asarray(signs, dtype=np.float64).reshape(3)
        return GroundTruth(self.t, self.angular_velocity * signs, self.source)

    def peak_deg_s(self, start_ns: int | None = None, end_ns: int | None = None) -> float:
        """Largest |ω| component (deg/s) within [start_ns, end_ns] (the paper's |ω_max|)."""
        inside = np.ones(len(self.t), dtype=bool)
        if start_ns is not None:
            inside &= self.t >= start_ns
        if end_ns is not None:
            inside &= self.t <= end_ns
        if not inside.any():
            return float("nan")
        return float(np.rad2deg(np.abs(self.angular_velocity[inside]).max()))


def from_imu(imu: ImuSamples, delay_ns: int = DEFAULT_IMU_DELAY_NS) -> GroundTruth:
    """Ground truth from gyro samples (rad/s, camera frame); sample t_imu describes t_imu + delay_ns."""
    if imu is None or len(imu) < 2:
        raise ValueError("the sequence has no IMU samples (need at least 2 for ground truth from the gyro)")
    return GroundTruth(np.asarray(imu.t, dtype=np.int64) + np.int64(delay_ns),
                       np.asarray(imu.angular_velocity, dtype=np.float64),
                       source=f"IMU gyro delayed by {delay_ns / 1e6:g} ms")


def from_simulated_imu(imu: ImuSamples) -> GroundTruth:
    """Ground truth from a simulated sequence's IMU: the simulator's exact ω (rad/s, camera frame) at
    each stamp, so no delay (the recorded-camera default of 2.4 ms would shift it by that much)."""
    return GroundTruth(from_imu(imu, 0).t, np.asarray(imu.angular_velocity, dtype=np.float64),
                       source="the simulator's exact ω (its IMU samples, no gyro delay)")


def from_poses(poses: Poses) -> GroundTruth:
    """Ground truth from camera-in-world orientations (qx, qy, qz, qw): body-frame ω between
    consecutive orientations, ``log(R_i^T R_{i+1}) / dt`` (rad/s), at the midpoint times."""
    from scipy.spatial.transform import Rotation

    if poses is None or len(poses) < 3:
        raise ValueError("the sequence has no camera poses (need at least 3 for ground truth from mocap)")
    t = np.asarray(poses.t, dtype=np.int64)
    repeated = np.flatnonzero(np.diff(t) <= 0)
    if repeated.size:
        index = int(repeated[0]) + 1
        raise ValueError(f"pose times must increase: pose {index} at {t[index]} ns follows {t[index - 1]} ns")
    rotations = Rotation.from_quat(np.asarray(poses.orientation, dtype=np.float64))
    relative = rotations[:-1].inv() * rotations[1:]
    dt_s = np.diff(t).astype(np.float64) / NANOSECONDS_PER_SECOND
    omega = relative.as_rotvec() / dt_s[:, None]
    midpoints = t[:-1] + np.diff(t) // 2
    return GroundTruth(midpoints, omega, source="mocap orientations")
