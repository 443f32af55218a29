"""Camera motion for the event-camera simulator: angular-velocity profiles, positions, trajectories.

Conventions (shared with :mod:`focus_ros.sources.simulator`): camera frame x right, y down,
z forward; world frame z up, gravity (0, 0, -9.81) m/s^2; at t = 0 the camera looks along
world +x (:data:`CAMERA_LOOKING_ALONG_X`). With the body angular velocity ω (rad/s, camera
frame), ``R_world_camera(t + dt) = R_world_camera(t) · exp([ω]× dt)``; :class:`Trajectory`
integrates that exactly (exponential-map composition on a 0.1 ms grid with the mid-point ω,
error ~1e-5 rad over 10 s), so ``R^T dR/dt = [ω]×``. Positions (m, world frame) come with
analytic velocity and acceleration, for the IMU's specific force.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np
from numba import njit

#: R_world_camera at t = 0: camera z (forward) = world +x, camera x (right) = world -y,
#: camera y (down) = world -z. Columns are the camera axes in world coordinates.
CAMERA_LOOKING_ALONG_X = np.array([[0.0, 0.0, 1.0], [-1.0, 0.0, 0.0], [0.0, -1.0, 0.0]])

#: gravity in the world frame (z up), m/s^2
GRAVITY_WORLD = np.array([0.0, 0.0, -9.81])

#: angular velocity profile: times (s, shape N) -> angular velocity (N, 3) rad/s, camera frame
AngularVelocityProfile = Callable[[np.ndarray], np.ndarray]


@dataclass(frozen=True)
class ConstantAngularVelocity:
    """A constant angular velocity (rad/s, camera frame)."""

    angular_velocity: tuple

    def __call__(self, t_s: np.ndarray) -> np.ndarray:
        t_s = np.atleast_1d(np.asarray(t_s, np.float64))
        return np.tile(np.asarray(self.angular_velocity, np.float64), (len(t_s), 1))


class OscillatingAngularVelocity:
    """Smooth oscillations about all three camera axes with a linearly ramping amplitude.

    ``ω_i(t) = s_i · ramp(t) · Σ_j a_ij sin(2π f_ij t + φ_ij)`` (rad/s) with
    ``ramp(t) = r0 + (1 - r0) · t / duration``; frequencies f_ij uniform in
    ``frequency_range_hz``, amplitudes and phases random from the seed, and the scale s_i
    chosen so that max over [0, duration] of |ω_i| is ``peak_rad_s`` on every axis —
    like the dataset's rotation sequences, which end shaking at about ±700 deg/s.
    """

    def __init__(self, peak_rad_s: float, duration_s: float, seed: int,
                 ramp_start_fraction: float = 0.05, frequency_range_hz=(0.7, 2.2),
                 components_per_axis: int = 3):
        if peak_rad_s < 0 or duration_s <= 0:
            raise ValueError(f"peak angular velocity must be >= 0 and duration > 0, got "
                             f"{peak_rad_s} rad/s, {duration_s} s")
        rng = np.random.default_rng(np.random.SeedSequence([seed, 0xA9E10C]))
        self.peak_rad_s = float(peak_rad_s)
        self.duration_s = float(duration_s)
        self.ramp_start_fraction = float(ramp_start_fraction)
        self.frequencies_hz = rng.uniform(*frequency_range_hz, (3, components_per_axis))
        self.amplitudes = rng.uniform(0.3, 1.0, (3, components_per_axis))
        self.phases = rng.uniform(0, 2 * np.pi, (3, components_per_axis))
        self.scales = np.ones(3)
        grid = np.linspace(0.0, duration_s, int(duration_s * 2000) + 2)
        unscaled_peak = np.abs(self(grid)).max(axis=0)
        self.scales = np.where(unscaled_peak > 0, self.peak_rad_s / np.maximum(unscaled_peak, 1e-300), 0.0)

    def ramp(self, t_s: np.ndarray) -> np.ndarray:
        return self.ramp_start_fraction + (1.0 - self.ramp_start_fraction) * t_s / self.duration_s

    def __call__(self, t_s: np.ndarray) -> np.ndarray:
        t_s = np.atleast_1d(np.asarray(t_s, np.float64))
        angles = 2 * np.pi * self.frequencies_hz[None] * t_s[:, None, None] + self.phases[None]
        oscillation = (self.amplitudes[None] * np.sin(angles)).sum(axis=2)
        return self.scales[None] * self.ramp(t_s)[:, None] * oscillation


class OscillatingPosition:
    """Camera position (m, world frame) ``p0 + Σ_j b_ij sin(2π g_ij t + ψ_ij)`` per axis.

    Smooth, with analytic velocity and acceleration; ``amplitude_m`` bounds each axis'
    excursion from ``start`` (m).
    """

    def __init__(self, amplitude_m: float, seed: int, start=(0.0, 0.0, 0.0),
                 frequency_range_hz=(0.3, 0.9), components_per_axis: int = 2):
        rng = np.random.default_rng(np.random.SeedSequence([seed, 0x7051]))
        self.start = np.asarray(start, np.float64)
        self.frequencies_hz = rng.uniform(*frequency_range_hz, (3, components_per_axis))
        weights = rng.uniform(0.3, 1.0, (3, components_per_axis))
        self.amplitudes = amplitude_m * weights / weights.sum(axis=1, keepdims=True)
        self.phases = rng.uniform(0, 2 * np.pi, (3, components_per_axis))

    def _terms(self, t_s, derivative: int) -> np.ndarray:
        t_s = np.atleast_1d(np.asarray(t_s, np.float64))
        omega = 2 * np.pi * self.frequencies_hz[None]
        angles = omega * t_s[:, None, None] + self.phases[None]
        # d^n/dt^n sin(w t + φ) = w^n sin(w t + φ + n π/2)
        return (self.amplitudes[None] * omega ** derivative
                * np.sin(angles + derivative * np.pi / 2)).sum(axis=2)

    def position(self, t_s) -> np.ndarray:
        # subtract the value at t = 0 so that the camera starts at `start`
        return self.start + self._terms(t_s, 0) - self._terms(np.zeros(1), 0)

    def velocity(self, t_s) -> np.ndarray:
        return self._terms(t_s, 1)

    def acceleration(self, t_s) -> np.ndarray:
        return self._terms(t_s, 2)


class StaticPosition:
    """A camera that only rotates about its optical centre (position fixed, m)."""

    def __init__(self, position=(0.0, 0.0, 0.0)):
        self.start = np.asarray(position, np.float64)

    def position(self, t_s) -> np.ndarray:
        return np.tile(self.start, (len(np.atleast_1d(t_s)), 1))

    def velocity(self, t_s) -> np.ndarray:
        return np.zeros((len(np.atleast_1d(t_s)), 3))

    def acceleration(self, t_s) -> np.ndarray:
        return np.zeros((len(np.atleast_1d(t_s)), 3))


class LinearPosition:
    """A camera translating at constant velocity: ``start + velocity · t`` (m, m/s, world frame)."""

    def __init__(self, start, velocity_m_s):
        self.start = np.asarray(start, np.float64)
        self.velocity_m_s = np.asarray(velocity_m_s, np.float64)

    def position(self, t_s) -> np.ndarray:
        t_s = np.atleast_1d(np.asarray(t_s, np.float64))
        return self.start + t_s[:, None] * self.velocity_m_s

    def velocity(self, t_s) -> np.ndarray:
        return np.tile(self.velocity_m_s, (len(np.atleast_1d(t_s)), 1))

    def acceleration(self, t_s) -> np.ndarray:
        return np.zeros((len(np.atleast_1d(t_s)), 3))


@njit(cache=True, nogil=True)
def _rotation_exp(wx, wy, wz):
    """exp([w]×) for a rotation vector w (rad), Rodrigues' formula, as a 3x3 array."""
    angle = math.sqrt(wx * wx + wy * wy + wz * wz)
    if angle < 1e-8:
        a, b = 1.0 - angle * angle / 6.0, 0.5 - angle * angle / 24.0
    else:
        a, b = math.sin(angle) / angle, (1.0 - math.cos(angle)) / (angle * angle)
    result = np.empty((3, 3))
    result[0, 0] = 1.0 - b * (wy * wy + wz * wz)
    result[1, 1] = 1.0 - b * (wx * wx + wz * wz)
    result[2, 2] = 1.0 - b * (wx * wx + wy * wy)
    result[0, 1] = -a * wz + b * wx * wy
    result[1, 0] = a * wz + b * wx * wy
    result[0, 2] = a * wy + b * wx * wz
    result[2, 0] = -a * wy + b * wx * wz
    result[1, 2] = -a * wx + b * wy * wz
    result[2, 1] = a * wx + b * wy * wz
    return result


@njit(cache=True, nogil=True)
def _integrate_orientation(initial, rotation_vectors):
    """R_0 = initial, R_{k+1} = R_k · exp([rotation_vectors[k]]×); returns (K+1, 3, 3)."""
    result = np.empty((len(rotation_vectors) + 1, 3, 3))
    result[0] = initial
    for k in range(len(rotation_vectors)):
        w = rotation_vectors[k]
        result[k + 1] = result[k] @ _rotation_exp(w[0], w[1], w[2])
    return result


def rotation_exp(rotation_vectors: np.ndarray) -> np.ndarray:
    """exp([w]×) for rotation vectors (N, 3) rad -> (N, 3, 3), Rodrigues' formula."""
    w = np.atleast_2d(rotation_vectors)
    angle = np.linalg.norm(w, axis=1)
    small = angle < 1e-8
    safe = np.where(small, 1.0, angle)
    a = np.where(small, 1.0 - angle ** 2 / 6.0, np.sin(safe) / safe)
    b = np.where(small, 0.5 - angle ** 2 / 24.0, (1.0 - np.cos(safe)) / safe ** 2)
    skew = np.zeros((len(w), 3, 3))
    skew[:, 0, 1], skew[:, 0, 2], skew[:, 1, 2] = -w[:, 2], w[:, 1], -w[:, 0]
    skew = skew - skew.transpose(0, 2, 1)
    return np.eye(3)[None] + a[:, None, None] * skew + b[:, None, None] * (skew @ skew)


class Trajectory:
    """Camera motion: orientation integrated from an angular-velocity profile, plus a position.

    ``angular_velocity(t)`` (rad/s, camera frame) is the profile itself;
    ``orientation(t)`` is R_world_camera, the integral of ``dR/dt = R [ω]×`` from
    ``initial_orientation`` at t = 0, computed on an ``integration_step_s`` grid by
    exponential-map composition with the mid-point ω, and between grid nodes by one
    more exponential step. Valid for t in [0, duration_s].
    """

    def __init__(self, angular_velocity: AngularVelocityProfile, duration_s: float,
                 position=None, initial_orientation: np.ndarray = CAMERA_LOOKING_ALONG_X,
                 integration_step_s: float = 1e-4):
        if duration_s <= 0:
            raise ValueError(f"trajectory duration must be > 0 s, got {duration_s}")
        self.angular_velocity = angular_velocity
        self.duration_s = float(duration_s)
        self.position_model = position if position is not None else StaticPosition()
        self.step_s = float(integration_step_s)
        nodes = int(math.ceil(duration_s / self.step_s)) + 2
        self._node_times = np.arange(nodes) * self.step_s
        midpoint_rates = angular_velocity(self._node_times[:-1] + 0.5 * self.step_s)
        self._node_orientations = _integrate_orientation(
            np.asarray(initial_orientation, np.float64), np.ascontiguousarray(midpoint_rates * self.step_s))

    def orientation(self, t_s) -> np.ndarray:
        """R_world_camera at times t_s (s) -> (N, 3, 3)."""
        t_s = np.atleast_1d(np.asarray(t_s, np.float64))
        node = np.clip(np.floor(t_s / self.step_s).astype(np.int64), 0, len(self._node_times) - 2)
        since_node = t_s - self._node_times[node]
        rates = self.angular_velocity(self._node_times[node] + 0.5 * since_node)
        return self._node_orientations[node] @ rotation_exp(rates * since_node[:, None])

    def position(self, t_s) -> np.ndarray:
        """Camera position in the world frame (m) -> (N, 3)."""
        return self.position_model.position(t_s)

    def velocity_camera(self, t_s) -> np.ndarray:
        """Camera linear velocity in the camera frame (m/s) -> (N, 3)."""
        rotation = self.orientation(t_s)
        return np.einsum("nji,nj->ni", rotation, self.position_model.velocity(t_s))

    def specific_force(self, t_s) -> np.ndarray:
        """What an accelerometer at the camera centre reads: R^T (a_world - g_world), m/s^2."""
        rotation = self.orientation(t_s)
        return np.einsum("nji,nj->ni", rotation, self.position_model.acceleration(t_s) - GRAVITY_WORLD)


__all__ = ["CAMERA_LOOKING_ALONG_X", "GRAVITY_WORLD", "AngularVelocityProfile", "ConstantAngularVelocity",
           "OscillatingAngularVelocity", "OscillatingPosition", "StaticPosition", "LinearPosition", "rotation_exp",
           "Trajectory"]
