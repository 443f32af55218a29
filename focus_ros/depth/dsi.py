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
346×260×100 = 36 MB, 640×480×100 = 123 MB. Stored plane by plane,
:attr:`DisparitySpaceImage.slices` (planes, height, width); :attr:`DisparitySpaceImage.votes`
is the same memory seen as (height, width, planes), ``votes[y, x]`` being a pixel's ray.
Events are processed in blocks of :data:`VOTE_BLOCK_EVENTS`: their rays first, then their
votes plane by plane, so that the slice being written stays in cache
(with large parallax an event's votes in consecutive planes are pixels apart, so voting
event by event into all planes makes nearly every vote a cache miss; BENCHMARKS.md,
"Depth: DSI, focus on patches, keyframes"). The rays take
28 bytes per event while a batch of events is added. ``max_bytes``
(default 256 MiB) bounds it; larger requests raise ValueError saying what they would cost.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

from focus_ros.camera import Calibration
from focus_ros.events import Events

#: EMVS's packet size: events that share one interpolated pose
DEFAULT_EVENTS_PER_POSE = 1024
#: default bound on the DSI's memory (bytes): half of the 512 MiB a keyframe may take
DEFAULT_MAX_DSI_BYTES = 256 * 1024 * 1024


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


#: events voted plane by plane together: per plane their ray arrays (28 bytes per event) are
#: read in order while the votes go to one slice (172 kB at 240x180, in cache). Each block
#: re-reads every slice, so the larger the better (block sizes compared in BENCHMARKS.md,
#: "Depth: DSI, focus on patches, keyframes").
VOTE_BLOCK_EVENTS = 1 << 20


@njit(cache=True, nogil=True, fastmath=True, parallel=True)
def _rays(bearing_x, bearing_y, batch_starts, rotations, translations, inverse_depths, fx, fy, cx, cy,
          width, height, x0, y0, dx, dy, first_plane, end_plane):
    """Per event: its pixel on plane 0 (x0, y0) and step per plane (dx, dy) in the reference
    view, and the planes [first_plane, end_plane) where it lies in front of the event's
    camera and within one pixel of the image."""
    planes = len(inverse_depths)
    rho0 = inverse_depths[0]
    drho = (inverse_depths[planes - 1] - rho0) / (planes - 1)
    for b in prange(len(batch_starts) - 1):
        r = rotations[b]
        tx, ty, tz = translations[b, 0], translations[b, 1], translations[b, 2]
        for k in range(batch_starts[b], batch_starts[b + 1]):
            u = bearing_x[k]
            v = bearing_y[k]
            fxr = r[0, 0] * u + r[0, 1] * v + r[0, 2]
            fyr = r[1, 0] * u + r[1, 1] * v + r[1, 2]
            fzr = r[2, 0] * u + r[2, 1] * v + r[2, 2]
            first_plane[k] = 0
            end_plane[k] = 0
            if abs(fzr) < 1e-12:
                continue
            a = fxr / fzr
            c = fyr / fzr
            # pixel at plane i: x0 + i * dx (linear in inverse depth)
            px0 = fx * (a + (tx - a * tz) * rho0) + cx
            py0 = fy * (c + (ty - c * tz) * rho0) + cy
            pdx = fx * (tx - a * tz) * drho
            pdy = fy * (ty - c * tz) * drho
            x0[k] = px0
            y0[k] = py0
            dx[k] = pdx
            dy[k] = pdy
            low = 0.0
            high = planes - 1.0
            # in front of the event's camera: ray parameter (1 - tz rho) / (rho fzr) > 0, linear in i
            g0 = (1.0 - tz * rho0) * fzr
            dg = -tz * drho * fzr
            if dg == 0.0:
                if g0 <= 0.0:
                    continue
            elif dg > 0.0:
                low = max(low, -g0 / dg)
            else:
                high = min(high, -g0 / dg)
            # within (-1, size) in x and y: some bilinear tap inside the image
            for start, step, size in ((px0, pdx, width), (py0, pdy, height)):
                if step == 0.0:
                    if start <= -1.0 or start >= size:
                        high = -1.0
                elif step > 0.0:
                    low = max(low, (-1.0 - start) / step)
                    high = min(high, (size - start) / step)
                else:
                    low = max(low, (size - start) / step)
                    high = min(high, (-1.0 - start) / step)
            if high < low:
                continue
            first_plane[k] = max(0, int(math.floor(low)))
            end_plane[k] = min(planes, int(math.floor(high)) + 2)


@njit(cache=True, nogil=True, fastmath=True, parallel=True)
def _vote_block(x0, y0, dx, dy, first_plane, end_plane, weights, use_weights, votes):
    """Bilinear votes of a block of events, plane by plane (votes: planes, height, width), the
    planes shared among numba's threads (each writes slices of its own: no two threads touch
    one voxel, so no atomics and the same sums as one thread).
    Returns the number of votes cast (some tap inside the image)."""
    planes, height, width = votes.shape
    cast_per_plane = np.zeros(planes, np.int64)
    for i in prange(planes):
        _vote_plane(x0, y0, dx, dy, first_plane, end_plane, weights, use_weights, votes[i], i, cast_per_plane)
    return cast_per_plane.sum()


@njit(cache=True, nogil=True, fastmath=True)
def _vote_plane(x0, y0, dx, dy, first_plane, end_plane, weights, use_weights, plane, i, cast_per_plane):
    """The votes of a block of events in plane i (height, width)."""
    height, width = plane.shape
    xmax = width - 1.0
    ymax = height - 1.0
    cast = 0
    for k in range(len(x0)):
        if i < first_plane[k] or i >= end_plane[k]:
            continue
        w = weights[k] if use_weights else 1.0
        px = x0[k] + i * dx[k]
        py = y0[k] + i * dy[k]
        if px >= 0.0 and py >= 0.0 and px < xmax and py < ymax:
            ix = int(px)
            iy = int(py)
            ax = px - ix
            ay = py - iy
            low_row = (1.0 - ay) * w
            high_row = ay * w
            plane[iy, ix] += (1.0 - ax) * low_row
            plane[iy, ix + 1] += ax * low_row
            plane[iy + 1, ix] += (1.0 - ax) * high_row
            plane[iy + 1, ix + 1] += ax * high_row
            cast += 1
            continue
        if px <= -1.0 or py <= -1.0 or px >= width or py >= height:
            continue
        ix = int(math.floor(px))
        iy = int(math.floor(py))
        ax = px - ix
        ay = py - iy
        if ix >= 0 and iy >= 0:
            plane[iy, ix] += (1.0 - ax) * (1.0 - ay) * w
        if ix + 1 < width and iy >= 0:
            plane[iy, ix + 1] += ax * (1.0 - ay) * w
        if ix >= 0 and iy + 1 < height:
            plane[iy + 1, ix] += (1.0 - ax) * ay * w
        if ix + 1 < width and iy + 1 < height:
            plane[iy + 1, ix + 1] += ax * ay * w
        cast += 1
    cast_per_plane[i] = cast


class DisparitySpaceImage:
    """Votes of events back-projected into the depth planes
    of one reference view; reusable from keyframe to keyframe (:meth:`reset`).

    calibration: the camera (events are undistorted through its bearing look-up table;
    the DSI uses its pinhole K on the undistorted grid); depths_m: plane depths (m), see
    :func:`plane_depths_m`; events_per_pose: events sharing one interpolated pose
    (default 1024); max_bytes: memory bound (default 256 MiB).
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
                             f"needs {size / 2**20:.0f} MiB, more than the {max_bytes / 2**20:.0f} MiB allowed "
                             "(fewer planes, or raise max_dsi_bytes)")
        self.calibration = calibration
        self.depths_m = depths_m
        self.inverse_depths = 1.0 / depths_m
        self.events_per_pose = int(events_per_pose)
        #: the votes slice by slice, (planes, height, width) float32, C-contiguous
        self.slices = np.zeros((len(depths_m), calibration.height, calibration.width), np.float32)
        #: the same votes as (height, width, planes): votes[y, x] is the ray of pixel (x, y)
        self.votes = np.moveaxis(self.slices, 0, -1)
        self._bearings = calibration.bearing_lut()
        self.reset()

    def set_depths(self, depths_m: np.ndarray) -> None:
        """New plane depths (m), as many as before (the memory is kept); zeroes the votes."""
        depths_m = np.asarray(depths_m, dtype=np.float64)
        if depths_m.shape != self.depths_m.shape or not np.all(depths_m > 0):
            raise ValueError(f"set_depths needs {self.planes} positive plane depths (m)")
        self.depths_m = depths_m
        self.inverse_depths = 1.0 / depths_m
        self.reset(self.t_ref_ns, self.world_from_reference)

    @property
    def planes(self) -> int:
        return len(self.depths_m)

    @property
    def nbytes(self) -> int:
        return self.slices.nbytes

    def reset(self, t_ref_ns: int | None = None, world_from_reference: np.ndarray | None = None) -> None:
        """Zero the votes and set the reference view (time ns, 4×4 world_from_camera, m)."""
        self.slices.fill(0.0)
        self.t_ref_ns = t_ref_ns
        self.world_from_reference = None if world_from_reference is None else np.asarray(world_from_reference, float)
        self.event_count = 0
        self.vote_count = 0
        self.pose_batch_error_px = 0.0
        self.max_translation_m = 0.0
        self.polarity = None

    def slice(self, plane: int) -> np.ndarray:
        """The image of warped events of plane ``plane`` (height, width) float32 (a view)."""
        return self.slices[plane]

    def ray(self, x: int, y: int) -> np.ndarray:
        """The votes of pixel (x, y) of the reference view in every plane (planes,) float32."""
        return self.slices[:, y, x]

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
        x0 = np.empty(count, np.float32)
        y0 = np.empty(count, np.float32)
        dx = np.empty(count, np.float32)
        dy = np.empty(count, np.float32)
        first_plane = np.empty(count, np.int32)
        end_plane = np.empty(count, np.int32)
        _rays(bearing_x, bearing_y, batch_starts, np.ascontiguousarray(r_rc), np.ascontiguousarray(t_rc),
              self.inverse_depths, calibration.fx, calibration.fy, calibration.cx, calibration.cy,
              calibration.width, calibration.height, x0, y0, dx, dy, first_plane, end_plane)
        cast = 0
        for block in range(0, count, VOTE_BLOCK_EVENTS):
            part = slice(block, block + VOTE_BLOCK_EVENTS)
            cast += _vote_block(x0[part], y0[part], dx[part], dy[part], first_plane[part], end_plane[part],
                                weights[part] if use_polarity else weights, use_polarity, self.slices)
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
