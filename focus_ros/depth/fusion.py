"""A world-frame map fused from keyframe clouds: a voxel grid where keyframes must agree.

Each keyframe's points (world frame, m) fall into cubic voxels of side ``voxel_m``. A voxel
keeps the sum of its points (their mean is the map point), their number, which of the last
64 keyframes put a point in it (a bit mask) and when it was last seen. A voxel is in the
published map when at least ``min_keyframes`` different keyframes put a point in it or in
one of its 26 neighbours: a point that only one keyframe claims (a wrong depth on a streak,
a spike) is not confirmed by the next keyframe's view from elsewhere, whose wrong points lie
elsewhere, so it stays out, while a surface seen by several keyframes is kept wherever they
agree to within about a voxel. The grid is bounded: beyond ``max_voxels`` the voxels seen
longest ago go first (then the least supported), so memory stays flat on a long run.
"""

from __future__ import annotations

import numpy as np

#: bits per voxel coordinate in the packed key (voxel indices within ±2^20)
_BITS = 21
_OFFSET = 1 << (_BITS - 1)
_MASK = (1 << _BITS) - 1
_NEIGHBOURS = np.array([(dx, dy, dz) for dx in (-1, 0, 1) for dy in (-1, 0, 1) for dz in (-1, 0, 1)], np.int64)


def _pack(indices: np.ndarray) -> np.ndarray:
    shifted = (indices + _OFFSET) & _MASK
    return (shifted[:, 0] << (2 * _BITS)) | (shifted[:, 1] << _BITS) | shifted[:, 2]


def _popcount(values: np.ndarray) -> np.ndarray:
    """Set bits of each uint64 (int64)."""
    return np.bitwise_count(values.astype(np.uint64)).astype(np.int64)


class VoxelMap:
    """The fused map (module docstring). voxel_m: voxel side (m); min_keyframes: keyframes
    that must agree for a voxel to be published (1 = every point); max_voxels: bound."""

    def __init__(self, voxel_m: float = 0.01, min_keyframes: int = 2, max_voxels: int = 500_000):
        if not (np.isfinite(voxel_m) and voxel_m > 0):
            raise ValueError(f"map voxel size must be > 0 m, got {voxel_m}")
        if not 1 <= min_keyframes <= 64:
            raise ValueError(f"map min_keyframes must be within 1-64, got {min_keyframes}")
        if max_voxels < 1:
            raise ValueError(f"map max_voxels must be >= 1, got {max_voxels}")
        self.voxel_m = float(voxel_m)
        self.min_keyframes = int(min_keyframes)
        self.max_voxels = int(max_voxels)
        self.clear()

    def clear(self) -> None:
        self.keys = np.empty(0, np.int64)          # sorted packed voxel indices
        self.sums = np.empty((0, 3), np.float64)   # sum of the points in each voxel (m)
        self.counts = np.empty(0, np.int64)
        self.seen_by = np.empty(0, np.uint64)      # bit (keyframe index mod 64) per keyframe that voted
        self.last_seen = np.empty(0, np.int64)     # index of the last keyframe that voted
        self.keyframes = 0

    def __len__(self) -> int:
        return len(self.keys)

    def add(self, points_world: np.ndarray) -> None:
        """Merge one keyframe's points (M, 3) m into the grid."""
        index = self.keyframes
        self.keyframes += 1
        bit = np.uint64(1) << np.uint64(index % 64)
        self.seen_by &= ~bit  # the bit now means this keyframe, not the one 64 before
        points = np.asarray(points_world, np.float64).reshape(-1, 3)
        points = points[np.all(np.isfinite(points), axis=1)]
        if len(points):
            keys, inverse = np.unique(_pack(np.floor(points / self.voxel_m).astype(np.int64)), return_inverse=True)
            sums = np.zeros((len(keys), 3))
            np.add.at(sums, inverse, points)
            counts = np.bincount(inverse, minlength=len(keys))
            all_keys = np.concatenate([self.keys, keys])
            merged, where = np.unique(all_keys, return_inverse=True)
            old, new = where[:len(self.keys)], where[len(self.keys):]
            total = np.zeros((len(merged), 3))
            total[old] = self.sums
            total[new] += sums
            count = np.zeros(len(merged), np.int64)
            count[old] = self.counts
            count[new] += counts
            seen = np.zeros(len(merged), np.uint64)
            seen[old] = self.seen_by
            seen[new] |= bit
            last = np.full(len(merged), -1, np.int64)
            last[old] = self.last_seen
            last[new] = index
            self.keys, self.sums, self.counts, self.seen_by, self.last_seen = merged, total, count, seen, last
        self._bound()

    def support(self) -> np.ndarray:
        """Per voxel: how many different keyframes (of the last 64) put a point in it or a neighbour."""
        if not len(self.keys):
            return np.empty(0, np.int64)
        indices = np.stack([(self.keys >> (2 * _BITS)) & _MASK, (self.keys >> _BITS) & _MASK, self.keys & _MASK],
                           axis=1) - _OFFSET
        seen = np.zeros(len(self.keys), np.uint64)
        for offset in _NEIGHBOURS:
            neighbours = _pack(indices + offset)
            position = np.minimum(np.searchsorted(self.keys, neighbours), len(self.keys) - 1)
            found = self.keys[position] == neighbours
            seen[found] |= self.seen_by[position[found]]
        return _popcount(seen)

    def support_at(self, points_world: np.ndarray) -> np.ndarray:
        """Per point (M, 3) m: the support (see :meth:`support`) of the voxel it falls in, 0 outside
        the grid. With the points of the keyframes fused, ``support_at(points) >= min_keyframes``
        keeps every original point the keyframes agree on (denser than the voxel means)."""
        points = np.asarray(points_world, np.float64).reshape(-1, 3)
        result = np.zeros(len(points), np.int64)
        if not len(self.keys) or not len(points):
            return result
        keys = _pack(np.floor(points / self.voxel_m).astype(np.int64))
        position = np.minimum(np.searchsorted(self.keys, keys), len(self.keys) - 1)
        found = self.keys[position] == keys
        result[found] = self.support()[position[found]]
        return result

    def points(self) -> tuple[np.ndarray, np.ndarray]:
        """(points (N, 3) float32 m: the mean point of every voxel that enough keyframes agree on,
        support (N,) float32: the number of keyframes that agree)."""
        support = self.support()
        kept = support >= self.min_keyframes
        mean = self.sums[kept] / self.counts[kept, None]
        return mean.astype(np.float32), support[kept].astype(np.float32)

    def _bound(self) -> None:
        """Drop the voxels seen longest ago (then the least supported) beyond max_voxels."""
        excess = len(self.keys) - self.max_voxels
        if excess <= 0:
            return
        order = np.lexsort((_popcount(self.seen_by), self.last_seen))  # oldest first, then least seen
        keep = np.sort(order[excess:])
        self.keys, self.sums, self.counts = self.keys[keep], self.sums[keep], self.counts[keep]
        self.seen_by, self.last_seen = self.seen_by[keep], self.last_seen[keep]
