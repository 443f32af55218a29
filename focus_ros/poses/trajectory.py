"""A camera trajectory: timestamped world-from-camera poses and their interpolation.

Conventions (the Event Camera Dataset's ``groundtruth.txt``, ROS ``PoseStamped``):

- times t in int64 nanoseconds, on the events' clock after ``time_offset_ns`` is added;
- positions in metres, the camera's (or body's) origin in the world frame;
- orientations as unit quaternions (qx, qy, qz, qw), rotating camera (body) coordinates
  into world coordinates, so ``X_world = R · X_camera + p``;
- camera frame x right, y down, z forward (optical axis).

Interpolation is linear in position and spherical-linear (slerp) in rotation. When the
poses are of a body (a motion-capture marker, an IMU), give the fixed
``camera_from_body`` transform (4×4, maps body coordinates to camera coordinates):
``world_from_camera = world_from_body · inverse(camera_from_body)``.

Built from arrays (the constructor), from a ``sources.recording.Poses``
(:meth:`Trajectory.from_poses`), or one pose at a time (:meth:`Trajectory.append`, for a node that
receives them as a stream). This module knows no file format: the readers of ``groundtruth.txt``
and of a bag's pose topic are in :mod:`focus_ros.sources.trajectory_readers`.
"""

from __future__ import annotations

import numpy as np

from focus_ros.events import NANOSECONDS_PER_SECOND


class PoseError(ValueError):
    """Poses that cannot be used: none, out of order, not finite, not unit quaternions."""


class PoseCoverageError(PoseError):
    """Times (events) outside the time span of the poses; the message names both ranges."""


def _seconds(t_ns) -> str:
    return f"{int(t_ns) / NANOSECONDS_PER_SECOND:.6f} s"


def quaternion_to_matrix(quaternions: np.ndarray) -> np.ndarray:
    """Rotation matrices (..., 3, 3) of unit quaternions (..., 4) given as (qx, qy, qz, qw)."""
    q = np.asarray(quaternions, dtype=np.float64)
    x, y, z, w = q[..., 0], q[..., 1], q[..., 2], q[..., 3]
    matrix = np.empty(q.shape[:-1] + (3, 3))
    matrix[..., 0, 0] = 1 - 2 * (y * y + z * z)
    matrix[..., 0, 1] = 2 * (x * y - z * w)
    matrix[..., 0, 2] = 2 * (x * z + y * w)
    matrix[..., 1, 0] = 2 * (x * y + z * w)
    matrix[..., 1, 1] = 1 - 2 * (x * x + z * z)
    matrix[..., 1, 2] = 2 * (y * z - x * w)
    matrix[..., 2, 0] = 2 * (x * z - y * w)
    matrix[..., 2, 1] = 2 * (y * z + x * w)
    matrix[..., 2, 2] = 1 - 2 * (x * x + y * y)
    return matrix


def matrix_to_quaternion(matrix: np.ndarray) -> np.ndarray:
    """Unit quaternion (qx, qy, qz, qw), qw ≥ 0, of a 3×3 rotation matrix."""
    from scipy.spatial.transform import Rotation

    q = Rotation.from_matrix(np.asarray(matrix, dtype=np.float64)).as_quat()
    return q if q[3] >= 0 else -q


def slerp(q0: np.ndarray, q1: np.ndarray, fraction: np.ndarray) -> np.ndarray:
    """Spherical linear interpolation of unit quaternions (N, 4) at fractions (N,) in [0, 1]
    (the shorter arc: q1 is negated where q0·q1 < 0)."""
    q0 = np.asarray(q0, dtype=np.float64)
    q1 = np.asarray(q1, dtype=np.float64).copy()
    fraction = np.asarray(fraction, dtype=np.float64)[..., None]
    dot = np.sum(q0 * q1, axis=-1, keepdims=True)
    q1 = np.where(dot < 0, -q1, q1)
    dot = np.abs(dot)
    angle = np.arccos(np.clip(dot, -1.0, 1.0))
    sin_angle = np.sin(angle)
    near = sin_angle < 1e-9
    safe = np.where(near, 1.0, sin_angle)
    w0 = np.where(near, 1.0 - fraction, np.sin((1.0 - fraction) * angle) / safe)
    w1 = np.where(near, fraction, np.sin(fraction * angle) / safe)
    result = w0 * q0 + w1 * q1
    return result / np.linalg.norm(result, axis=-1, keepdims=True)


def pose_matrix(rotation: np.ndarray, position: np.ndarray) -> np.ndarray:
    """4×4 homogeneous transform from a 3×3 rotation and a 3-vector translation (m)."""
    matrix = np.eye(4)
    matrix[:3, :3] = rotation
    matrix[:3, 3] = position
    return matrix


class Trajectory:
    """Timestamped world-from-camera poses with interpolation.

    t_ns: (N,) int64 ns, strictly increasing (after ``time_offset_ns`` is added);
    position_m: (N, 3) m; orientation_xyzw: (N, 4) unit quaternions (normalized here;
    a norm off by more than 1 % is an error).
    camera_from_body: optional fixed 4×4 transform (m) when the poses are of a body, not
    of the camera (default: the poses are the camera's).
    time_offset_ns: added to the pose times to put them on the events' clock
    (t_events = t_poses + time_offset_ns; default 0).
    An empty trajectory is allowed (for :meth:`append`); using it raises :class:`PoseError`.
    """

    def __init__(self, t_ns=(), position_m=None, orientation_xyzw=None, camera_from_body=None,
                 time_offset_ns: int = 0, source: str = "poses"):
        self.source = source
        self.time_offset_ns = int(time_offset_ns)
        if camera_from_body is None:
            self._camera_from_body = None
        else:
            camera_from_body = np.asarray(camera_from_body, dtype=np.float64)
            if camera_from_body.shape != (4, 4) or not np.all(np.isfinite(camera_from_body)):
                raise PoseError(f"camera_from_body must be a finite 4x4 transform, got shape "
                                f"{camera_from_body.shape}")
            rotation = camera_from_body[:3, :3]
            if not np.allclose(rotation @ rotation.T, np.eye(3), atol=1e-6):
                raise PoseError("camera_from_body: the 3x3 block is not a rotation")
            self._camera_from_body = camera_from_body
            self._body_from_camera = np.linalg.inv(camera_from_body)
        t = np.asarray(t_ns, dtype=np.int64).reshape(-1)
        count = len(t)
        position = (np.empty((0, 3)) if position_m is None
                    else np.asarray(position_m, dtype=np.float64).reshape(-1, 3))
        orientation = (np.empty((0, 4)) if orientation_xyzw is None
                       else np.asarray(orientation_xyzw, dtype=np.float64).reshape(-1, 4))
        if not (len(position) == len(orientation) == count):
            raise PoseError(f"{source}: {count} times but {len(position)} positions and "
                            f"{len(orientation)} orientations")
        self._t = np.empty(max(16, count), np.int64)
        self._position = np.empty((max(16, count), 3))
        self._orientation = np.empty((max(16, count), 4))
        self._count = 0
        if count:
            self._check_and_store(t + self.time_offset_ns, position, orientation)

    # ------------------------------------------------------------------ construction

    @classmethod
    def from_poses(cls, poses, camera_from_body=None, time_offset_ns: int = 0,
                   source: str = "poses") -> "Trajectory":
        """From a :class:`focus_ros.sources.recording.Poses` (t ns, position m, qx qy qz qw)."""
        if poses is None or len(poses) == 0:
            raise PoseError(f"{source}: no poses")
        return cls(poses.t, poses.position, poses.orientation, camera_from_body, time_offset_ns, source)

    def _check_and_store(self, t: np.ndarray, position: np.ndarray, orientation: np.ndarray) -> None:
        if not (np.all(np.isfinite(position)) and np.all(np.isfinite(orientation))):
            bad = int(np.flatnonzero(~(np.isfinite(position).all(1) & np.isfinite(orientation).all(1)))[0])
            raise PoseError(f"{self.source}: pose {self._count + bad} is not finite")
        norms = np.linalg.norm(orientation, axis=1)
        off = np.flatnonzero(np.abs(norms - 1.0) > 0.01)
        if off.size:
            raise PoseError(f"{self.source}: pose {self._count + int(off[0])} has a quaternion of norm "
                            f"{norms[off[0]]:.4g}, not a unit quaternion (qx qy qz qw)")
        previous = self._t[self._count - 1] if self._count else None
        steps = np.diff(t if previous is None else np.concatenate([[previous], t]))
        backwards = np.flatnonzero(steps <= 0)
        if backwards.size:
            index = int(backwards[0]) + (1 if previous is None else 0)
            before = t[index - 1] if previous is None else (previous if index == 0 else t[index - 1])
            raise PoseError(f"{self.source}: poses out of order: pose {self._count + index} at "
                            f"{_seconds(t[index])} does not follow {_seconds(before)}")
        orientation = orientation / norms[:, None]
        if self._camera_from_body is not None:
            rotation = quaternion_to_matrix(orientation) @ self._body_from_camera[:3, :3]
            position = position + np.einsum("nij,j->ni", quaternion_to_matrix(orientation),
                                             self._body_from_camera[:3, 3])
            from scipy.spatial.transform import Rotation

            orientation = Rotation.from_matrix(rotation).as_quat()
        needed = self._count + len(t)
        if needed > len(self._t):
            capacity = max(needed, 2 * len(self._t))
            self._t = np.resize(self._t, capacity)
            self._position = np.resize(self._position, (capacity, 3))
            self._orientation = np.resize(self._orientation, (capacity, 4))
        self._t[self._count:needed] = t
        self._position[self._count:needed] = position
        self._orientation[self._count:needed] = orientation
        self._count = needed

    def append(self, t_ns: int, position_m, orientation_xyzw) -> None:
        """Add one pose (pose clock, ns; m; qx qy qz qw) after the last one. PoseError when it
        does not come strictly after the last pose, is not finite or not a unit quaternion."""
        self._check_and_store(np.array([int(t_ns) + self.time_offset_ns], np.int64),
                              np.asarray(position_m, dtype=np.float64).reshape(1, 3),
                              np.asarray(orientation_xyzw, dtype=np.float64).reshape(1, 4))

    def discard_before(self, t_ns: int) -> None:
        """Forget poses no longer needed: keep the last pose at or before ``t_ns`` (events'
        clock) and everything after it (bounds memory on a stream)."""
        keep_from = max(0, int(np.searchsorted(self.t_ns, t_ns, side="right")) - 1)
        if keep_from:
            count = self._count - keep_from
            self._t[:count] = self._t[keep_from:self._count]
            self._position[:count] = self._position[keep_from:self._count]
            self._orientation[:count] = self._orientation[keep_from:self._count]
            self._count = count

    # ------------------------------------------------------------------ access

    def __len__(self) -> int:
        return self._count

    @property
    def t_ns(self) -> np.ndarray:
        """Pose times (N,) int64 ns on the events' clock (read-only view)."""
        view = self._t[:self._count]
        view.flags.writeable = False
        return view

    @property
    def position_m(self) -> np.ndarray:
        """Camera positions (N, 3) m in the world frame."""
        return self._position[:self._count]

    @property
    def orientation_xyzw(self) -> np.ndarray:
        """Camera orientations (N, 4) unit quaternions (qx, qy, qz, qw), camera to world."""
        return self._orientation[:self._count]

    @property
    def t_range_ns(self) -> tuple[int, int]:
        """(first, last) pose time in ns (events' clock). PoseError when empty."""
        if self._count == 0:
            raise PoseError(f"{self.source}: no poses")
        return int(self._t[0]), int(self._t[self._count - 1])

    def covers(self, t_first_ns: int, t_last_ns: int) -> bool:
        """True when [t_first_ns, t_last_ns] lies within the poses' time span."""
        if self._count == 0:
            return False
        first, last = self.t_range_ns
        return first <= int(t_first_ns) and int(t_last_ns) <= last

    def check_covers(self, t_first_ns: int, t_last_ns: int, what: str = "events") -> None:
        """PoseCoverageError naming both time ranges unless the poses cover [first, last]."""
        if self._count == 0:
            raise PoseError(f"{self.source}: no poses (needed for {what} "
                            f"{_seconds(t_first_ns)} - {_seconds(t_last_ns)})")
        if not self.covers(t_first_ns, t_last_ns):
            first, last = self.t_range_ns
            raise PoseCoverageError(f"{what} span {_seconds(t_first_ns)} - {_seconds(t_last_ns)} but "
                                    f"{self.source} cover only {_seconds(first)} - {_seconds(last)}")

    def interpolate(self, t_ns) -> tuple[np.ndarray, np.ndarray]:
        """(rotations (M, 3, 3), positions (M, 3) m) of world_from_camera at times t_ns (M,)
        (events' clock). PoseCoverageError for a time outside the poses' span."""
        t = np.asarray(t_ns, dtype=np.int64).reshape(-1)
        if t.size == 0:
            return np.empty((0, 3, 3)), np.empty((0, 3))
        self.check_covers(int(t.min()), int(t.max()), "requested times")
        times = self.t_ns
        if self._count == 1:
            index = np.zeros(len(t), np.int64)
            fraction = np.zeros(len(t))
            upper = index
        else:
            index = np.clip(np.searchsorted(times, t, side="right") - 1, 0, self._count - 2)
            upper = index + 1
            fraction = (t - times[index]).astype(np.float64) / (times[upper] - times[index]).astype(np.float64)
        position = self._position[index] + fraction[:, None] * (self._position[upper] - self._position[index])
        orientation = slerp(self._orientation[index], self._orientation[upper], fraction)
        return quaternion_to_matrix(orientation), position

    def world_from_camera(self, t_ns: int) -> np.ndarray:
        """The 4×4 world_from_camera transform (m) at one time (events' clock, ns)."""
        rotation, position = self.interpolate([t_ns])
        return pose_matrix(rotation[0], position[0])

    def baseline_m(self, t_first_ns: int, t_last_ns: int) -> float:
        """Largest distance (m) between the camera position at t_first_ns and any position
        over [t_first_ns, t_last_ns] (pose samples and both ends)."""
        times = self.t_ns
        inside = times[(times > t_first_ns) & (times < t_last_ns)]
        _, positions = self.interpolate(np.concatenate([[t_first_ns], inside, [t_last_ns]]))
        return float(np.max(np.linalg.norm(positions - positions[0], axis=1)))
