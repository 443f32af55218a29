"""The disparity space image (DSI): events back-projected into depth planes of a reference view.

For a reference view (the camera pose at a reference time) the DSI is a stack of N planes
``Z = z_i`` (m, along the reference optical axis), uniform in inverse depth between
``z_min_m`` and ``z_max_m`` (EMVS, Rebecq et al. IJCV 2018). Every event's viewing ray
(the undistorted bearing of its pixel, at the camera pose of its time) is intersected with
every plane; the intersection is projected into the reference view with the pinhole
model (the *undistorted* pixel grid of the same intrinsics K) and adds a bilinear vote
there: 1 per event, or its polarity ±1. Slice i is the image of warped events for θ = z_i,
the focal stack of "Focus Is All You Need" (Sec. 4.3).

Geometry. With the ray direction ``f = R_rc · (x_n, y_n, 1)`` and the camera centre
``t_rc`` expressed in the reference frame (reference_from_camera), the ray meets plane
``Z = 1/ρ`` at normalized coordinates ``a + (t_x − a t_z) ρ`` (and likewise for y),
a = f_x / f_z: linear in the inverse depth ρ, hence in the plane index. Only points in
front of the event's camera (positive ray parameter) vote.

Poses per batch. Events are processed in batches of ``events_per_pose`` (default 1024,
EMVS's packet size) that share the pose interpolated at the batch's middle time. An
event at time t is then back-projected from a camera displaced by at most
``d = |p(t) − p(t_mid)|`` and rotated by at most ``θ``; its votes move by at most about
``f · (d / z_min + θ (1 + r²))`` px (r: its normalized radius). The DSI records this
bound, :attr:`DisparitySpaceImage.pose_batch_error_px`, from the poses at each batch's
first, middle and last events (0.02 px for 1024 events at 1 Mev/s, 0.25 m/s, z_min 0.5 m,
1 rad/s at f = 200 px).

Memory: ``width · height · planes · 4`` bytes (float32): 240×180×100 = 17 MB,
346×260×100 = 36 MB, 640×480×100 = 123 MB. Layout (height, width, planes): the votes of
one event into consecutive planes land next to each other in memory. ``max_bytes``
(default 512 MB) bounds it; larger requests raise ValueError saying what they would cost.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from focus_ros.camera import Calibration
from focus_ros.events import Events

#: EMVS's packet size: events that share one interpolated pose
DEFAULT_EVENTS_PER_POSE = 1024
#: default bound on the DSI's memory (bytes)
DEFAULT_MAX_DSI_BYTES = 512 * 1024 * 1024


def plane_depths_m(z_min_m: float, z_max_m: float, planes: int) -> np.ndarray:
    """Depths (m) of ``planes`` planes uniform in inverse depth, from z_min_m (index 0) to
    z_max_m (last). ValueError for z_min ≥ z_max, non-positive or non-finite depths, < 2 planes."""
    if not (isinstance(planes, (int, np.integer)) and planes >= 2):
        raise ValueError(f"the DSI needs at least 2 depth planes, got {planes!r}")
    if not (math.isfinite(z_min_m) and math.isfinite(z_max_m) and z_min_m > 0):
        raise ValueError(f"depth range must be finite and positive, got z_min {z_min_m} m, z_max {z_max_m} m")
    if z_min_m >= z_max_m:
        raise ValueError(f"depth range is empty: z_min {z_min_m} m must be less than z_max {z_max_m} m")
    inverse = np.linspace(1.0 / z_min_m, 1.0 / z_max_m, int(planes))
    return 1.0 / inverse


@njit(cache=True, nogil=True, fastmath=True)
def _vote(bearing_x, bearing_y, weights, use_weights, batch_starts, rotations, translations,
          inverse_depths, fx, fy, cx, cy, votes):
    """Bilinear votes of every event into every plane. rotations/translations: per batch,
    reference_from_camera. Returns the number of votes cast (inside the image)."""
    height, width, planes = votes.shape
    rho0 = inverse_depths[0]
    drho = (inverse_depths[planes - 1] - rho0) / (planes - 1)
    cast = 0
    for b in range(len(batch_starts) - 1):
        r = rotations[b]
        tx, ty, tz = translations[b, 0], translations[b, 1], translations[b, 2]
        for k in range(batch_starts[b], batch_starts[b + 1]):
            u = bearing_x[k]
            v = bearing_y[k]
            fxr = r[0, 0] * u + r[0, 1] * v + r[0, 2]
            fyr = r[1, 0] * u + r[1, 1] * v + r[1, 2]
            fzr = r[2, 0] * u + r[2, 1] * v + r[2, 2]
            if abs(fzr) < 1e-9:
                continue
            a = fxr / fzr
            c = fyr / fzr
            # pixel at plane i: x0 + i * dx (linear in inverse depth)
            x0 = fx * (a + (tx - a * tz) * rho0) + cx
            y0 = fy * (c + (ty - c * tz) * rho0) + cy
            dx = fx * (tx - a * tz) * drho
            dy = fy * (ty - c * tz) * drho
            w = weights[k] if use_weights else 1.0
            for i in range(planes):
                rho = rho0 + i * drho
                # the ray parameter (Z - tz) / fzr must be positive: (1 - tz rho) / fzr > 0
                if (1.0 - tz * rho) * fzr <= 0.0:
                    continue
                px = x0 + i * dx
                py = y0 + i * dy
                if px < -1.0 or py < -1.0 or px >= width or py >= height:
                    continue
                ix = int(math.floor(px))
                iy = int(math.floor(py))
                ax = px - ix
                ay = py - iy
                w00 = (1.0 - ax) * (1.0 - ay) * w
                w10 = ax * (1.0 - ay) * w
                w01 = (1.0 - ax) * ay * w
                w11 = ax * ay * w
                if ix >= 0 and iy >= 0:
                    votes[iy, ix, i] += w00
                if ix + 1 < width and iy >= 0:
                    votes[iy, ix + 1, i] += w10
                if ix >= 0 and iy + 1 < height:
                    votes[iy + 1, ix, i] += w01
                if ix + 1 < width and iy + 1 < height:
                    votes[iy + 1, ix + 1, i] += w11
                cast += 1
    return cast


class DisparitySpaceImage:
    """Votes (height, width, planes) float32 of events back-projected into the depth planes
    of one reference view; reusable from keyframe to keyframe (:meth:`reset`).

    calibration: the camera (events are undistorted through its bearing look-up table;
    the DSI uses its pinhole K on the undistorted grid); depths_m: plane depths (m), see
    :func:`plane_depths_m`; events_per_pose: events sharing one interpolated pose
    (default 1024); max_bytes: memory bound (default 512 MB).
    """

    def __init__(self, calibration: Calibration, depths_m: np.ndarray,
                 events_per_pose: int = DEFAULT_EVENTS_PER_POSE, max_bytes: int = DEFAULT_MAX_DSI_BYTES):
        depths_m = np.asarray(depths_m, dtype=np.float64)
        if depths_m.ndim != 1 or len(depths_m) < 2 or not np.all(depths_m > 0):
            raise ValueError("depths_m must hold at least 2 positive plane depths (m)")
        if events_per_pose < 1:
            raise ValueError(f"events_per_pose must be >= 1, got {events_per_pose}")
        size = calibration.width * calibration.height * len(depths_m) * 4
        if size > max_bytes:
            raise ValueError(f"a DSI of {calibration.width}x{calibration.height} px x {len(depths_m)} planes "
                             f"needs {size / 2**20:.0f} MB, more than the {max_bytes / 2**20:.0f} MB allowed "
                             "(fewer planes, or raise max_dsi_bytes)")
        self.calibration = calibration
        self.depths_m = depths_m
        self.inverse_depths = 1.0 / depths_m
        self.events_per_pose = int(events_per_pose)
        self.votes = np.zeros((calibration.height, calibration.width, len(depths_m)), np.float32)
        self._bearings = calibration.bearing_lut()
        self.reset()

    @property
    def planes(self) -> int:
        return len(self.depths_m)

    @property
    def nbytes(self) -> int:
        return self.votes.nbytes

    def reset(self, t_ref_ns: int | None = None, world_from_reference: np.ndarray | None = None) -> None:
        """Zero the votes and set the reference view (time ns, 4×4 world_from_camera, m)."""
        self.votes.fill(0.0)
        self.t_ref_ns = t_ref_ns
        self.world_from_reference = None if world_from_reference is None else np.asarray(world_from_reference, float)
        self.event_count = 0
        self.vote_count = 0
        self.pose_batch_error_px = 0.0
        self.max_translation_m = 0.0
        self.polarity = None

    def slice(self, plane: int) -> np.ndarray:
        """The image of warped events of plane ``plane`` (height, width) float32 (a copy)."""
        return np.ascontiguousarray(self.votes[:, :, plane])

    def add_events(self, events: Events, trajectory, use_polarity: bool = False) -> int:
        """Back-project ``events`` with camera poses from ``trajectory`` (a
        :class:`focus_ros.poses.Trajectory`) into the reference view set by :meth:`reset`.
        Votes are 1 per event, or its polarity ±1 with ``use_polarity``. Returns the
        number of votes cast inside the image; updates :attr:`pose_batch_error_px` and
        :attr:`max_translation_m` (camera centre's largest distance from the reference, m).
        PoseCoverageError when the poses do not cover the events.
        """
        if self.world_from_reference is None:
            raise ValueError("DisparitySpaceImage.reset(t_ref_ns, world_from_reference) must come first")
        if self.polarity is not None and self.polarity != use_polarity:
            raise ValueError("cannot mix votes with and without polarity in one DSI")
        self.polarity = use_polarity
        count = len(events)
        if count == 0:
            return 0
        calibration = self.calibration
        x = events.x.astype(np.intp)
        y = events.y.astype(np.intp)
        if int(x.max()) >= calibration.width or int(y.max()) >= calibration.height:
            raise ValueError(f"event coordinates up to ({int(x.max())}, {int(y.max())}) outside the "
                             f"{calibration.width}x{calibration.height} sensor")
        trajectory.check_covers(int(events.t[0]), int(events.t[-1]), "events")
        starts = np.arange(0, count, self.events_per_pose)
        ends = np.minimum(starts + self.events_per_pose, count) - 1
        t_first = events.t[starts]
        t_last = events.t[ends]
        t_mid = t_first + (t_last - t_first) // 2
        rotations, positions = trajectory.interpolate(np.concatenate([t_mid, t_first, t_last]))
        batches = len(starts)
        r_mid, p_mid = rotations[:batches], positions[:batches]
        reference_rotation = self.world_from_reference[:3, :3]
        reference_position = self.world_from_reference[:3, 3]
        r_rc = np.einsum("ji,njk->nik", reference_rotation, r_mid)
        t_rc = (p_mid - reference_position) @ reference_rotation
        self._update_error_bound(rotations, positions, batches)
        self.max_translation_m = max(self.max_translation_m, float(np.max(np.linalg.norm(t_rc, axis=1))))
        bearing_x = np.ascontiguousarray(self._bearings[y, x, 0])
        bearing_y = np.ascontiguousarray(self._bearings[y, x, 1])
        weights = events.p.astype(np.float32) if use_polarity else np.empty(0, np.float32)
        batch_starts = np.append(starts, count).astype(np.int64)
        cast = _vote(bearing_x, bearing_y, weights, use_polarity, batch_starts,
                     np.ascontiguousarray(r_rc), np.ascontiguousarray(t_rc), self.inverse_depths,
                     calibration.fx, calibration.fy, calibration.cx, calibration.cy, self.votes)
        self.event_count += count
        self.vote_count += int(cast)
        return int(cast)

    def _update_error_bound(self, rotations, positions, batches) -> None:
        """Pixel error bound of sharing the middle pose within each batch (module docstring)."""
        r_mid, p_mid = rotations[:batches], positions[:batches]
        focal = max(self.calibration.fx, self.calibration.fy)
        corner = np.abs(self._bearings).max()
        radius_factor = 1.0 + 2.0 * corner * corner
        worst = 0.0
        for part in (1, 2):
            r_end = rotations[part * batches:(part + 1) * batches]
            p_end = positions[part * batches:(part + 1) * batches]
            relative = np.einsum("nji,njk->nik", r_mid, r_end)
            cosine = np.clip((np.trace(relative, axis1=1, axis2=2) - 1.0) / 2.0, -1.0, 1.0)
            angle = np.arccos(cosine)
            distance = np.linalg.norm(p_end - p_mid, axis=1)
            bound = focal * (distance / self.depths_m.min() + angle * radius_factor)
            worst = max(worst, float(bound.max()))
        self.pose_batch_error_px = max(self.pose_batch_error_px, worst)

    def parallax_px(self) -> float:
        """How far a ray's image sweeps across the planes at the largest camera displacement
        seen (px): f · max|t_rc| · (1/z_min − 1/z_max). Below about 1 px, depth is unobservable."""
        focal = max(self.calibration.fx, self.calibration.fy)
        return float(focal * self.max_translation_m * (self.inverse_depths.max() - self.inverse_depths.min()))
