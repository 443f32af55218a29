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

The parts: camera motion in :mod:`~focus_ros.sources.trajectories`, scenes in
:mod:`~focus_ros.sources.scenes`, the named presets (scene + motion, any camera) in
:mod:`~focus_ros.sources.presets`; this module renders and emits events, and builds a
preset's simulator for a camera (:func:`make_preset`). Every public name of those modules
that users of the simulator need is importable from here too.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Callable

import numpy as np
from numba import njit

from focus_ros.camera import DAVIS240C, Calibration, sensor_model
from focus_ros.events import NANOSECONDS_PER_SECOND, Events
from focus_ros.sources.presets import PRESETS, SLIDER_SPEED_M_S, Preset, preset
from focus_ros.sources.recording import ImuSamples, Poses, Recording
from focus_ros.sources.scenes import PanoramaScene, PlanarScene, cast_ray, sample_cube_map
from focus_ros.sources.trajectories import (CAMERA_LOOKING_ALONG_X, GRAVITY_WORLD, AngularVelocityProfile,
                                            ConstantAngularVelocity, LinearPosition, OscillatingAngularVelocity,
                                            OscillatingPosition, StaticPosition, Trajectory, rotation_exp)


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
    bitwise the same events. origin: what the simulation is of, for the record every
    :meth:`simulate` result carries (:attr:`Recording.simulation`), e.g. the preset's name
    and the camera's (:func:`make_preset` fills it).
    """

    def __init__(self, scene, trajectory: Trajectory, calibration: Calibration,
                 sensor: SensorConfig = SensorConfig(), seed: int = 0, origin: dict | None = None):
        if not isinstance(scene, (PanoramaScene, PlanarScene)):
            raise TypeError(f"scene must be a PanoramaScene or PlanarScene, got {type(scene).__name__}")
        sensor.validate()
        self.scene = scene
        self.trajectory = trajectory
        self.calibration = calibration
        self.sensor = sensor
        self.seed = int(seed)
        self.origin = dict(origin or {})
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
                         simulation=self.simulation_record(start_s, end_s),
                         **self._depth_maps(start_s, end_s, depth_rate_hz))

    def simulation_record(self, start_s: float, end_s: float) -> dict:
        """What a simulation of [start_s, end_s] (s) is: :attr:`origin`, the seed, the sensor size
        (px) and settings; plain numbers and text (the writers store it as YAML). Its presence
        tells readers that the IMU and poses are exact ground truth (no gyro delay)."""
        return {"simulator": "focus_ros", **self.origin, "seed": self.seed,
                "width": int(self.calibration.width), "height": int(self.calibration.height),
                "start_s": float(start_s), "end_s": float(end_s), "trajectory_duration_s": self.trajectory.duration_s,
                **{name: float(value) for name, value in asdict(self.sensor).items()}}

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


# ============================================================================ presets with a camera


def texel_scale(calibration: Calibration) -> float:
    """How much finer than the DAVIS240C scenes a camera needs its scene textures (>= 1).

    The presets' textures have about 1.3 texels per DAVIS240C pixel (fx ≈ 199 px); a camera
    with a longer focal length (px) gets textures that many times finer, rounded up to
    whole 64ths of the 512-texel base, so its edges are as sharp at its own pixel size
    (the shapes do not change). Exactly 1 for the DAVIS240C and any shorter focal length.
    """
    ratio = max(calibration.fx, calibration.fy) / DAVIS240C["fx"]
    return max(1.0, math.ceil(512 * ratio / 64 - 1e-9) * 64 / 512)


def camera_calibration(camera) -> Calibration:
    """The calibration of ``camera``: a :data:`focus_ros.camera.SENSORS` name (e.g. "imx636") or a
    :class:`Calibration` itself. ValueError naming the known sensors for an unknown name."""
    if isinstance(camera, Calibration):
        return camera
    return sensor_model(camera).calibration()


def make_preset(name: str, duration_s: float | None = None, seed: int = 0,
                sensor: SensorConfig = SensorConfig(), camera="davis240c") -> EventSimulator:
    """The simulator of a named preset (see :data:`PRESETS`) seen through ``camera``.

    camera: a :data:`focus_ros.camera.SENSORS` name ("davis240c", "davis346", "dvxplorer",
    "imx636") or a :class:`Calibration`: its size, intrinsics and distortion; the scene's
    shapes, the motion and hence the ground truth (ω, poses) are the same for every camera
    (depth maps have the camera's size). duration_s default per preset; sensor: thresholds,
    noise and the render step bound. ValueError naming the bad argument.
    """
    chosen = preset(name)
    duration_s = chosen.default_duration_s if duration_s is None else float(duration_s)
    if not (duration_s > 0 and np.isfinite(duration_s)):
        raise ValueError(f"duration must be a positive number of seconds, got {duration_s}")
    calibration = camera_calibration(camera)
    camera_name = camera if isinstance(camera, str) else "custom"
    return EventSimulator(chosen.scene(int(seed), texel_scale(calibration)), chosen.trajectory(duration_s, int(seed)),
                          calibration, sensor, int(seed), origin={"preset": name, "camera": camera_name})


def simulate_preset(name: str, duration_s: float | None = None, seed: int = 0,
                    sensor: SensorConfig = SensorConfig(), camera="davis240c", **simulate_options) -> Recording:
    """Shortcut: ``make_preset(...).simulate(**simulate_options)``."""
    return make_preset(name, duration_s, seed, sensor, camera).simulate(**simulate_options)


__all__ = ["CAMERA_LOOKING_ALONG_X", "GRAVITY_WORLD", "AngularVelocityProfile", "ConstantAngularVelocity",
           "OscillatingAngularVelocity", "OscillatingPosition", "LinearPosition", "StaticPosition", "SLIDER_SPEED_M_S",
           "Trajectory", "SensorConfig", "EventSimulator", "Preset", "PRESETS", "PanoramaScene", "PlanarScene",
           "camera_calibration", "make_preset", "simulate_preset", "rotation_exp", "texel_scale"]
