"""A world-frame map fused from keyframe clouds: the keyframes' points that another keyframe confirms.

A keyframe's depths are wrong in places (a streak along an edge's epipolar line, a spike), and
a second keyframe, seen from elsewhere, puts its own wrong points elsewhere; a surface both see
is where both put points. So a point is in the map when a point of at least ``min_keyframes - 1``
other keyframes lies near it, and "near" is relative to its distance from the camera: depth
errors grow with depth (a depth error of 1 % is 6 mm at 0.6 m and 4 cm at 4 m), so a fixed
distance would confirm near surfaces and never far ones.

Agreement is found in the view of the keyframe being added, on a grid along its rays: every
point, new or held, is seen from that keyframe's camera as (x/z, y/z, ln z) (camera frame,
z along the optical axis), and the grid's cells are one pixel of that camera across the ray
(``pixel_rad`` = 1/fx rad) and a share ``depth_tolerance`` of the depth along it. A new point
and a held point agree when their cells touch (the cell or one of its 26 neighbours): at most
2 cells apart, and always when less than 1 cell apart on each axis; each confirms the other.
Every pair of keyframes is compared once, when the later one arrives, in its own view; the
earlier one's points are there (held), wherever it saw them from.

The map holds the keyframes' points (not voxel means: a mean over a cell mixes the two sides of
a depth edge and is less accurate than the points it averages), each with a bit mask of the
keyframes that agree with it (its own included; bit = keyframe index mod 64). Where keyframes
agree, their estimates are averaged: each comparison also gives the mean log depth of the other
keyframe's points in the touching cells, and a published point lies on its own keyframe's ray
at the mean of its own log depth and those (independent errors average out; the baselines are
a few percent of the depth, so the rays of one surface point nearly coincide). It is bounded:
beyond ``max_points`` the points of the oldest keyframes go first, so memory stays flat on a
long run. Cost per keyframe: the held points are moved into the new camera's frame (one matrix
product), those inside the new points' cells are sorted once, and each new cell looks up its 27
neighbours (vectorised numpy).
"""

from __future__ import annotations

import numpy as np
from numba import njit

#: bits per cell coordinate in a packed key (coordinates within ±2^20 cells)
_BITS = 21
_OFFSET = 1 << (_BITS - 1)
#: key offsets of the 27 cells around a cell (packing is linear while each coordinate stays in range)
_NEIGHBOUR_KEYS = np.array([(dx << (2 * _BITS)) + (dy << _BITS) + dz
                            for dx in (-1, 0, 1) for dy in (-1, 0, 1) for dz in (-1, 0, 1)], np.int64)
#: defaults, chosen from EVALUATION.md's table (6-DoF depth, the fused map): agreement within 2 %
#: of the depth along the ray and a pixel across it, 2 keyframes, a bound of 300,000 points
MAP_DEPTH_TOLERANCE = 0.02
MAP_MIN_KEYFRAMES = 2
#: the published points' bound on sigma / depth, chosen on the tune half of the depth set
#: (focus_ros/sources/depth_set.py; docs/evaluation/depth_set.md, "Each point judged in its own
#: keyframe's view"): 0.033 with the factor below at 2.08 (0.0159 of the sigma before the factor)
MAP_MAX_RELATIVE_SIGMA = 0.033
MAP_MAX_POINTS = 300_000
#: a published point's depth sigma: its own keyframe's over sqrt(the estimates it averages, its own and one
#: per comparison that found other keyframes' points around it), as for independent errors, times this: the
#: keyframes' errors on one surface are partly shared, and the map's points keep errors their keyframes'
#: focus does not see (occlusion edges, a pose's error shared by a keyframe's points). 1.16 made about 68 % of
#: the true depths lie within 1 sigma on the three presets it was fitted on (docs/evaluation/depth_sigma.md);
#: on the depth set's tune half (each point judged in its own keyframe's view, the bound above), the factor
#: that puts 68.3 % within 1 sigma is 2.08 on the median sequence (``focus-ros evaluate-depth --set tune``'s
#: "map sigma x for 68 %", 1.00 with it)
MAP_SIGMA_FACTOR = 2.08
#: nearest depth a point may have in a keyframe's view to be compared (m); nearer ones (and
#: points behind the camera) are not compared in that view
_MIN_DEPTH_M = 1e-3


def _popcount(values: np.ndarray) -> np.ndarray:
    """Set bits of each uint64."""
    return np.bitwise_count(values.astype(np.uint64)).astype(np.int64)


@njit(cache=True, nogil=True)
def _cell_keys(points, rotation, position, pixel_rad, depth_tolerance):
    """(packed cell key (int64), ln z) of each world point (M, 3) m seen from the camera (rotation,
    position: world_from_camera): x/z and y/z over pixel_rad, ln z over depth_tolerance (floor,
    clipped to the packable range); key -1 for points behind the camera or nearer than _MIN_DEPTH_M."""
    keys = np.empty(len(points), np.int64)
    log_depths = np.zeros(len(points))
    for i in range(len(points)):
        dx = points[i, 0] - position[0]
        dy = points[i, 1] - position[1]
        dz = points[i, 2] - position[2]
        z = rotation[0, 2] * dx + rotation[1, 2] * dy + rotation[2, 2] * dz  # camera = R^T (X - p)
        if not z > _MIN_DEPTH_M:
            keys[i] = -1
            continue
        x = rotation[0, 0] * dx + rotation[1, 0] * dy + rotation[2, 0] * dz
        y = rotation[0, 1] * dx + rotation[1, 1] * dy + rotation[2, 1] * dz
        log_depths[i] = np.log(z)
        key = 0
        for value in (x / (z * pixel_rad), y / (z * pixel_rad), log_depths[i] / depth_tolerance):
            cell = min(max(np.floor(value), 1.0 - _OFFSET), _OFFSET - 2.0)
            key = (key << _BITS) | (int(cell) + _OFFSET)
        keys[i] = key
    return keys, log_depths


@njit(cache=True, nogil=True)
def _confirm_held(held_keys, held_log_depths, held_keyframe_numbers, held_agreed, held_shift, held_shifts, bit,
                  near_keys, near_new_mean, near_bits, near_sum, near_count):
    """Held points whose cell is one of near_keys (sorted: the cells touching a new point's) gain
    ``bit`` (the new keyframe's) and a shift (near_new_mean, the new points' mean ln z around that
    cell, minus their own ln z); each such cell collects the held points' own bits (their keyframe's
    number mod 64) and ln z."""
    for i in range(len(held_keys)):
        key = held_keys[i]
        if key < 0:
            continue
        j = np.searchsorted(near_keys, key)
        if j < len(near_keys) and near_keys[j] == key:
            held_agreed[i] |= bit
            held_shift[i] += near_new_mean[j] - held_log_depths[i]
            held_shifts[i] += 1
            near_bits[j] |= np.uint64(1) << np.uint64(held_keyframe_numbers[i] % 64)
            near_sum[j] += held_log_depths[i]
            near_count[j] += 1


class FusedMap:
    """The fused map (module docstring). depth_tolerance: how near along the ray another
    keyframe's point must be, as a share of the depth (the cells' width in ln z); min_keyframes:
    keyframes that must agree on a point for it to be published (1 = every point); max_points:
    bound on the points held; max_relative_sigma: a point is published only when its depth sigma
    is at most this share of its distance from its keyframe's camera (0 = every point; a point
    without a sigma is published)."""

    def __init__(self, depth_tolerance: float = MAP_DEPTH_TOLERANCE, min_keyframes: int = MAP_MIN_KEYFRAMES,
                 max_points: int = MAP_MAX_POINTS, max_relative_sigma: float = MAP_MAX_RELATIVE_SIGMA):
        if not (np.isfinite(depth_tolerance) and 0 < depth_tolerance <= 1):
            raise ValueError(f"map depth tolerance must be within (0, 1] (a share of the depth), "
                             f"got {depth_tolerance}")
        if not 1 <= min_keyframes <= 64:
            raise ValueError(f"map min_keyframes must be within 1-64, got {min_keyframes}")
        if max_points < 1:
            raise ValueError(f"map max_points must be >= 1, got {max_points}")
        self.depth_tolerance = float(depth_tolerance)
        self.min_keyframes = int(min_keyframes)
        self.max_points = int(max_points)
        self.max_relative_sigma = float(max_relative_sigma)
        self.clear()

    def clear(self) -> None:
        self.points_world = np.empty((0, 3), np.float32)  # every point held, as estimated (m)
        self.origins = np.empty((0, 3), np.float32)       # its keyframe's camera position (m)
        self.keyframe_number = np.empty(0, np.int64)        # the keyframe that made it (0: the first one added)
        self.agreed_by = np.empty(0, np.uint64)             # bits of the keyframes that agree (own included)
        self.shift = np.empty(0, np.float64)                # sum over the comparisons: others' mean ln z - own
        self.shifts = np.empty(0, np.int64)                 # how many comparisons found others around it
        self.sigma_m = np.empty(0, np.float32)              # its keyframe's depth standard deviation (m; NaN: none)
        self.keyframes = 0

    def __len__(self) -> int:
        return len(self.points_world)

    def add(self, points_world: np.ndarray, world_from_camera: np.ndarray, pixel_rad: float,
            sigma_m: np.ndarray | None = None) -> None:
        """Merge one keyframe's points (M, 3) m, seen from the camera world_from_camera (4x4,
        [R p; 0 1], the keyframe's reference view) whose pixels span pixel_rad (rad, 1/fx):
        compare them with the points held, then hold them. sigma_m: (M,) their depth standard
        deviations (m; None: unknown, NaN in :meth:`points`' sigma)."""
        if not (np.isfinite(pixel_rad) and pixel_rad > 0):
            raise ValueError(f"map pixel angle must be > 0 rad, got {pixel_rad}")
        bit = np.uint64(1) << np.uint64(self.keyframes % 64)
        self.keyframes += 1
        points = np.asarray(points_world, np.float32).reshape(-1, 3)
        sigma = np.full(len(points), np.nan, np.float32) if sigma_m is None else np.asarray(sigma_m, np.float32)
        if sigma.shape != (len(points),):
            raise ValueError(f"{sigma.shape} depth sigmas for {len(points)} map points")
        finite = np.all(np.isfinite(points), axis=1)
        points, sigma = np.ascontiguousarray(points[finite]), sigma[finite]
        agreed = np.full(len(points), bit, np.uint64)
        shift, shifts = np.zeros(len(points)), np.zeros(len(points), np.int64)
        pose = np.asarray(world_from_camera, np.float64)
        rotation, position = np.ascontiguousarray(pose[:3, :3]), np.ascontiguousarray(pose[:3, 3])
        new_keys, new_log_depths = _cell_keys(points, rotation, position, float(pixel_rad), self.depth_tolerance)
        seen = np.flatnonzero(new_keys >= 0)
        if len(seen) and len(self.points_world):
            cells, inverse = np.unique(new_keys[seen], return_inverse=True)
            inverse = inverse.reshape(-1)
            around = cells[:, None] + _NEIGHBOUR_KEYS[None, :]  # the 27 cells touching each new cell
            near_keys = np.sort(around, axis=None)  # their union (np.unique's hash path is slower)
            near_keys = near_keys[np.r_[True, near_keys[1:] != near_keys[:-1]]]
            index = np.searchsorted(near_keys, around)  # (cells, 27): every one is there
            # the new points' mean ln z around each near cell
            cell_sum = np.bincount(inverse, new_log_depths[seen], len(cells))
            cell_count = np.bincount(inverse, None, len(cells))
            near_new_mean = (np.bincount(index.ravel(), np.repeat(cell_sum, 27), len(near_keys)) /
                             np.bincount(index.ravel(), np.repeat(cell_count, 27), len(near_keys)))
            near_bits = np.zeros(len(near_keys), np.uint64)
            near_sum, near_count = np.zeros(len(near_keys)), np.zeros(len(near_keys), np.int64)
            held_keys, held_log_depths = _cell_keys(self.points_world, rotation, position, float(pixel_rad),
                                                    self.depth_tolerance)
            _confirm_held(held_keys, held_log_depths, self.keyframe_number, self.agreed_by, self.shift, self.shifts,
                          bit, near_keys, near_new_mean, near_bits, near_sum, near_count)
            agreed[seen] |= np.bitwise_or.reduce(near_bits[index], axis=1)[inverse]
            held_sum, held_count = near_sum[index].sum(axis=1)[inverse], near_count[index].sum(axis=1)[inverse]
            found = held_count > 0
            shift[seen[found]] = held_sum[found] / held_count[found] - new_log_depths[seen[found]]
            shifts[seen[found]] = 1
        self.points_world = np.concatenate([self.points_world, points])
        self.origins = np.concatenate([self.origins, np.repeat(position[None].astype(np.float32), len(points), 0)])
        self.keyframe_number = np.concatenate([self.keyframe_number, np.full(len(points), self.keyframes - 1)])
        self.agreed_by = np.concatenate([self.agreed_by, agreed])
        self.shift = np.concatenate([self.shift, shift])
        self.shifts = np.concatenate([self.shifts, shifts])
        self.sigma_m = np.concatenate([self.sigma_m, sigma])
        self._bound()

    def support(self) -> np.ndarray:
        """Per point held: how many different keyframes (its own included) agree with it."""
        return _popcount(self.agreed_by)

    def points(self, with_sigma: bool = False) -> tuple[np.ndarray, ...]:
        """(points (N, 3) float32 m: every point held that at least min_keyframes keyframes agree
        on, on its keyframe's ray at the mean of its own log depth and the other keyframes' around
        it (module docstring); support (N,) float32: how many keyframes agree). ``with_sigma`` adds
        sigma (N,) float32 m, each point's depth standard deviation: its own keyframe's, scaled with
        the depth as the point moved along its ray (the same relative uncertainty), over the square
        root of the estimates averaged into it (1 + the comparisons that found others around it),
        times :data:`MAP_SIGMA_FACTOR`; NaN where its keyframe gave none."""
        kept, points, sigma = self._published()
        published = (points.astype(np.float32), self.support()[kept].astype(np.float32))
        return published + (sigma.astype(np.float32),) if with_sigma else published

    def point_keyframes(self) -> np.ndarray:
        """The number of the keyframe that made each point :meth:`points` returns (N,) int64, in
        the order :meth:`add` took them (0: the first): the view the point's depth was estimated
        in, where it is judged against ground truth (a later keyframe's view may have it behind
        an occluding surface)."""
        return self.keyframe_number[self._published()[0]]

    def _published(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(indices of the points held that are published, their positions (m, float64), their
        sigma (m)): :meth:`points`' rule."""
        kept = np.flatnonzero(self.support() >= self.min_keyframes)
        origins = self.origins[kept].astype(np.float64)
        scale = np.exp(self.shift[kept] / (1 + self.shifts[kept]))
        points = origins + (self.points_world[kept] - origins) * scale[:, None]
        sigma = MAP_SIGMA_FACTOR * self.sigma_m[kept] * scale / np.sqrt(1.0 + self.shifts[kept])
        if self.max_relative_sigma > 0:  # too uncertain: held (another keyframe may firm it up), not published
            with np.errstate(invalid="ignore"):
                certain = ~(sigma > self.max_relative_sigma * np.linalg.norm(points - origins, axis=1))
            kept, points, sigma = kept[certain], points[certain], sigma[certain]
        return kept, points, sigma

    def _bound(self) -> None:
        """Drop the points of the oldest keyframes beyond max_points (the points are held in
        the order their keyframes came)."""
        excess = len(self.points_world) - self.max_points
        if excess > 0:
            for name in ("points_world", "origins", "keyframe_number", "agreed_by", "shift", "shifts", "sigma_m"):
                setattr(self, name, getattr(self, name)[excess:])
