"""Patch optical flow by focus maximisation, window by window (the paper's Sec. 4.3).

For each window of events the image is split into a grid of square patches
(``focus_ros.flow.patches.PatchGrid``); every patch gets the flow v (px/s, raw sensor pixels)
maximising the focus score ``sign * loss(IWE_patch(v))`` of its events warped by
``x'_k = x_k - (t_k - t_ref) v``. All patches are solved together: one engine call evaluates
every patch (``PatchObjective``) and a batched BFGS (``focus_ros.flow.batched_bfgs``) runs one
small problem per patch.

The search runs in displacement units: u = v * T (px over the window's time span T), so that
step sizes and tolerances mean the same at every event rate. Starts: each patch begins at the
best (highest focus score) of its candidate starts — 0, its previous window's flow (or, when it
had none, the affine flow field fitted to the previous flows, or those of the nearest patches),
and the flow of the coarser pyramid level when ``pyramid_patch_sizes`` is set (coarse-to-fine:
larger tiles first, each level started from the one above; run only when a patch with enough
events has no warm start: the first window, after a reset or a gap).

A patch's flow is reported invalid (NaN) rather than wrong when (``REASONS``):

- it has fewer than ``min_events_per_patch`` events, or the window fewer than
  ``min_window_events``;
- its focus landscape is flat around the maximum: the score drops by less than
  ``min_relative_drop`` of its value when u moves by ``probe_px`` in every direction
  (no texture, noise only);
- aperture problem: the structure tensor of the patch's sharp IWE has a smaller-to-larger
  eigenvalue ratio below ``min_aperture_ratio`` (all edges parallel, e.g. one straight edge:
  only the normal component is observable; the estimator does not invent the other one);
- the flow brings events from beyond the gathering margin (|u| / 2 > margin for t_ref in the
  middle; with a warm start each patch first gathers only within the margin its previous flow
  needs, and a patch whose flow leaves it is solved again with ``margin_px``) or the optimiser
  produced a non-finite value.

The drops come from the focus score at u* ± probe along x and y (4 batched value
evaluations). The coarser pyramid levels only provide starts: they skip these checks. The
confidence of a patch is its focus gain over v = 0, ``(score(v*) - score(0)) / |score(0)|``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np

from focus_ros.estimators.angular_velocity import default_blur_sigma_px, reference_time_ns
from focus_ros.events import NANOSECONDS_PER_SECOND, Events
from focus_ros.losses import LOSSES, get_loss
from focus_ros.optimize import OptimizerSettings
from focus_ros.flow.batched_bfgs import minimize_batched
from focus_ros.flow.patches import PatchGrid, PatchObjective

VALID, FEW_EVENTS, FLAT, APERTURE, OUT_OF_RANGE = 0, 1, 2, 3, 4
#: reason code -> text (flow.csv's ``reason`` column, diagnostics)
REASONS = {VALID: "valid", FEW_EVENTS: "too few events", FLAT: "flat focus landscape",
           APERTURE: "aperture problem (one edge)", OUT_OF_RANGE: "flow out of range"}

#: the batched optimiser's settings in displacement units (px over the window): first step
#: 0.5 px, stop when a step moves less than 0.02 px, the relative cost change is below 1e-4 or
#: the gradient norm below 1e-6, at most 10 iterations of at most 4 line-search trials
FLOW_OPTIMIZER_SETTINGS = OptimizerSettings(gradient_tolerance=1e-6, value_tolerance=1e-4, step_tolerance=0.02,
                                            max_iterations=10, initial_step=0.5, max_line_search_evaluations=4)

T_REF_CHOICES = ("start", "middle", "end")
#: how the warm start fills the patches without a previous flow (OpticalFlowSettings.warm_fill)
WARM_FILLS = ("affine", "rings")



@dataclass(frozen=True)
class OpticalFlowSettings:
    """How to estimate patch flow (units in the names; defaults in brackets; the reasons for the
    defaults, measured, are in EVALUATION.md, "Flow: patch optical flow").

    loss [variance]: registry name (not the timestamp loss; counts-only losses without polarity);
    use_polarity [False]: b_k = p_k; patch_size_px [15, the paper's] and patch_stride_px [= size]: the grid;
    margin_px [8]: events within this many px of a patch are warped into it (px); adaptive_margin
    [True]: with a warm start, each patch gathers only within the margin its previous flow needs —
    motion from t_ref to the window's far end × margin_growth [1.25] + margin_slack_px [2.0] px,
    at most margin_px (a flow found beyond a patch's margin is reported out of range);
    border_px [2]: the patch IWE's border (px); t_ref ["middle"]: "start" | "middle" | "end";
    blur_sigma_px [None = 1 px for spatial losses, else 0]: IWE blur (px, at most 1);
    min_events_per_patch [150: the error falls with the events per patch, so fewer valid patches
    buy accuracy], min_window_events [1000]; probe_px [1.0]: displacement (px over the
    window) of the curvature probe; min_relative_drop [0.02]; min_aperture_ratio [0.15];
    warm_start [True]: start from the previous window's flows; warm_fill ["affine": more accurate
    and fewer iterations than the neighbours' mean]: a patch
    without one starts from the affine flow field fitted to the others (``fill_affine``) or
    ("rings") from the nearest ones (``fill_from_neighbours``); gap_reset_windows [10]: forget them
    after a gap of that many window durations; pyramid_patch_sizes [(45,)]: coarser patch sizes
    (px, e.g. (60, 30); () for none) solved first, coarse to fine; max_step_px [2.0]: longest optimiser step (px
    over the window); straggler_share [0.05]: the batched solve stops when no more than this share
    of the patches still iterate (they keep their best point so far); optimizer_settings: the batched BFGS's
    stopping rules in px over the window (FLOW_OPTIMIZER_SETTINGS; tighter ones gain nothing measurable);
    loss_options [None: ``LossOptions()``]: the losses' parameters.
    """

    loss: str = "variance"
    use_polarity: bool = False
    patch_size_px: int = 15
    patch_stride_px: int | None = None
    margin_px: int = 8
    adaptive_margin: bool = True
    margin_growth: float = 1.25
    margin_slack_px: float = 2.0
    border_px: int = 2
    t_ref: str = "middle"
    blur_sigma_px: float | None = None
    min_events_per_patch: int = 150
    min_window_events: int = 1000
    probe_px: float = 1.0
    min_relative_drop: float = 0.02
    min_aperture_ratio: float = 0.15
    warm_start: bool = True
    warm_fill: str = "affine"
    gap_reset_windows: float = 10.0
    pyramid_patch_sizes: tuple = (45,)
    max_step_px: float = 2.0
    straggler_share: float = 0.05
    optimizer_settings: OptimizerSettings = field(default_factory=lambda: FLOW_OPTIMIZER_SETTINGS)
    loss_options: object = None


@dataclass
class FlowEstimate:
    """Flow of every patch of one window.

    t_ref_ns: reference time (ns); duration_s: the window's time span T (s); centers (P, 2):
    patch centres (x, y) px; flow (P, 2): (vx, vy) px/s, NaN where invalid; event_counts (P,);
    confidence (P,): focus gain over v = 0 (NaN where not evaluated); reason (P,): REASONS code;
    iterations (P,); evaluations: engine calls for the window.
    """

    t_ref_ns: int
    duration_s: float
    centers: np.ndarray
    flow: np.ndarray
    event_counts: np.ndarray
    confidence: np.ndarray
    reason: np.ndarray
    iterations: np.ndarray
    evaluations: int
    grid: PatchGrid

    @property
    def valid(self) -> np.ndarray:
        return self.reason == VALID

    def flow_image(self) -> np.ndarray:
        """(rows, columns, 2) float32 (vx, vy) px/s per patch, NaN where invalid (the node's 32FC2)."""
        return self.flow.reshape(self.grid.rows, self.grid.columns, 2).astype(np.float32)


def aperture_ratio(tiles: np.ndarray, border: int) -> np.ndarray:
    """Smaller over larger eigenvalue (P,) of each tile's structure tensor
    sum (I_x, I_y)' (I_x, I_y) over the patch (tiles (P, tile, tile), the sharp IWEs; gradients
    by the losses' Sobel filter after a 1-px blur): near 0 when all the patch's gradients are
    parallel (one straight edge: the flow along it is not observable), near 1 for corners and
    texture. NaN for a tile without gradient."""
    from focus_ros.iwe import gaussian_blur_kernel
    from focus_ros.losses import filters
    from focus_ros.flow.patch_losses import GAP_ROWS, tile_filter

    count, tile, _ = tiles.shape
    stack = np.zeros((count, tile + GAP_ROWS, tile))
    stack[:, :tile, :] = tiles
    kernel = gaussian_blur_kernel(1.0)
    smooth = tile_filter(stack, tile, lambda image: filters.correlate_separable(image, kernel, kernel))
    inner = (slice(None), slice(border, tile - border), slice(border, tile - border))
    image_x = tile_filter(smooth, tile, filters.derivative_x)[inner]
    image_y = tile_filter(smooth, tile, filters.derivative_y)[inner]
    a_xx = (image_x * image_x).sum(axis=(1, 2))
    a_yy = (image_y * image_y).sum(axis=(1, 2))
    a_xy = (image_x * image_y).sum(axis=(1, 2))
    mean = (a_xx + a_yy) / 2.0
    radius = np.sqrt(((a_xx - a_yy) / 2.0) ** 2 + a_xy ** 2)
    with np.errstate(invalid="ignore", divide="ignore"):
        return (mean - radius) / (mean + radius)


def fill_from_neighbours(flows: np.ndarray, neighbours: np.ndarray) -> np.ndarray:
    """Flows (P, 2) with every NaN row replaced by the mean of its known 8-connected neighbours
    (``PatchGrid.neighbours``), ring after ring outwards until every patch connected to a known
    one has a value: a patch far from any valid flow gets the flow of the nearest valid ones."""
    flows = np.array(flows, dtype=np.float64, copy=True)
    exists = neighbours >= 0
    missing = ~np.isfinite(flows[:, 0])
    while missing.any():
        neighbour_flows = np.where(exists[..., None], flows[np.maximum(neighbours, 0)], np.nan)
        known = np.isfinite(neighbour_flows[..., 0])
        known_count = known.sum(axis=1)
        fillable = missing & (known_count > 0)
        if not fillable.any():
            break
        total = np.where(known[..., None], neighbour_flows, 0.0).sum(axis=1)
        flows[fillable] = total[fillable] / known_count[fillable, None]
        missing &= ~fillable
    return flows


#: the affine fill needs at least this many known flows (3 parameters per component, and spares)
MIN_AFFINE_FLOWS = 8


def fill_affine(flows: np.ndarray, centers: np.ndarray, neighbours: np.ndarray) -> np.ndarray:
    """Flows (P, 2) px/s with every NaN row replaced by the affine flow field
    v(x, y) = a + B (x, y) fitted by least squares to the known rows at their patch centres
    (P, 2) px, refitted once without the known flows more than 3 median residuals off (wrong
    previous flows); ``fill_from_neighbours`` when fewer than ``MIN_AFFINE_FLOWS`` are known.
    A camera's rotation gives a nearly affine field over a DAVIS-sized sensor (rotation about the
    optical axis: linear in x, y; about x, y: nearly constant), which one patch's neighbours
    alone do not extrapolate."""
    flows = np.array(flows, dtype=np.float64, copy=True)
    known = np.isfinite(flows).all(axis=1)
    if known.sum() < MIN_AFFINE_FLOWS:
        return fill_from_neighbours(flows, neighbours)
    design = np.column_stack([np.ones(len(centers)), centers[:, 0], centers[:, 1]])
    coefficients = np.linalg.lstsq(design[known], flows[known], rcond=None)[0]
    residual = np.linalg.norm(design[known] @ coefficients - flows[known], axis=1)
    inliers = residual <= 3.0 * np.median(residual)
    if MIN_AFFINE_FLOWS <= inliers.sum() < known.sum():
        coefficients = np.linalg.lstsq(design[known][inliers], flows[known][inliers], rcond=None)[0]
    flows[~known] = design[~known] @ coefficients
    return flows


class OpticalFlowEstimator:
    """Patch flow per window with warm start (module docstring). Raises ValueError naming the
    problem for settings that make no sense."""

    def __init__(self, width: int, height: int, settings: OpticalFlowSettings = OpticalFlowSettings()):
        if settings.loss not in LOSSES:
            raise ValueError(f"unknown loss '{settings.loss}': choose one of {', '.join(LOSSES)}")
        if settings.warm_fill not in WARM_FILLS:
            raise ValueError(f"unknown warm_fill '{settings.warm_fill}': choose one of {', '.join(WARM_FILLS)}")
        if settings.t_ref not in T_REF_CHOICES:
            raise ValueError(f"unknown t_ref '{settings.t_ref}': choose one of {', '.join(T_REF_CHOICES)}")
        for name in ("probe_px", "min_relative_drop", "gap_reset_windows"):
            value = getattr(settings, name)
            if not (math.isfinite(value) and value > 0):
                raise ValueError(f"{name} must be a positive number, got {value}")
        if not 0 <= settings.min_aperture_ratio < 1:
            raise ValueError(f"min_aperture_ratio must be in [0, 1), got {settings.min_aperture_ratio}")
        if settings.min_events_per_patch < 1 or settings.min_window_events < 1:
            raise ValueError("min_events_per_patch and min_window_events must be at least 1")
        self.settings = settings
        self.loss = get_loss(settings.loss)
        self.grid = PatchGrid(width, height, settings.patch_size_px, settings.patch_stride_px, settings.margin_px,
                              settings.border_px)
        self.blur_sigma_px = (default_blur_sigma_px(self.loss) if settings.blur_sigma_px is None
                              else settings.blur_sigma_px)
        self.objective = PatchObjective(self.grid, self.loss, settings.use_polarity, self.blur_sigma_px,
                                        settings.loss_options)
        self._neighbours = self.grid.neighbours()
        sizes = tuple(int(size) for size in settings.pyramid_patch_sizes)
        if sizes and (min(sizes) <= settings.patch_size_px or list(sizes) != sorted(sizes, reverse=True)):
            raise ValueError(f"pyramid_patch_sizes must decrease and exceed the patch size "
                             f"{settings.patch_size_px} px, got {sizes}")
        self._coarser = (OpticalFlowEstimator(width, height, replace(settings, patch_size_px=sizes[-1],
                                                                     patch_stride_px=None,
                                                                     pyramid_patch_sizes=sizes[:-1]))
                         if sizes else None)
        if self._coarser is not None:
            self._coarser.is_coarse_level = True
        #: a coarser pyramid level (its flows only start the finer level: no validity checks)
        self.is_coarse_level = False
        self.reset()

    def reset(self) -> None:
        """Forget the warm start."""
        self.previous: np.ndarray | None = None  # (P, 2) px/s, NaN where unknown
        #: windows solved a second time with the full margin (a flow outgrew its narrowed margin)
        self.margin_retries = 0
        self._previous_end_ns: int | None = None
        self._previous_duration_ns = 0
        if self._coarser is not None:
            self._coarser.reset()

    # ---------------------------------------------------------------- starts

    def _warm_flows(self, events: Events) -> np.ndarray | None:
        """Previous flows, holes filled (``warm_fill``: ``fill_affine`` or ``fill_from_neighbours``)
        (P, 2) px/s, or None."""
        if not self.settings.warm_start or self.previous is None:
            return None
        if self._previous_end_ns is not None and self._previous_duration_ns > 0:
            gap = int(events.t[0]) - self._previous_end_ns
            if gap > self.settings.gap_reset_windows * self._previous_duration_ns or gap < -self._previous_duration_ns:
                return None
        if self.settings.warm_fill == "affine":
            return fill_affine(self.previous, self.grid.centers, self._neighbours)
        return fill_from_neighbours(self.previous, self._neighbours)  # "rings"

    def _gathering_margins(self, warm: np.ndarray | None, span_s: float, reach: float) -> np.ndarray | None:
        """Per patch, the gathering margin (px) its warm-start flow needs: the motion between t_ref
        and the window's far end at that flow, times ``margin_growth``, plus ``margin_slack_px``
        (at most ``margin_px``; ``margin_px`` where the patch has no warm start). None (the grid's
        margin everywhere) when ``adaptive_margin`` is off or there is no warm start."""
        settings = self.settings
        if not settings.adaptive_margin or warm is None:
            return None
        motion = np.linalg.norm(warm, axis=1) * span_s * reach
        needed = np.ceil(motion * settings.margin_growth + settings.margin_slack_px)
        return np.where(np.isfinite(needed), np.minimum(needed, self.grid.margin), self.grid.margin).astype(np.int64)

    def _coarse_flows(self, events: Events) -> np.ndarray | None:
        """Flows of the coarser level at this grid's patch centres (P, 2) px/s, or None."""
        if self._coarser is None:
            return None
        coarse = self._coarser.estimate(events)
        coarse_grid = self._coarser.grid
        centers = self.grid.centers
        column = np.clip(np.floor(centers[:, 0] / coarse_grid.stride).astype(int), 0, coarse_grid.columns - 1)
        row = np.clip(np.floor(centers[:, 1] / coarse_grid.stride).astype(int), 0, coarse_grid.rows - 1)
        return coarse.flow[row * coarse_grid.columns + column]

    # ---------------------------------------------------------------- estimation

    def estimate(self, events: Events) -> FlowEstimate:
        """The flow of every patch for one window of time-ordered events."""
        settings = self.settings
        grid = self.grid
        count = grid.count
        nan2 = np.full((count, 2), np.nan)
        if len(events) == 0:
            return FlowEstimate(0, 0.0, grid.centers, nan2, np.zeros(count, dtype=np.int64), np.full(count, np.nan),
                                np.full(count, FEW_EVENTS), np.zeros(count, dtype=np.int64), 0, grid)
        t_ref_ns = reference_time_ns(events, settings.t_ref)
        span_ns = int(events.t[-1]) - int(events.t[0])
        span_s = span_ns / NANOSECONDS_PER_SECOND
        self._span_s = span_s
        warm = self._warm_flows(events)
        # the far end of the window from t_ref, as a share of the span: |u| * reach px of motion
        reach = max(t_ref_ns - int(events.t[0]), int(events.t[-1]) - t_ref_ns) / max(span_ns, 1)
        margins = self._gathering_margins(warm, span_s, reach)
        estimate = self._solve(events, t_ref_ns, span_ns, warm, reach, margins)
        if margins is not None:
            # a flow beyond a margin narrowed by the warm start (the motion grew): solve again with
            # the full margin for those patches rather than report them out of range
            motion = np.linalg.norm(self._solution, axis=1) * reach
            grown = (estimate.reason == OUT_OF_RANGE) & (margins < motion) & (motion <= grid.margin)
            if grown.any():
                self.margin_retries += 1
                again = self._solve(events, t_ref_ns, span_ns, warm, reach, np.where(grown, grid.margin, margins),
                                    only=grown)
                for name in ("flow", "confidence", "reason", "iterations"):
                    getattr(estimate, name)[grown] = getattr(again, name)[grown]
                estimate.evaluations += again.evaluations
        self._previous_end_ns = int(events.t[-1])
        self._previous_duration_ns = span_ns
        flow = estimate.flow
        self.previous = flow.copy() if np.isfinite(flow).any() else None
        return estimate

    def _solve(self, events: Events, t_ref_ns: int, span_ns: int, warm, reach: float, margins,
               only: np.ndarray | None = None) -> FlowEstimate:
        """One window's flows from the starts (module docstring), events gathered within
        ``margins`` (P,) px (None: the grid's margin), only the patches ``only`` (P,) bool if given
        (the others: FEW_EVENTS); no change of the warm-start state."""
        settings = self.settings
        grid = self.grid
        count = grid.count
        span_s = span_ns / NANOSECONDS_PER_SECOND
        nan2 = np.full((count, 2), np.nan)
        self.objective.set_events(events, t_ref_ns, margins)
        counts = self.objective.event_counts
        reason = np.where(counts >= settings.min_events_per_patch, VALID, FEW_EVENTS)
        if len(events) < settings.min_window_events or span_ns <= 0:
            reason[:] = FEW_EVENTS
        if only is not None:
            reason[~only] = FEW_EVENTS
        active = reason == VALID
        # coarse-to-fine only where a patch to solve has no warm start (first window, after a reset
        # or a gap, a patch whose neighbourhood had no flow): patches without events need none
        coarse = (self._coarse_flows(events)
                  if active.any() and (warm is None or not np.isfinite(warm[active]).all()) else None)
        iterations = np.zeros(count, dtype=np.int64)
        confidence = np.full(count, np.nan)
        self._solution = nan2
        if not active.any():
            return FlowEstimate(t_ref_ns, span_s, grid.centers, nan2, counts, confidence, reason, iterations, 0, grid)
        sign = self.loss.sign
        evaluations = 0

        def scores(u, rows):
            nonlocal evaluations
            evaluations += 1
            return sign * self.objective.evaluate(u / span_s, rows, with_gradient=False).values

        # candidate starts (px over the window), best score per patch wins
        zero = np.zeros((count, 2))
        score_at_zero = scores(zero, active)
        start, start_score = zero, score_at_zero.copy()
        for candidate in (warm, coarse):
            if candidate is None:
                continue
            u = np.where(np.isfinite(candidate), candidate * span_s, 0.0)
            candidate_score = scores(u, active)
            better = active & (candidate_score > start_score)
            start = np.where(better[:, None], u, start)
            start_score = np.where(better, candidate_score, start_score)
        scale = np.where(np.abs(start_score) > 0, np.abs(start_score), 1.0)

        def cost(u, rows):
            nonlocal evaluations
            evaluations += 1
            evaluation = self.objective.evaluate(u / span_s, rows)
            return -sign * evaluation.values / scale, -sign * evaluation.gradients * (1.0 / span_s) / scale[:, None]

        result = minimize_batched(cost, start, active, settings.optimizer_settings, max_step=settings.max_step_px,
                                  straggler_share=settings.straggler_share)
        u = result.x
        iterations[:] = result.iterations
        score = -result.value * scale  # the cost is -score / scale at the optimiser's point
        # keep the start where the optimiser ended lower (noise)
        worse = active & (score < start_score)
        u = np.where(worse[:, None], start, u)
        score = np.where(worse, start_score, score)
        confidence[active] = ((score - score_at_zero)
                              / np.where(score_at_zero != 0, np.abs(score_at_zero), 1.0))[active]
        reason[active & ~np.all(np.isfinite(u), axis=1)] = OUT_OF_RANGE
        beyond_margin = np.linalg.norm(np.nan_to_num(u), axis=1) * reach > self.objective.patch_margins
        reason[active & beyond_margin] = OUT_OF_RANGE
        if not self.is_coarse_level:
            reason = self._check_curvature(u, score, reason, scores)
        flow = np.where((reason == VALID)[:, None], u / span_s, np.nan)
        self._solution = u  # px over the window, valid or not
        return FlowEstimate(t_ref_ns, span_s, grid.centers, flow, counts, confidence, reason, iterations,
                            evaluations, grid)

    def _check_curvature(self, u, score, reason, scores) -> np.ndarray:
        """Mark FLAT patches (the score drops by less than ``min_relative_drop`` of its value at
        u +- probe along x and along y) and APERTURE patches (``aperture_ratio``)."""
        settings = self.settings
        probe = settings.probe_px
        rows = reason == VALID
        if not rows.any():
            return reason
        steepest = np.zeros(len(score))
        for direction in ((probe, 0.0), (0.0, probe)):
            step = np.array(direction)
            drop = (2.0 * score - scores(u + step, rows) - scores(u - step, rows)) / 2.0
            steepest = np.maximum(steepest, drop)
        magnitude = np.where(np.abs(score) > 0, np.abs(score), 1.0)
        reason = reason.copy()
        flat = rows & ~(steepest / magnitude >= settings.min_relative_drop)
        reason[flat] = FLAT
        rows &= ~flat
        ratio = aperture_ratio(self.objective.images(u / self._span_s, rows), self.grid.border)
        reason[rows & ~(ratio >= settings.min_aperture_ratio)] = APERTURE
        return reason

    def with_settings(self, **changes) -> "OpticalFlowEstimator":
        """A new estimator with some settings changed (same sensor size)."""
        return OpticalFlowEstimator(self.grid.width, self.grid.height, replace(self.settings, **changes))
