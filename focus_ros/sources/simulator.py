"""An event-camera simulator with ground truth, in the manner of ESIM.

A camera moves in front of a textured scene (:mod:`focus_ros.sources.scenes`). The
simulator renders the log intensity seen by every pixel at an adaptive fine time step
(the image moves at most ``max_pixel_motion_px`` per step, ESIM's adaptive sampling),
interpolates each pixel's log intensity linearly between two renders, and emits an
event each time it crosses the pixel's reference level by ±C (several per step when
needed), timestamped at the interpolated crossing time; the reference then moves by
±C. Sensor non-idealities: per-pixel Gaussian mismatch of the thresholds C+ and C-
(fixed per pixel from the seed), a refractory period (a crossing within it of the
pixel's previous event is suppressed but still moves the reference, as in ESIM) and
background-activity noise (Poisson per pixel, random polarity).

Geometry and conventions
------------------------
- Camera frame: x right, y down, z forward. World frame: z up, gravity (0, 0, -9.81)
  m/s^2; at t = 0 the camera looks along world +x (:data:`CAMERA_LOOKING_ALONG_X`).
- Pixels live in the DISTORTED sensor image, like a real DAVIS: pixel (u, v) sees along
  the undistorted bearing (x, y, 1) of that pixel (the calibration's bearing table).
- Rotation: with the body angular velocity ω (rad/s, camera frame),
  ``R_world_camera(t + dt) = R_world_camera(t) · exp([ω]× dt)``, and a static world
  direction d is seen at the bearing ``R_world_camera(t)^T d``. Hence, for constant ω,
  a bearing seen at t_k was seen at ``t_ref`` along ``exp([ω]× (t_k - t_ref)) · bearing_k``:
  exactly the engine's rotational warp.
- Outputs (a :class:`~focus_ros.sources.recording.Recording`, times int64 ns from 0):
  time-sorted events; IMU at ``imu_rate_hz`` (≥ 1 kHz) with the ground-truth ω in the
  camera frame (rad/s) and the specific force ``R^T (a_world - g_world)`` (m/s^2);
  camera-in-world poses (qx, qy, qz, qw); depth maps (z in the camera frame, m) for
  planar scenes.

The orientation is the exact integral of ω (exponential-map composition on a 0.1 ms
grid with the mid-point ω, error ~1e-5 rad over 10 s), so ``R^T dR/dt = [ω]×``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
from numba import njit

from focus_ros.camera import Calibration
from focus_ros.events import NANOSECONDS_PER_SECOND, Events
from focus_ros.sources.recording import ImuSamples, Poses, Recording
from focus_ros.sources.scenes import (PanoramaScene, PlanarScene, cast_ray, sample_cube_map)

#: R_world_camera at t = 0: camera z (forward) = world +x, camera x (right) = world -y,
#: camera y (down) = world -z. Columns are the camera axes in world coordinates.
CAMERA_LOOKING_ALONG_X = np.array([[0.0, 0.0, 1.0], [-1.0, 0.0, 0.0], [0.0, -1.0, 0.0]])

#: gravity in the world frame (z up), m/s^2
GRAVITY_WORLD = np.array([0.0, 0.0, -9.81])

#: angular velocity profile: times (s, shape N) -> angular velocity (N, 3) rad/s, camera frame
AngularVelocityProfile = Callable[[np.ndarray], np.ndarray]


# ============================================================================ motion


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


# ============================================================================ sensor


@dataclass(frozen=True)
class SensorConfig:
    """Event-sensor parameters.

    contrast_threshold: nominal C (log-intensity units) for both polarities;
    threshold_mismatch: σ of the per-pixel Gaussian mismatch of C+ and C- (drawn
    independently, clipped at 0.2·C); refractory_period_s: minimum time (s) between two
    events of a pixel; noise_rate_hz: background activity per pixel (Hz);
    max_pixel_motion_px: adaptive render step bound (px of image motion per step);
    max_time_step_s: render step when the camera barely moves (s).
    """

    contrast_threshold: float = 0.2
    threshold_mismatch: float = 0.03
    refractory_period_s: float = 1e-4
    noise_rate_hz: float = 0.1
    max_pixel_motion_px: float = 0.3
    max_time_step_s: float = 1e-3

    def validate(self) -> None:
        """Raise ValueError naming the first out-of-range parameter."""
        checks = [("contrast_threshold", self.contrast_threshold > 0, "> 0"),
                  ("threshold_mismatch", self.threshold_mismatch >= 0, ">= 0"),
                  ("refractory_period_s", self.refractory_period_s >= 0, ">= 0"),
                  ("noise_rate_hz", self.noise_rate_hz >= 0, ">= 0"),
                  ("max_pixel_motion_px", 0 < self.max_pixel_motion_px <= 5, "in (0, 5]"),
                  ("max_time_step_s", 0 < self.max_time_step_s <= 0.1, "in (0, 0.1]")]
        for name, ok, expected in checks:
            if not ok or not np.isfinite(getattr(self, name)):
                raise ValueError(f"sensor parameter {name} must be {expected}, got {getattr(self, name)}")


def _image_motion_matrices(bearing_lut: np.ndarray, stride: int = 4, interior_stride: int = 20):
    """Per sample pixel, 2x3 matrices mapping ω (rad/s) and v/Z (1/s) to pixel velocity (px/s).

    Pixel velocity in the distorted image = J^-1 · (normalized-plane velocity), J being
    the Jacobian of the bearing table w.r.t. (u, v). Samples: the image border every
    ``stride`` px and an interior grid; the fastest pixel of a rigid motion is on the
    border, the grid is a safety net. Returns (rotation (P, 2, 3), translation (P, 2, 3)).
    """
    height, width, _ = bearing_lut.shape
    dx_dv, dx_du = np.gradient(bearing_lut[..., 0])
    dy_dv, dy_du = np.gradient(bearing_lut[..., 1])
    rows = np.r_[np.zeros(width // stride + 1), np.full(width // stride + 1, height - 1),
                 np.arange(0, height, stride), np.arange(0, height, stride)].astype(int)
    cols = np.r_[np.arange(0, width + stride, stride).clip(0, width - 1)[:width // stride + 1],
                 np.arange(0, width + stride, stride).clip(0, width - 1)[:width // stride + 1],
                 np.zeros(len(range(0, height, stride))), np.full(len(range(0, height, stride)), width - 1)
                 ].astype(int)
    grid_rows, grid_cols = np.mgrid[0:height:interior_stride, 0:width:interior_stride]
    rows = np.r_[rows, grid_rows.ravel()]
    cols = np.r_[cols, grid_cols.ravel()]
    jacobian = np.stack([np.stack([dx_du[rows, cols], dx_dv[rows, cols]], -1),
                         np.stack([dy_du[rows, cols], dy_dv[rows, cols]], -1)], -2)
    inverse = np.linalg.inv(jacobian)
    x, y = bearing_lut[rows, cols, 0], bearing_lut[rows, cols, 1]
    zero, one = np.zeros_like(x), np.ones_like(x)
    # bearing b = (x, y, 1): db/dt = b × ω; normalized flow (ḃ1 - x ḃ3, ḃ2 - y ḃ3)
    rotation = np.stack([np.stack([x * y, -(1 + x * x), y], -1),
                         np.stack([1 + y * y, -x * y, -x], -1)], -2)
    # translation v (camera frame) of a point at depth Z: ((-v_x + x v_z), (-v_y + y v_z)) / Z
    translation = np.stack([np.stack([-one, zero, x], -1), np.stack([zero, -one, y], -1)], -2)
    return inverse @ rotation, inverse @ translation


# ============================================================================ kernels


@njit(cache=True, nogil=True)
def _render_panorama(bearings, rotation, faces, out_log):
    """Log intensity of every pixel (bearings (N, 2) undistorted x/z, y/z) for R_world_camera."""
    r = rotation
    for i in range(bearings.shape[0]):
        bx, by = bearings[i, 0], bearings[i, 1]
        out_log[i] = sample_cube_map(faces, r[0, 0] * bx + r[0, 1] * by + r[0, 2],
                                     r[1, 0] * bx + r[1, 1] * by + r[1, 2],
                                     r[2, 0] * bx + r[2, 1] * by + r[2, 2])


@njit(cache=True, nogil=True)
def _render_planes(bearings, rotation, position, geometry, textures, texels_per_metre, out_log, out_depth):
    """Log intensity and depth (z in the camera frame, m) of every pixel, by ray casting."""
    r = rotation
    for i in range(bearings.shape[0]):
        bx, by = bearings[i, 0], bearings[i, 1]
        # the direction R·(x, y, 1) has camera z = 1, so the ray parameter is the depth
        value, depth = cast_ray(geometry, textures, texels_per_metre, position[0], position[1], position[2],
                                r[0, 0] * bx + r[0, 1] * by + r[0, 2],
                                r[1, 0] * bx + r[1, 1] * by + r[1, 2],
                                r[2, 0] * bx + r[2, 1] * by + r[2, 2])
        out_log[i] = value
        out_depth[i] = depth


@njit(cache=True, nogil=True)
def _grow(buffer, capacity):
    grown = np.empty(capacity, buffer.dtype)
    grown[:len(buffer)] = buffer
    return grown


@njit(cache=True, nogil=True)
def _emit_events_between_renders(previous_log, current_log, t0_ns, t1_ns, reference_log, last_event_ns,
                                 threshold_positive, threshold_negative, refractory_ns, width,
                                 x_out, y_out, t_out, p_out, count):
    """Events of all pixels between two renders, appended time-sorted at ``count``.

    Log intensity is linear in time between (t0_ns, previous_log) and (t1_ns,
    current_log); each crossing of reference ± C gives an event at the interpolated time,
    unless within the refractory period of the pixel's previous event (suppressed, but
    the reference still moves, as in ESIM). Returns the (possibly grown) buffers and count.
    """
    pixels = previous_log.shape[0]
    needed = 0
    for i in range(pixels):
        change = abs(np.float64(current_log[i]) - np.float64(previous_log[i]))
        if change > 0.0:
            needed += int(change / min(threshold_positive[i], threshold_negative[i])) + 1
    if count + needed > t_out.shape[0]:
        capacity = max(2 * t_out.shape[0], count + needed)
        x_out, y_out, t_out, p_out = (_grow(x_out, capacity), _grow(y_out, capacity),
                                      _grow(t_out, capacity), _grow(p_out, capacity))
    step_start = count
    duration_ns = np.float64(t1_ns - t0_ns)
    for i in range(pixels):
        start = np.float64(previous_log[i])
        change = np.float64(current_log[i]) - start
        if change == 0.0:
            continue
        if change > 0.0:
            polarity, threshold = 1, threshold_positive[i]
        else:
            polarity, threshold = -1, -threshold_negative[i]
        crossing = reference_log[i] + threshold
        while (crossing - start) / change <= 1.0:
            t = t0_ns + np.int64(round((crossing - start) / change * duration_ns))
            if t - last_event_ns[i] >= refractory_ns:
                x_out[count] = i % width
                y_out[count] = i // width
                t_out[count] = t
                p_out[count] = polarity
                count += 1
                last_event_ns[i] = t
            reference_log[i] = crossing
            crossing += threshold
    if count - step_start > 1:
        order = np.argsort(t_out[step_start:count], kind="mergesort") + step_start
        x_out[step_start:count] = x_out[order]
        y_out[step_start:count] = y_out[order]
        t_out[step_start:count] = t_out[order]
        p_out[step_start:count] = p_out[order]
    return x_out, y_out, t_out, p_out, count


@njit(cache=True, nogil=True)
def _simulate_panorama_steps(step_times_ns, rotations, bearings, faces, previous_log, reference_log,
                             last_event_ns, threshold_positive, threshold_negative, refractory_ns, width,
                             capacity):
    """Render at step_times_ns[1:] and emit the events since the previous render (state updated)."""
    x_out, y_out = np.empty(capacity, np.uint16), np.empty(capacity, np.uint16)
    t_out, p_out = np.empty(capacity, np.int64), np.empty(capacity, np.int8)
    count = 0
    current_log = np.empty_like(previous_log)
    for k in range(1, len(step_times_ns)):
        _render_panorama(bearings, rotations[k], faces, current_log)
        x_out, y_out, t_out, p_out, count = _emit_events_between_renders(
            previous_log, current_log, step_times_ns[k - 1], step_times_ns[k], reference_log, last_event_ns,
            threshold_positive, threshold_negative, refractory_ns, width, x_out, y_out, t_out, p_out, count)
        previous_log[:] = current_log
    return x_out[:count].copy(), y_out[:count].copy(), t_out[:count].copy(), p_out[:count].copy()


@njit(cache=True, nogil=True)
def _simulate_planes_steps(step_times_ns, rotations, positions, bearings, geometry, textures,
                           texels_per_metre, previous_log, reference_log, last_event_ns, threshold_positive,
                           threshold_negative, refractory_ns, width, capacity):
    """Like _simulate_panorama_steps for a planar scene (camera at positions[k])."""
    x_out, y_out = np.empty(capacity, np.uint16), np.empty(capacity, np.uint16)
    t_out, p_out = np.empty(capacity, np.int64), np.empty(capacity, np.int8)
    count = 0
    current_log = np.empty_like(previous_log)
    depth = np.empty(previous_log.shape[0], np.float64)
    for k in range(1, len(step_times_ns)):
        _render_planes(bearings, rotations[k], positions[k], geometry, textures, texels_per_metre,
                       current_log, depth)
        x_out, y_out, t_out, p_out, count = _emit_events_between_renders(
            previous_log, current_log, step_times_ns[k - 1], step_times_ns[k], reference_log, last_event_ns,
            threshold_positive, threshold_negative, refractory_ns, width, x_out, y_out, t_out, p_out, count)
        previous_log[:] = current_log
    return x_out[:count].copy(), y_out[:count].copy(), t_out[:count].copy(), p_out[:count].copy()


@njit(cache=True, nogil=True)
def _merge_with_refractory(signal_x, signal_y, signal_t, signal_p, noise_x, noise_y, noise_t, noise_p,
                           refractory_ns, width, height):
    """Merge two time-sorted event streams, dropping any event within the refractory
    period of the previous kept event of its pixel (signal first on equal times)."""
    total = len(signal_t) + len(noise_t)
    x_out, y_out = np.empty(total, np.uint16), np.empty(total, np.uint16)
    t_out, p_out = np.empty(total, np.int64), np.empty(total, np.int8)
    last = np.full(width * height, -(2 ** 62), np.int64)
    i = j = count = 0
    while i < len(signal_t) or j < len(noise_t):
        if j >= len(noise_t) or (i < len(signal_t) and signal_t[i] <= noise_t[j]):
            x, y, t, p = signal_x[i], signal_y[i], signal_t[i], signal_p[i]
            i += 1
        else:
            x, y, t, p = noise_x[j], noise_y[j], noise_t[j], noise_p[j]
            j += 1
        pixel = np.int64(y) * width + np.int64(x)
        if t - last[pixel] >= refractory_ns:
            x_out[count], y_out[count], t_out[count], p_out[count] = x, y, t, p
            last[pixel] = t
            count += 1
    return x_out[:count], y_out[:count], t_out[:count], p_out[:count]


# ============================================================================ simulator


class EventSimulator:
    """Simulates an event camera moving along ``trajectory`` in front of ``scene``.

    scene: :class:`PanoramaScene` (scene at infinity; the position is irrelevant) or
    :class:`PlanarScene` (ray-cast planes; depth maps exported). Per-pixel thresholds are
    drawn from ``seed`` at construction (``threshold_positive``/``threshold_negative``,
    (height, width)), noise from ``seed`` at each :meth:`simulate`: the same seed gives
    bitwise the same events.
    """

    def __init__(self, scene, trajectory: Trajectory, calibration: Calibration,
                 sensor: SensorConfig = SensorConfig(), seed: int = 0):
        if not isinstance(scene, (PanoramaScene, PlanarScene)):
            raise TypeError(f"scene must be a PanoramaScene or PlanarScene, got {type(scene).__name__}")
        sensor.validate()
        self.scene = scene
        self.trajectory = trajectory
        self.calibration = calibration
        self.sensor = sensor
        self.seed = int(seed)
        lut = calibration.bearing_lut()
        self.bearings = np.ascontiguousarray(lut.reshape(-1, 2))
        self._rotation_flow, self._translation_flow = _image_motion_matrices(lut)
        rng = np.random.default_rng(np.random.SeedSequence([self.seed, 0x7E5A]))
        shape = (calibration.height, calibration.width)
        floor = 0.2 * sensor.contrast_threshold
        self.threshold_positive = np.maximum(
            rng.normal(sensor.contrast_threshold, sensor.threshold_mismatch, shape), floor)
        self.threshold_negative = np.maximum(
            rng.normal(sensor.contrast_threshold, sensor.threshold_mismatch, shape), floor)

    # ---------------------------------------------------------------- rendering

    def render(self, t_s: float) -> tuple[np.ndarray, np.ndarray | None]:
        """(log intensity (height, width) float32, depth (height, width) m or None) at t_s."""
        rotation = self.trajectory.orientation(t_s)[0]
        shape = (self.calibration.height, self.calibration.width)
        log_image = np.empty(len(self.bearings), np.float32)
        if isinstance(self.scene, PanoramaScene):
            _render_panorama(self.bearings, rotation, self.scene.faces, log_image)
            return log_image.reshape(shape), None
        depth = np.empty(len(self.bearings), np.float64)
        _render_planes(self.bearings, rotation, self.trajectory.position(t_s)[0], self.scene.geometry,
                       self.scene.textures, self.scene.texels_per_metre, log_image, depth)
        return log_image.reshape(shape), depth.reshape(shape).astype(np.float32)

    def render_log_intensity(self, t_s: float) -> np.ndarray:
        """Log intensity log(I + offset) seen by every pixel at t_s (s), (height, width)."""
        return self.render(t_s)[0]

    # ---------------------------------------------------------------- time steps

    def image_speed_bound(self, t_s: np.ndarray, minimum_depth_m: float = np.inf) -> np.ndarray:
        """Upper estimate (px/s) of the fastest pixel's image motion at times t_s (s)."""
        omega = self.trajectory.angular_velocity(t_s)
        speed = np.sqrt((np.einsum("pij,nj->npi", self._rotation_flow, omega) ** 2).sum(axis=2)).max(axis=1)
        if isinstance(self.scene, PlanarScene) and np.isfinite(minimum_depth_m):
            velocity = self.trajectory.velocity_camera(t_s)
            translation = np.sqrt((np.einsum("pij,nj->npi", self._translation_flow, velocity) ** 2)
                                  .sum(axis=2)).max(axis=1)
            speed = speed + translation / minimum_depth_m
        return speed

    def step_times(self, start_s: float, end_s: float) -> np.ndarray:
        """Render times (s) from start_s to end_s: image motion ≤ max_pixel_motion_px per step.

        The step density 1/dt = max(speed / max_pixel_motion, 1 / max_time_step) is
        evaluated on a 0.5 ms grid (taking the larger of each interval's ends), integrated,
        and the steps are placed at equal increments of that integral (ESIM-like adaptive
        sampling, computed ahead since the motion is known).
        """
        grid = np.linspace(start_s, end_s, max(2, int(math.ceil((end_s - start_s) / 5e-4)) + 1))
        minimum_depth = self._minimum_depth(start_s, end_s)
        speed = np.empty(len(grid))
        for chunk in range(0, len(grid), 2000):
            speed[chunk:chunk + 2000] = self.image_speed_bound(grid[chunk:chunk + 2000], minimum_depth)
        density = np.maximum(speed / self.sensor.max_pixel_motion_px, 1.0 / self.sensor.max_time_step_s)
        interval_density = np.maximum(density[:-1], density[1:]) * 1.05
        phase = np.r_[0.0, np.cumsum(interval_density * np.diff(grid))]
        steps = int(math.ceil(phase[-1]))
        return np.interp(np.linspace(0.0, phase[-1], steps + 1), phase, grid)

    def _minimum_depth(self, start_s: float, end_s: float) -> float:
        """Smallest scene depth (m) seen between start_s and end_s, with a 30 % margin."""
        if not isinstance(self.scene, PlanarScene):
            return np.inf
        times = np.linspace(start_s, end_s, max(2, int((end_s - start_s) / 0.02) + 1))
        return 0.7 * min(float(np.min(self.render(t)[1])) for t in times)

    # ---------------------------------------------------------------- simulation

    def simulate(self, start_s: float = 0.0, end_s: float | None = None, imu_rate_hz: float = 1000.0,
                 pose_rate_hz: float = 1000.0, depth_rate_hz: float = 50.0,
                 progress: Callable[[float], None] | None = None) -> Recording:
        """Simulate [start_s, end_s] (s; default the whole trajectory) into a Recording.

        progress, if given, is called with the simulated seconds done since the last call.
        At start_s every pixel's reference level is its log intensity (no events).
        """
        end_s = self.trajectory.duration_s if end_s is None else float(end_s)
        if not (0.0 <= start_s < end_s <= self.trajectory.duration_s + 1e-12):
            raise ValueError(f"simulation interval [{start_s}, {end_s}] s must lie within the trajectory's "
                             f"[0, {self.trajectory.duration_s}] s and be non-empty")
        if imu_rate_hz < 1000.0:
            raise ValueError(f"IMU rate must be >= 1000 Hz, got {imu_rate_hz}")
        times_s = self.step_times(start_s, end_s)
        times_ns = np.round(times_s * NANOSECONDS_PER_SECOND).astype(np.int64)
        keep = np.r_[True, np.diff(times_ns) > 0]
        times_s, times_ns = times_s[keep], times_ns[keep]

        initial_log, _ = self.render(times_s[0])
        previous_log = np.ascontiguousarray(initial_log.ravel())
        reference_log = previous_log.astype(np.float64)
        last_event_ns = np.full(len(previous_log), -(2 ** 62), np.int64)
        thresholds = (np.ascontiguousarray(self.threshold_positive.ravel()),
                      np.ascontiguousarray(self.threshold_negative.ravel()))
        refractory_ns = np.int64(round(self.sensor.refractory_period_s * NANOSECONDS_PER_SECOND))
        width = self.calibration.width

        batches = []
        capacity = 1 << 16
        steps_per_chunk = 200
        for first in range(0, len(times_ns) - 1, steps_per_chunk):
            chunk = slice(first, min(first + steps_per_chunk, len(times_ns) - 1) + 1)
            rotations = np.ascontiguousarray(self.trajectory.orientation(times_s[chunk]))
            if isinstance(self.scene, PanoramaScene):
                arrays = _simulate_panorama_steps(times_ns[chunk], rotations, self.bearings, self.scene.faces,
                                                  previous_log, reference_log, last_event_ns, *thresholds,
                                                  refractory_ns, width, capacity)
            else:
                positions = np.ascontiguousarray(self.trajectory.position(times_s[chunk]))
                arrays = _simulate_planes_steps(times_ns[chunk], rotations, positions, self.bearings,
                                                self.scene.geometry, self.scene.textures,
                                                self.scene.texels_per_metre, previous_log, reference_log,
                                                last_event_ns, *thresholds, refractory_ns, width, capacity)
            batches.append(Events(*arrays))
            capacity = max(1 << 16, int(len(arrays[2]) * 1.25))
            if progress is not None:
                progress(times_s[chunk][-1] - times_s[chunk][0])
        events = Events.concatenate(batches)
        events = self._add_noise(events, times_ns[0], times_ns[-1], refractory_ns)
        return Recording(events=events, calibration=self.calibration,
                         imu=self.imu_samples(start_s, end_s, imu_rate_hz),
                         poses=self.poses(start_s, end_s, pose_rate_hz),
                         **self._depth_maps(start_s, end_s, depth_rate_hz))

    def _add_noise(self, events: Events, start_ns: int, end_ns: int, refractory_ns: int) -> Events:
        """Merge background-activity events (Poisson per pixel, random polarity) into events."""
        if self.sensor.noise_rate_hz == 0:
            return events
        rng = np.random.default_rng(np.random.SeedSequence([self.seed, 0x9015E, start_ns]))
        pixels = self.calibration.width * self.calibration.height
        count = rng.poisson(self.sensor.noise_rate_hz * pixels * (end_ns - start_ns) / NANOSECONDS_PER_SECOND)
        t = np.sort(rng.integers(start_ns, end_ns, count, endpoint=True))
        pixel = rng.integers(0, pixels, count)
        polarity = np.where(rng.random(count) < 0.5, -1, 1).astype(np.int8)
        merged = _merge_with_refractory(events.x, events.y, events.t, events.p,
                                        (pixel % self.calibration.width).astype(np.uint16),
                                        (pixel // self.calibration.width).astype(np.uint16), t, polarity,
                                        refractory_ns, self.calibration.width, self.calibration.height)
        return Events(*merged)

    # ---------------------------------------------------------------- ground truth

    @staticmethod
    def _sample_times(start_s: float, end_s: float, rate_hz: float) -> np.ndarray:
        first = math.ceil(start_s * rate_hz - 1e-9)
        last = math.floor(end_s * rate_hz + 1e-9)
        return np.arange(first, last + 1) / rate_hz

    def imu_samples(self, start_s: float, end_s: float, rate_hz: float = 1000.0) -> ImuSamples:
        """Ground-truth gyro (ω, rad/s, camera frame) and accelerometer (specific force, m/s^2)."""
        t_s = self._sample_times(start_s, end_s, rate_hz)
        return ImuSamples(np.round(t_s * NANOSECONDS_PER_SECOND).astype(np.int64),
                          self.trajectory.angular_velocity(t_s), self.trajectory.specific_force(t_s))

    def poses(self, start_s: float, end_s: float, rate_hz: float = 1000.0) -> Poses:
        """Camera-in-world poses: position (m) and orientation quaternion (qx, qy, qz, qw)."""
        from scipy.spatial.transform import Rotation
        t_s = self._sample_times(start_s, end_s, rate_hz)
        quaternions = Rotation.from_matrix(self.trajectory.orientation(t_s)).as_quat()
        quaternions *= np.where(quaternions[:, 3:4] < 0, -1.0, 1.0)  # qw >= 0, continuous in practice
        return Poses(np.round(t_s * NANOSECONDS_PER_SECOND).astype(np.int64),
                     self.trajectory.position(t_s), quaternions)

    def _depth_maps(self, start_s: float, end_s: float, rate_hz: float) -> dict:
        if not isinstance(self.scene, PlanarScene):
            return {}
        t_s = self._sample_times(start_s, end_s, rate_hz)
        return dict(depth_times=np.round(t_s * NANOSECONDS_PER_SECOND).astype(np.int64),
                    depth_maps=np.stack([self.render(t)[1] for t in t_s]))


# ============================================================================ presets


@dataclass(frozen=True)
class Preset:
    """A named simulation setup; ``build(duration_s, seed, sensor)`` gives the simulator."""

    name: str
    description: str
    default_duration_s: float
    build: Callable = field(repr=False)


def _rotation_simulator(peak_deg_s: float, ramp_start_fraction: float):
    def build(duration_s: float, seed: int, sensor: SensorConfig) -> EventSimulator:
        profile = OscillatingAngularVelocity(np.deg2rad(peak_deg_s), duration_s, seed,
                                             ramp_start_fraction=ramp_start_fraction)
        return EventSimulator(PanoramaScene.generate(seed), Trajectory(profile, duration_s),
                              Calibration.davis240c(), sensor, seed)
    return build


def _six_dof_simulator(duration_s: float, seed: int, sensor: SensorConfig) -> EventSimulator:
    profile = OscillatingAngularVelocity(np.deg2rad(60.0), duration_s, seed, ramp_start_fraction=1.0,
                                         frequency_range_hz=(0.3, 0.9))
    position = OscillatingPosition(0.3, seed)
    return EventSimulator(PlanarScene.boxes_in_front_of_wall(seed), Trajectory(profile, duration_s, position),
                          Calibration.davis240c(), sensor, seed)


#: camera speed of the slider preset (m/s), along the camera's x axis (right)
SLIDER_SPEED_M_S = 0.25


def _slider_simulator(duration_s: float, seed: int, sensor: SensorConfig) -> EventSimulator:
    """The camera slides right (camera +x = world -y) at SLIDER_SPEED_M_S without rotating,
    its path centred on the world origin, in front of :meth:`PlanarScene.slider`."""
    camera_x_in_world = CAMERA_LOOKING_ALONG_X[:, 0]
    velocity = SLIDER_SPEED_M_S * camera_x_in_world
    position = LinearPosition(-0.5 * duration_s * velocity, velocity)
    return EventSimulator(PlanarScene.slider(seed), Trajectory(ConstantAngularVelocity((0.0, 0.0, 0.0)),
                                                               duration_s, position),
                          Calibration.davis240c(), sensor, seed)


PRESETS = {
    "rotation": Preset("rotation", "DAVIS240C rotating in a textured room, ω ramping up to ±700 deg/s "
                       "on every axis (like boxes_rotation)", 10.0, _rotation_simulator(700.0, 0.05)),
    "rotation_short": Preset("rotation_short", "2 s of rotation up to ±300 deg/s, for demos and CI", 2.0,
                             _rotation_simulator(300.0, 0.5)),
    "six_dof": Preset("six_dof", "DAVIS240C moving in 6-DoF in front of a wall with panels at 1.6-3 m "
                      "(depth maps at 50 Hz)", 5.0, _six_dof_simulator),
    "slider": Preset("slider", "DAVIS240C sliding right at 0.25 m/s without rotating, in front of textured "
                     "panels at 0.55-2 m and a wall at 2.3 m, like slider_depth (depth maps at 50 Hz)", 3.0,
                     _slider_simulator),
}


def make_preset(name: str, duration_s: float | None = None, seed: int = 0,
                sensor: SensorConfig = SensorConfig()) -> EventSimulator:
    """The simulator of a named preset (see :data:`PRESETS`); duration default per preset."""
    if name not in PRESETS:
        raise ValueError(f"unknown simulator preset {name!r}; choose one of {', '.join(PRESETS)}")
    preset = PRESETS[name]
    duration_s = preset.default_duration_s if duration_s is None else float(duration_s)
    if not (duration_s > 0 and np.isfinite(duration_s)):
        raise ValueError(f"duration must be a positive number of seconds, got {duration_s}")
    return preset.build(duration_s, int(seed), sensor)


def simulate_preset(name: str, duration_s: float | None = None, seed: int = 0,
                    sensor: SensorConfig = SensorConfig(), **simulate_options) -> Recording:
    """Shortcut: ``make_preset(...).simulate(**simulate_options)``."""
    return make_preset(name, duration_s, seed, sensor).simulate(**simulate_options)


__all__ = ["CAMERA_LOOKING_ALONG_X", "GRAVITY_WORLD", "ConstantAngularVelocity", "OscillatingAngularVelocity",
           "OscillatingPosition", "LinearPosition", "StaticPosition", "SLIDER_SPEED_M_S", "Trajectory",
           "SensorConfig", "EventSimulator", "Preset", "PRESETS", "make_preset", "simulate_preset", "rotation_exp"]
