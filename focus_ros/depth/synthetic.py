"""Events made directly from geometry, for depth tests and benchmarks (no rendering).

A textured plane, fronto-parallel to the camera at t = 0: ``points`` random 3-D points on the plane Z = depth_m
of the world frame (the camera frame at t = 0), seen by a camera that translates along
its x axis at ``speed_m_s`` (optionally rotating about its y axis). Each event is one of
the points projected (with the calibration's distortion) at a random time and rounded to
the nearest pixel, as a real sensor would; ``event_count`` events in view (the points
are drawn at random times until there are that many); each point has one polarity (an
edge moving one way keeps its contrast sign). Nothing here models
intensity: the point is known depth, for checking the geometry of the DSI and the depth
read from it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from focus_ros.camera import Calibration
from focus_ros.events import NANOSECONDS_PER_SECOND, Events
from focus_ros.poses import Trajectory, matrix_to_quaternion


@dataclass
class SyntheticPlane:
    """events, the trajectory that made them, the texture points (world, m) and the plane depth (m)."""

    events: Events
    trajectory: Trajectory
    points_world: np.ndarray
    depth_m: float

    def depth_at(self, world_from_camera: np.ndarray, pixels: np.ndarray, calibration: Calibration) -> np.ndarray:
        """True depth (m, along the optical axis) of the plane at ``pixels`` (M, 2) (x, y) of
        the undistorted grid of a camera at ``world_from_camera``: the plane is Z = depth_m
        in the world frame, fronto-parallel only to the camera at t = 0 when it rotates."""
        pixels = np.asarray(pixels, dtype=np.float64)
        bearings = np.stack([(pixels[:, 0] - calibration.cx) / calibration.fx,
                             (pixels[:, 1] - calibration.cy) / calibration.fy, np.ones(len(pixels))], axis=1)
        world_z = bearings @ np.asarray(world_from_camera)[2, :3]
        return (self.depth_m - world_from_camera[2, 3]) / world_z


def _rotation_y(angle: np.ndarray) -> np.ndarray:
    c, s = np.cos(angle), np.sin(angle)
    matrix = np.zeros(np.shape(angle) + (3, 3))
    matrix[..., 0, 0] = c
    matrix[..., 0, 2] = s
    matrix[..., 1, 1] = 1.0
    matrix[..., 2, 0] = -s
    matrix[..., 2, 2] = c
    return matrix


def translating_trajectory(duration_s: float, speed_m_s: float, rotation_rad_s: float = 0.0,
                           pose_rate_hz: float = 200.0) -> Trajectory:
    """Poses of a camera moving along its x axis at ``speed_m_s`` from the origin (and
    turning about y at ``rotation_rad_s``), sampled at ``pose_rate_hz`` over [0, duration_s]."""
    count = int(round(duration_s * pose_rate_hz)) + 1
    t_ns = np.round(np.linspace(0.0, duration_s, count) * NANOSECONDS_PER_SECOND).astype(np.int64)
    seconds = t_ns / NANOSECONDS_PER_SECOND
    position = np.stack([speed_m_s * seconds, np.zeros(count), np.zeros(count)], axis=1)
    quaternions = np.array([matrix_to_quaternion(r) for r in _rotation_y(rotation_rad_s * seconds)])
    return Trajectory(t_ns, position, quaternions, source="synthetic poses")


def plane_events(calibration: Calibration, depth_m: float = 1.0, event_count: int = 200_000,
                 duration_s: float = 1.0, speed_m_s: float = 0.25, rotation_rad_s: float = 0.0,
                 points: int = 2000, seed: int = 0) -> SyntheticPlane:
    """Events of a textured plane at ``depth_m`` (see the module docstring)."""
    generator = np.random.default_rng(seed)
    trajectory = translating_trajectory(duration_s, speed_m_s, rotation_rad_s)
    # texture points spread over what the camera sees during the motion
    half_width = depth_m * (calibration.width / 2) / calibration.fx
    half_height = depth_m * (calibration.height / 2) / calibration.fy
    low_x, high_x = -half_width, half_width + max(0.0, speed_m_s * duration_s)
    points_world = np.stack([generator.uniform(low_x, high_x, points),
                             generator.uniform(-half_height, half_height, points),
                             np.full(points, float(depth_m))], axis=1)
    # draw more than needed, keep event_count of those in view (fewer if too few are)
    drawn = int(event_count * 1.8) + 100
    t_ns = np.sort(generator.integers(0, int(duration_s * NANOSECONDS_PER_SECOND) + 1, drawn))
    which = generator.integers(0, points, drawn)
    rotations, positions = trajectory.interpolate(t_ns)
    camera = np.einsum("nji,nj->ni", rotations, points_world[which] - positions)  # R^T (X - p)
    pixels = calibration.project(camera)
    x = np.round(pixels[:, 0])
    y = np.round(pixels[:, 1])
    inside = np.flatnonzero((camera[:, 2] > 0) & (x >= 0) & (y >= 0) & (x < calibration.width)
                            & (y < calibration.height))
    if len(inside) > event_count:
        inside = np.sort(generator.choice(inside, event_count, replace=False))
    point_polarity = generator.integers(0, 2, points)  # an edge keeps its polarity while it moves
    events = Events.from_arrays(x[inside], y[inside], t_ns[inside], point_polarity[which[inside]])
    return SyntheticPlane(events, trajectory, points_world, float(depth_m))
