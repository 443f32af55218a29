"""Patch optical flow engine: the focus objective of every patch of a grid in one call.

The paper's patch flow (Sec. 4.3, after Gallego et al., CVPR 2018): the events of a small
space-time patch are warped by one flow vector v (px/s),
``x'_k = x_k - (t_k - t_ref) v`` (``focus_ros.warps.warp_flow``), and the v that makes the
patch's image of warped events sharpest is the patch's flow.

Coordinates are pixels of the raw (distorted) sensor image: patch flow is the motion of the
events as the camera sees them, no undistortion (the ground truth of
``focus_ros.evaluation.flow`` is expressed in the same pixels).

Grid (:class:`PatchGrid`): square patches of ``size`` px whose top-left corners step by
``stride`` px over the sensor. A patch's IWE is the image of warped events over the patch at
t_ref (a tile of ``size + 2 border`` px): every event of the window whose pixel lies within
``margin`` px of the patch is warped, and those landing in the tile vote (as the full-frame IWE
of ``focus_ros.objective``, restricted to the patch). Events thus enter and leave the patch as
the flow says; an event belongs to every patch it may warp into.

One evaluation (:meth:`PatchObjective.evaluate`) for all patches at once:

1. warp every (event, patch) membership with its patch's v (one compiled loop over
   ``focus_ros.warps.warp_flow``), bilinear votes into the tile stack (P, tile + gap, tile)
   (``focus_ros.iwe`` window kernels, one plane per patch through their plane offsets);
3. optional IWE blur, the focus loss of every tile (``focus_ros.flow.patch_losses``);
4. adjoint: the loss's gradient images gathered back per membership (``focus_ros.iwe``), then
   d loss_p / d v_p = sum over p's memberships of (d_x, d_y)_k (-dt_k) (one compiled loop).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numba
import numpy as np

from focus_ros.events import Events
from focus_ros.iwe import (VotingWorkArrays, bilinear_cells, blur_image, gather_bilinear_cells, gaussian_blur_kernel,
                            vote_bilinear_cells)
from focus_ros.losses import get_loss
from focus_ros.objective import supported_polarity_modes
from focus_ros.flow.patch_losses import GAP_ROWS, evaluate_stack, tile_filter
from focus_ros.warps import KERNEL_OPTIONS, warp_flow


@numba.njit(cache=True, nogil=True, inline="always")
def _reached(coordinate, offset, size, stride, margin, count):
    """Index of the offset-th patch (along one axis) whose grown extent
    [index * stride - margin, index * stride + size + margin) holds ``coordinate``, or -1."""
    index = (coordinate + margin) // stride - offset
    if (index < 0 or index >= count or coordinate < index * stride - margin
            or coordinate >= index * stride + size + margin):
        return -1
    return index


@numba.njit(cache=True, nogil=True)
def _memberships(x, y, size, stride, margin, columns, rows, per_axis, patch_margins):
    """Pairs (event, patch) with patch.origin - m <= (x, y) < patch.origin + size + m, m the patch's
    margin (``patch_margins[p]``, at most ``margin``; all ``margin`` when patch_margins is empty),
    ordered by patch then event (counting sort: pass 0 counts, pass 1 fills)."""
    per_patch = patch_margins.shape[0] > 0
    counts = np.zeros(columns * rows + 1, dtype=np.int64)
    events = np.empty(0, dtype=np.int64)
    patches = np.empty(0, dtype=np.int64)
    fill = counts
    for fill_pass in range(2):
        if fill_pass == 1:
            starts = np.cumsum(counts)
            events = np.empty(starts[-1], dtype=np.int64)
            patches = np.empty(starts[-1], dtype=np.int64)
            fill = starts[:-1].copy()
        for k in range(x.shape[0]):
            for a in range(per_axis):
                column = _reached(x[k], a, size, stride, margin, columns)
                if column < 0:
                    continue
                for b in range(per_axis):
                    row = _reached(y[k], b, size, stride, margin, rows)
                    if row < 0:
                        continue
                    patch = row * columns + column
                    if per_patch:
                        m = patch_margins[patch]
                        if (x[k] < column * stride - m or x[k] >= column * stride + size + m
                                or y[k] < row * stride - m or y[k] >= row * stride + size + m):
                            continue
                    if fill_pass == 0:
                        counts[patch + 1] += 1
                    else:
                        events[fill[patch]] = k
                        patches[fill[patch]] = patch
                        fill[patch] += 1
    return events, patches


@dataclass(frozen=True)
class PatchGrid:
    """Square patches over a width x height px sensor.

    size: patch side (px); stride: distance between the top-left corners of neighbouring
    patches (px, default ``size``: patches tile the sensor); margin: events are gathered from the
    patch grown by this many px on every side (px, default 8): the events that a flow of up to
    margin px between an event's time and t_ref brings into the patch; border: the patch's IWE
    tile is the patch grown by this many px (default 2), so the derivative filters and the blur
    see the patch's edge. Patches that would cross the sensor's right or bottom edge are left
    out (the events of the last width % stride columns then belong to no patch proper).
    Patch p = row * columns + column; its top-left corner is (column * stride, row * stride).
    """

    width: int
    height: int
    size: int = 15
    stride: int | None = None
    margin: int = 8
    border: int = 2

    def __post_init__(self):
        if self.stride is None:
            object.__setattr__(self, "stride", self.size)
        for name in ("width", "height", "size", "stride"):
            value = getattr(self, name)
            if not (isinstance(value, (int, np.integer)) and value >= 1):
                raise ValueError(f"patch grid {name} must be a positive integer (px), got {value!r}")
        for name in ("margin", "border"):
            value = getattr(self, name)
            if not (isinstance(value, (int, np.integer)) and value >= 0):
                raise ValueError(f"patch {name} must be an integer >= 0 (px), got {value!r}")
        if self.size < 2:
            raise ValueError(f"patch size must be at least 2 px, got {self.size}")
        if self.size > self.width or self.size > self.height:
            raise ValueError(f"patch size {self.size} px exceeds the {self.width}x{self.height} sensor")

    @property
    def columns(self) -> int:
        return (self.width - self.size) // self.stride + 1

    @property
    def rows(self) -> int:
        return (self.height - self.size) // self.stride + 1

    @property
    def count(self) -> int:
        return self.columns * self.rows

    @property
    def tile(self) -> int:
        """Side of each patch's IWE (px): size + 2 border."""
        return self.size + 2 * self.border

    @property
    def origins(self) -> np.ndarray:
        """(P, 2) top-left corner (x, y) of every patch (px)."""
        column, row = np.meshgrid(np.arange(self.columns), np.arange(self.rows))
        return np.stack([column.ravel() * self.stride, row.ravel() * self.stride], axis=1)

    @property
    def centers(self) -> np.ndarray:
        """(P, 2) centre (x, y) of every patch (px, pixel centres at integers)."""
        return self.origins + (self.size - 1) / 2.0

    def memberships(self, x: np.ndarray, y: np.ndarray, margin: int | None = None,
                    patch_margins: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(event index, patch index) of every pair where the event's pixel lies in the patch grown
        by ``margin`` px (default: the grid's gathering margin; 0: the patch proper), or by its own
        margin ``patch_margins`` (P,) px (integers clipped to [0, margin]) when given, ordered by
        patch, then by event (one compiled counting pass)."""
        margin = self.margin if margin is None else int(margin)
        x = np.ascontiguousarray(x, dtype=np.int64)
        y = np.ascontiguousarray(y, dtype=np.int64)
        if patch_margins is None:
            patch_margins = np.empty(0, dtype=np.int64)
        else:
            patch_margins = np.clip(np.asarray(patch_margins, dtype=np.int64), 0, margin)
            if patch_margins.shape != (self.count,):
                raise ValueError(f"patch_margins must hold one margin per patch ({self.count}), "
                                 f"got shape {patch_margins.shape}")
        per_axis = -(-(self.size + 2 * margin) // self.stride)  # patches an event can belong to, per axis
        return _memberships(x, y, self.size, self.stride, margin, self.columns, self.rows, per_axis, patch_margins)

    def event_counts(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        """(P,) events whose pixel lies in each patch proper."""
        _, patch = self.memberships(x, y, margin=0)
        return np.bincount(patch, minlength=self.count)

    def neighbours(self) -> np.ndarray:
        """(P, 8) indices of the 8-connected neighbours of each patch, -1 where outside the grid."""
        row, column = np.divmod(np.arange(self.count), self.columns)
        result = np.full((self.count, 8), -1, dtype=np.int64)
        slot = 0
        for dy in (-1, 0, 1):
            for dx in (-1, 0, 1):
                if dx == 0 and dy == 0:
                    continue
                r, c = row + dy, column + dx
                valid = (r >= 0) & (r < self.rows) & (c >= 0) & (c < self.columns)
                result[valid, slot] = r[valid] * self.columns + c[valid]
                slot += 1
        return result


#: multiplier of the timestamp hash (2^64 / golden ratio, odd)
_HASH_MULTIPLIER = np.uint64(0x9E3779B97F4A7C15)


def subpixel_offsets(t_ns: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A fixed sub-pixel position in [-0.5, 0.5) px per event (x and y), from a hash of its
    timestamp (ns): deterministic, so the node and ``focus-ros flow`` see the same events.

    Why: a sensor reports integer pixels; at v = 0 (and along vx = 0 or vy = 0) every event would
    sit exactly on a pixel centre, where bilinear voting has a kink, and all these kinks add up
    to a ridge of the focus landscape that traps the optimiser (flows got stuck at vy = 0).
    Spreading each event uniformly over its pixel, where it happened, removes the ridge.
    """
    hashed = np.asarray(t_ns, dtype=np.int64).view(np.uint64) * _HASH_MULTIPLIER
    scale = 1.0 / float(1 << 24)
    offset_x = ((hashed >> np.uint64(40)) & np.uint64(0xFFFFFF)).astype(np.float64) * scale - 0.5
    offset_y = ((hashed >> np.uint64(16)) & np.uint64(0xFFFFFF)).astype(np.float64) * scale - 0.5
    return offset_x, offset_y


@numba.njit(**KERNEL_OPTIONS)
def _membership_inputs(event_index, patch, x, y, t, p, jitter_x, jitter_y, t_ref_ns, columns, stride, border,
                       use_polarity, local_x, local_y, dt, weights):
    """Per membership: the event's position in its patch's tile (px, dithered), dt = t - t_ref (s)
    and weight b_k (p_k or 1)."""
    for k in range(event_index.shape[0]):
        e = event_index[k]
        row, column = divmod(patch[k], columns)
        local_x[k] = x[e] - (column * stride - border) + jitter_x[e]
        local_y[k] = y[e] - (row * stride - border) + jitter_y[e]
        dt[k] = (t[e] - t_ref_ns) * 1e-9
        weights[k] = p[e] if use_polarity else 1.0


@numba.njit(**KERNEL_OPTIONS)
def _warp_memberships(local_x, local_y, dt, patch, flow, active, warped_x, warped_y):
    """x'_k = x_k - dt_k v_p (``warp_flow`` in tile pixels) for every (event, patch) membership;
    memberships of inactive patches go to NaN, so that the bilinear cells drop them."""
    for k in range(dt.shape[0]):
        p = patch[k]
        x, y, _, _, _, _, _, _ = warp_flow(local_x[k], local_y[k], dt[k], flow[p, 0], flow[p, 1], 0.0,
                                           1.0, 1.0, 0.0, 0.0, False)
        warped_x[k] = x if active[p] else np.nan
        warped_y[k] = y if active[p] else np.nan


@numba.njit(**KERNEL_OPTIONS)
def _flow_gradients(d_x, d_y, dt, patch, kept, kept_counts, gradient):
    """gradient[p] = sum over the kept memberships k of patch p of (d_x, d_y)_k . dx'_k/dv with
    dx'_k/dv = -dt_k I (``warp_flow``'s Jacobian); also counts the kept memberships per patch.
    Memberships come patch by patch: the sums stay in registers until the patch changes."""
    gradient[:] = 0.0
    kept_counts[:] = 0
    current = -1
    g0 = g1 = 0.0
    count = 0
    for k in range(dt.shape[0]):
        p = patch[k]
        if p != current:
            if current >= 0:
                gradient[current, 0] += g0
                gradient[current, 1] += g1
                kept_counts[current] += count
            current = p
            g0 = g1 = 0.0
            count = 0
        inside = kept[k]
        g0 -= d_x[k] * dt[k] if inside else 0.0
        g1 -= d_y[k] * dt[k] if inside else 0.0
        count += inside
    if current >= 0:
        gradient[current, 0] += g0
        gradient[current, 1] += g1
        kept_counts[current] += count


#: below this share of the memberships, an evaluation runs on a copy of the active patches' ones
SUBSET_SHARE = 0.5


@dataclass
class PatchEvaluation:
    """Values (P,) of the loss (its own sign) per patch, gradients (P, 2) d loss / d v
    (per px/s) or None, and the memberships kept in each patch's tile (P,) (with the gradient only)."""

    values: np.ndarray
    gradients: np.ndarray | None
    kept: np.ndarray


class PatchObjective:
    """The focus loss of every patch of a grid as a function of the patches' flows v (P, 2) px/s.

    loss: registry name or loss object; use_polarity: b_k = p_k (True) or 1 (False) — losses
    that need a count image (the area losses) work only without polarity here;
    blur_sigma_px: Gaussian blur (px) of each tile before the loss, 0 = none (at most 1 px:
    the tiles' zero gap is ``GAP_ROWS`` rows).
    """

    def __init__(self, grid: PatchGrid, loss, use_polarity: bool = False, blur_sigma_px: float = 0.0,
                 loss_options=None):
        self.grid = grid
        self.loss = get_loss(loss) if isinstance(loss, str) else loss
        if getattr(self.loss, "uses_timestamps", False):
            raise ValueError(f"loss '{self.loss.name}' needs timestamp images, which patch flow does not build")
        mode = "with" if use_polarity else "without"
        if mode not in self.loss.polarity_modes:
            modes = supported_polarity_modes(self.loss)
            raise ValueError(f"loss '{self.loss.name}' works for patch flow only "
                             f"{' or '.join(m for m in modes if m in self.loss.polarity_modes)} polarity, "
                             f"not {mode}")
        self.use_polarity = bool(use_polarity)
        self.loss_options = loss_options
        if not (math.isfinite(blur_sigma_px) and blur_sigma_px >= 0):
            raise ValueError(f"IWE blur sigma must be >= 0 px (0 = no blur), got {blur_sigma_px}")
        self.blur_sigma_px = float(blur_sigma_px)
        self._blur_kernel = gaussian_blur_kernel(self.blur_sigma_px) if self.blur_sigma_px > 0 else None
        if self._blur_kernel is not None and len(self._blur_kernel) // 2 > GAP_ROWS:
            raise ValueError(f"IWE blur sigma {blur_sigma_px} px is too wide for patch tiles (at most 1 px)")
        tile = grid.tile
        self.plane_rows = tile + GAP_ROWS
        self._stack = np.zeros((grid.count, self.plane_rows, tile))
        self.set_events(Events.empty(), 0)

    # ---------------------------------------------------------------- events

    def set_events(self, events: Events, t_ref_ns: int, patch_margins: np.ndarray | None = None) -> None:
        """Use this window; dt_k = t_k - t_ref (s). Events outside every patch are ignored.
        patch_margins (P,) px: gather each patch's events within its own margin (at most the
        grid's; default: the grid's margin for all): fewer memberships where the flow is known to
        be small."""
        grid = self.grid
        # patch by patch: each tile stays in cache
        event_index, patch = grid.memberships(events.x, events.y, patch_margins=patch_margins)
        #: gathering margin of each patch (P,) px
        self.patch_margins = (np.full(grid.count, grid.margin, dtype=np.int64) if patch_margins is None
                              else np.clip(np.asarray(patch_margins, dtype=np.int64), 0, grid.margin))
        self.patch = patch
        jitter_x, jitter_y = subpixel_offsets(events.t)
        count = len(patch)
        self.local_x = np.empty(count)
        self.local_y = np.empty(count)
        self.dt = np.empty(count)
        self.weights = np.empty(count)
        _membership_inputs(event_index, patch, np.ascontiguousarray(events.x), np.ascontiguousarray(events.y),
                           np.ascontiguousarray(events.t), np.ascontiguousarray(events.p), jitter_x, jitter_y,
                           np.int64(t_ref_ns), grid.columns, grid.stride, grid.border, self.use_polarity,
                           self.local_x, self.local_y, self.dt, self.weights)
        #: events of each patch proper (P,)
        self.event_counts = grid.event_counts(events.x, events.y)
        self.plane_offset = self.patch * (self.plane_rows * grid.tile)
        count = len(self.patch)
        self._work = VotingWorkArrays.allocate(count)
        self._kept_counts = np.zeros(grid.count, dtype=np.int64)
        #: memberships of patch p: [starts[p], starts[p + 1]) (they are ordered by patch)
        self._starts = np.searchsorted(self.patch, np.arange(grid.count + 1))
        self._subset_key = None
        self._inputs = self._all_inputs = (self.local_x, self.local_y, self.dt, self.patch, self.weights,
                                           self.plane_offset)

    def _select(self, active: np.ndarray) -> None:
        """Point the kernels at the memberships of the active patches only, when they are few
        (the late iterations of the batched solve): a copy of their inputs, kept while the same
        patches stay active."""
        if active.all():
            self._inputs = self._all_inputs
            return
        rows = np.flatnonzero(active)
        begins, ends = self._starts[rows], self._starts[rows + 1]
        lengths = ends - begins
        total = int(lengths.sum())
        if total > SUBSET_SHARE * len(self.patch):
            self._inputs = self._all_inputs
            return
        key = rows.tobytes()
        if key != self._subset_key:
            index = np.arange(total) + np.repeat(begins - (np.cumsum(lengths) - lengths), lengths)
            self._subset = tuple(array[index] for array in self._all_inputs)
            self._subset_key = key
        self._inputs = self._subset

    # ---------------------------------------------------------------- evaluation

    def _forward(self, flow: np.ndarray, active: np.ndarray) -> np.ndarray:
        tile = self.grid.tile
        self._select(active)
        local_x, local_y, dt, patch, weights, plane_offset = self._inputs
        n = len(dt)
        work = self._work
        _warp_memberships(local_x, local_y, dt, patch, flow, active, work.warped_x[:n], work.warped_y[:n])
        bilinear_cells(work.warped_x[:n], work.warped_y[:n], tile, tile, work.cell[:n], work.fraction_x[:n],
                       work.fraction_y[:n], work.kept[:n])
        self._stack.fill(0.0)
        vote_bilinear_cells(work.cell[:n], work.fraction_x[:n], work.fraction_y[:n], work.kept[:n], weights,
                            plane_offset, tile, self._stack.reshape(-1))
        if self._blur_kernel is None:
            return self._stack
        return tile_filter(self._stack, tile, self._blur)

    def _blur(self, image: np.ndarray) -> np.ndarray:
        return blur_image(image, self._blur_kernel, np.empty_like(image))

    def _prepare(self, flow, active):
        flow = np.ascontiguousarray(flow, dtype=np.float64).reshape(self.grid.count, 2)
        if active is None:
            active = np.ones(self.grid.count, dtype=np.bool_)
        return flow, np.ascontiguousarray(active, dtype=np.bool_)

    def evaluate(self, flow, active=None, with_gradient: bool = True) -> PatchEvaluation:
        """Loss per patch at flows (P, 2) px/s and, if asked, d loss / d v (P, 2).
        active: (P,) bool, the patches to evaluate (others: events dropped, values and gradients
        meaningless); when they hold under SUBSET_SHARE of the memberships only theirs are warped."""
        flow, active = self._prepare(flow, active)
        images = self._forward(flow, active)
        tile = self.grid.tile
        values, grad_images = evaluate_stack(self.loss, images, tile, active, self.loss_options)
        if not with_gradient:
            return PatchEvaluation(values, None, None)
        if self._blur_kernel is not None:
            grad_images = tile_filter(grad_images, tile, self._blur)
        _, _, dt, patch, weights, plane_offset = self._inputs
        n = len(dt)
        work = self._work
        gather_bilinear_cells(work.cell[:n], work.fraction_x[:n], work.fraction_y[:n], work.kept[:n], weights,
                              plane_offset, tile, np.ascontiguousarray(grad_images).reshape(-1),
                              work.d_x[:n], work.d_y[:n], False)
        gradients = np.empty((self.grid.count, 2))
        _flow_gradients(work.d_x[:n], work.d_y[:n], dt, patch, work.kept[:n], self._kept_counts, gradients)
        return PatchEvaluation(values, gradients, self._kept_counts.copy())

    def images(self, flow, active=None) -> np.ndarray:
        """The tiles the loss sees at flows (P, 2): (P, tile, tile) copies (blurred if set)."""
        flow, active = self._prepare(flow, active)
        return self._forward(flow, active)[:, :self.grid.tile, :].copy()
