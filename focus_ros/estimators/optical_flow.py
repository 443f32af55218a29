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

The drops come from the focus score at u* ± probe along x and y and at u* + probe (1, 1) (5
batched value evaluations), which also give the score's Hessian: the confidence of a patch is
its relative drop for a probe-length move in the direction it drops least, times the square
root of its events (``curvature_confidence``; near 0 on a ridge or a plateau), so users can keep
the surest flows (``min_confidence``).
The coarser pyramid levels only provide starts: they skip these checks.

Denser flow (``borrowing``): after the first pass, a second one solves again, each with a
quadratic prior towards the flow its neighbours predict (``borrowing_prior``), the patches with
few events (at least ``min_borrowing_events``), the aperture patches (their events fix the
component along the edge's normal, the prior the other) and, with ``smoothing``, the valid
ones; their flows are reported valid, flagged ``borrowed`` when they had too few events. An
aperture patch without a prior keeps its normal flow (``FlowEstimate.normal_flow``, the
component along its edge's normal, the only one its events determine).

Windows sized by the motion (``window_motion_px``): a window reaches back over the previous
windows' events (held by ``focus_ros.windows.RecentEvents``) until it spans that motion at the
last estimate's median patch speed, at most ``max_window_extension`` times its own span: a slow
scene's windows move more px (the error floor of a fraction of a px becomes a smaller share of the
flow), a fast one's stay as cut (or are trimmed, ``max_motion_margins``); the estimator, not the
cutter, sizes them, so the node and ``focus-ros flow``, fed the same windows, agree, and one flow
comes per window as cut. A valid patch moving less than ``min_motion_px`` over its window, and
less than ``min_relative_speed`` of the window's median patch, is reported IMPRECISE (slow
patches near a rotation's fixed point).

Large sensors: a window is thinned to ``max_window_events`` and its events binned
(``pixel_binning``) before all this; flows and patch centres are reported in raw pixels.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np

from focus_ros.estimators.angular_velocity import default_blur_sigma_px, reference_time_ns
from focus_ros.events import NANOSECONDS_PER_SECOND, Events
from focus_ros.losses import LOSSES, LossOptions, get_loss
from focus_ros.optimize import OptimizerSettings
from focus_ros.settings import setting
from focus_ros.flow.batched_bfgs import minimize_batched
from focus_ros.flow.neighbours import MIN_AFFINE_FLOWS, borrowing_prior, fill_affine, fill_from_neighbours
from focus_ros.flow.validity import aperture_ratio, curvature_confidence
from focus_ros.windows import RecentEvents, duration_for_motion_s, thin_events
from focus_ros.flow.patches import PatchGrid, PatchObjective

VALID, FEW_EVENTS, FLAT, APERTURE, OUT_OF_RANGE, IMPRECISE = 0, 1, 2, 3, 4, 5
#: reason code -> text (flow.csv's ``reason`` column, diagnostics)
REASONS = {VALID: "valid", FEW_EVENTS: "too few events", FLAT: "flat focus landscape",
           APERTURE: "aperture problem (one edge)", OUT_OF_RANGE: "flow out of range",
           IMPRECISE: "too slow for its precision"}

#: the batched optimiser's settings in displacement units (px over the window): first step
#: 0.5 px, stop when a step moves less than 0.02 px, the relative cost change is below 1e-4 or
#: the gradient norm below 1e-6, at most 10 iterations of at most 4 line-search trials
FLOW_OPTIMIZER_SETTINGS = OptimizerSettings(gradient_tolerance=1e-6, value_tolerance=1e-4, step_tolerance=0.02,
                                            max_iterations=10, initial_step=0.5, max_line_search_evaluations=4)

T_REF_CHOICES = ("start", "middle", "end")
#: the losses' parameters for patch flow: an area loss counts a pixel as covered from about
#: λ0 = 2 events on (``area_scale_events``; 1 is the full-frame default): on the simulated
#: sequences every error measure improved by 5-15 % for a few % fewer valid patches (EVALUATION.md)
FLOW_LOSS_OPTIONS = LossOptions(area_scale_events=2.0)

#: events per window on a DAVIS240C (240 x 180); other sensors scale it by their pixel count
#: (``default_window_events``)
WINDOW_EVENTS_240 = 30_000


def default_window_events(width: int, height: int) -> int:
    """Events per window for a width x height px sensor: WINDOW_EVENTS_240 scaled by the pixel
    count, so that a patch holds as many events at the same texture (the events per patch set
    the accuracy; a larger sensor has more patches to share a window's events)."""
    return max(1000, int(round(WINDOW_EVENTS_240 * width * height / (240 * 180), -3)))


def default_pixel_binning(width: int, height: int) -> int:
    """Pixels binned per side for a width x height px sensor: the largest power of two that keeps
    the binned width at least 240 px (1 for a DAVIS240C or DAVIS346, 2 for a 640x480 DVXplorer, 4
    for a 1280x720 IMX636). Why: with lenses of similar field of view, the binned image then moves
    as a DAVIS240C's does (px per rad), so the patch size, margins and window motion tuned there
    hold, and a window costs about what it costs there."""
    binning = 1
    while width // (2 * binning) >= 240:
        binning *= 2
    return binning


#: how the warm start fills the patches without a previous flow (OpticalFlowSettings.warm_fill)
WARM_FILLS = ("affine", "rings")


@dataclass(frozen=True)
class OpticalFlowSettings:
    """How to estimate patch flow, declared once (:mod:`focus_ros.settings`): ``focus-ros flow``'s
    options and optical_flow_node's parameters come from these fields; those without an option or a
    parameter are the engine's own.

    Patch sizes, strides and margins are in binned pixels (``pixel_binning``), flows and patch
    centres are reported in raw pixels; "over the window" means between the window's first and last
    event. The defaults were measured (EVALUATION.md, "Flow: defaults from measurement", made by
    ``benchmarks/eval_flow_defaults.py``): the error falls with the events per patch, so fewer valid
    patches buy accuracy (``min_events_per_patch``); the affine warm start is more accurate and needs
    fewer iterations than the neighbours' mean; windows sized by the motion make a slow scene's error
    floor of a fraction of a px a smaller share of its flow; tighter optimiser tolerances than
    ``FLOW_OPTIMIZER_SETTINGS`` gain nothing measurable.
    """

    loss: str = setting("area_exponential", "focus loss (focus_ros.losses.LOSSES; not mean_timestamp)")
    use_polarity: bool = setting(False, "IWE with polarity (b_k = p_k) instead of counts (b_k = 1)",
                                 option="--polarity")
    patch_size_px: int = setting(15, "patch side (the paper's 15 px)", unit="px", minimum=2, maximum=1024,
                                 option="--patch-size", read_only=True)
    patch_stride_px: int | None = setting(None, "distance between patches; unset = the patch size", unit="px",
                                          minimum=1, maximum=1024, unset=0, option="--patch-stride", read_only=True)
    margin_px: int = setting(12, "events within this distance of a patch are warped into it: the largest "
                             "displacement between an event and the reference time", unit="px", minimum=0,
                             maximum=256, option="--margin")
    adaptive_margin: bool = setting(True, "with a warm start each patch gathers only within the margin its previous "
                                    "flow needs (a flow found beyond it is solved again with margin_px)",
                                    option=None, parameter=None)
    margin_growth: float = setting(1.25, "that margin: the motion from t_ref to the window's far end times this, "
                                   "plus margin_slack_px, at most margin_px", minimum=1.0, option=None, parameter=None)
    margin_slack_px: float = setting(2.0, "the adaptive margin's slack", unit="px", minimum=0.0, option=None,
                                     parameter=None)
    border_px: int = setting(2, "border of a patch's IWE", unit="px", minimum=0, option=None, parameter=None)
    t_ref: str = setting("middle", "window reference time", choices=T_REF_CHOICES, option="--t-ref",
                         parameter="reference_time")
    blur_sigma_px: float | None = setting(None, "IWE blur; unset = the loss's default (1 px for spatial losses, "
                                          "else 0)", unit="px", minimum=0.0, maximum=1.0, unset=-1.0,
                                          option="--blur-sigma")
    min_events_per_patch: int = setting(150, "fewer events make a patch invalid", unit="events", minimum=1,
                                        maximum=1_000_000, option="--min-patch-events")
    borrowing: bool = setting(True, "a second pass solves the patches with few events and the aperture patches with "
                              "their neighbours' flow as a prior (off: they stay invalid)", option="--no-borrowing",
                              negated_option=True)
    min_borrowing_events: int = setting(50, "fewer events: no flow even with the prior", unit="events", minimum=1,
                                        maximum=1_000_000)
    prior_weight: float = setting(0.1, "the prior's cost: this share of the patch's focus score per px² (over the "
                                  "window) of distance, times min_events_per_patch / its events", minimum=0.0,
                                  option=None, parameter=None)
    smoothing: bool = setting(True, "the second pass also refines the valid patches with the prior",
                              option="--no-smoothing", negated_option=True)
    affine_prior: bool = setting(True, "where a patch's neighbours are too few for a prior, the affine field of the "
                                 "window's flows is its prior", option=None, parameter=None)
    max_motion_margins: float = setting(1.5, "a window whose warm start predicts more motion than this many margins "
                                        "is cut to its central part; 0 = never", minimum=0.0, option=None,
                                        parameter=None)
    pixel_binning: int = setting(0, "events binned b x b before the flow (patch sizes in binned px); 0 = from the "
                                 "sensor (1 up to 479 px wide, 2 up to 959, 4 up to 1919, and so on)", minimum=0,
                                 maximum=16, read_only=True)
    max_window_events: int | None = setting(None, "windows with more events are thinned to this many (uniform, "
                                            "deterministic); 0 = never; unset = with pixel binning the default "
                                            "window of the binned image, else never", unit="events", minimum=0,
                                            maximum=100_000_000, unset=-1)
    min_confidence: float = setting(0.0, "a valid patch needs at least this confidence (the focus's curvature at "
                                    "its maximum; flow.csv has each patch's)", minimum=0.0, maximum=10.0)
    min_motion_confidence: float = setting(0.0, "a valid patch needs at least this confidence times its motion over "
                                           "the window (px): slower ones, measured too coarsely, are imprecise",
                                           minimum=0.0, maximum=100.0)
    slow_motion_px: float = setting(0.0, "valid patches moving less than this over the window are solved again on "
                                    "slow_span_windows windows' span (previous events prepended); 0 = never",
                                    unit="px", minimum=0.0, maximum=100.0)
    slow_span_windows: float = setting(3.0, "the span of that second solve", unit="windows", minimum=1.0,
                                       option=None, parameter=None)
    window_motion_px: float = setting(10.0, "windows sized by the motion: a window reaches back over the previous "
                                      "windows' events until it spans this motion at the last estimate's median "
                                      "patch speed; 0 = the windows as cut", unit="px", minimum=0.0, maximum=1000.0)
    min_motion_px: float = setting(7.0, "a valid patch moving less than this over its window, and slower than "
                                   "min_relative_speed of the median patch, is imprecise (too slow for its "
                                   "precision)", unit="px", minimum=0.0, maximum=1000.0)
    min_relative_speed: float = setting(0.7, "share of the window's median patch speed under which a patch below "
                                        "min_motion_px is imprecise; 0 = everywhere", minimum=0.0, maximum=1.0)
    window_speed_quantile: float = setting(0.5, "quantile of the patches' speeds that sizes the next window (0.5: "
                                           "the median, the typical patch)", minimum=0.0, maximum=1.0, option=None,
                                           parameter=None)
    max_window_extension: float = setting(3.0, "the longest window sized by the motion, in windows as cut",
                                          unit="windows", minimum=1.0, maximum=100.0)
    extended_events_factor: float = setting(0.0, "a window sized by the motion is thinned to at most this many times "
                                            "the events of the window as cut (1: about its cost); 0 = all",
                                            minimum=0.0, maximum=100.0)
    min_window_events: int = setting(1000, "a window with fewer events gives no flow", unit="events", minimum=1,
                                     option=None, parameter=None)
    probe_px: float = setting(1.0, "displacement (over the window) of the curvature probe; positive", unit="px",
                              option=None, parameter=None)
    min_relative_drop: float = setting(0.02, "a patch whose focus drops by less than this share of its value at "
                                       "probe_px is flat (invalid); positive", option=None, parameter=None)
    min_aperture_ratio: float = setting(0.15, "structure-tensor eigenvalue ratio below which a patch is an aperture "
                                        "case (normal flow only)", minimum=0.0, maximum=0.99)
    warm_start: bool = setting(True, "start from the previous window's flows", option=None, parameter=None)
    warm_fill: str = setting("affine", "a patch without a previous flow starts from the affine field fitted to the "
                             "others, or (rings) from the nearest ones", choices=WARM_FILLS, option=None,
                             parameter=None)
    gap_reset_windows: float = setting(10.0, "the warm start is forgotten after a gap this long; positive",
                                       unit="windows", option=None, parameter=None)
    pyramid_patch_sizes: tuple[int, ...] = setting((45,), "coarser patch sizes (decreasing) solved first where a "
                                                   "patch has no warm start; sizes <= 0 are ignored ([0] = none)",
                                                   unit="px", option=None)
    max_step_px: float = setting(2.0, "longest optimiser step (over the window)", unit="px", option=None,
                                 parameter=None)
    straggler_share: float = setting(0.05, "the batched solve stops when no more than this share of the patches "
                                     "still iterate (they keep their best point so far)", minimum=0.0, maximum=1.0,
                                     option=None, parameter=None)
    #: the batched BFGS's stopping rules in px over the window
    optimizer_settings: OptimizerSettings = field(default_factory=lambda: FLOW_OPTIMIZER_SETTINGS)
    #: the losses' parameters; None = ``FLOW_LOSS_OPTIONS`` (the area's event scale λ0 = 2 events)
    loss_options: object = None

    def __post_init__(self):
        # a ROS integer array cannot be empty: [0] (any size <= 0) stands for no pyramid
        object.__setattr__(self, "pyramid_patch_sizes",
                           tuple(int(size) for size in self.pyramid_patch_sizes if int(size) > 0))

@dataclass
class FlowEstimate:
    """Flow of every patch of one window.

    t_ref_ns: reference time (ns); duration_s: the window's time span T (s); centers (P, 2):
    patch centres (x, y) px; flow (P, 2): (vx, vy) px/s, NaN where invalid; event_counts (P,);
    confidence (P,): the focus's curvature at the maximum (``curvature_confidence``; NaN where not
    evaluated, 0 for an invalid patch); reason (P,): REASONS code; iterations (P,); evaluations:
    engine calls for the window; grid: the patch grid, in binned pixels (binning: pixels binned
    per side; centers and flows are in raw pixels); borrowed (P,): valid patches with fewer than
    ``min_events_per_patch`` events, solved with their neighbours' flow as a prior; normal (P,):
    aperture patches given their normal flow; normal_direction (P, 2): the unit normal n of
    their edge (the structure tensor's major axis); normal_flow (P, 2) px/s: (n·v) n, NaN elsewhere.
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
    borrowed: np.ndarray = None
    binning: int = 1
    normal: np.ndarray = None
    normal_direction: np.ndarray = None
    normal_flow: np.ndarray = None

    def __post_init__(self):
        count = len(self.reason)
        if self.borrowed is None:
            self.borrowed = np.zeros(count, dtype=bool)
        if self.normal is None:
            self.normal = np.zeros(count, dtype=bool)
        if self.normal_direction is None:
            self.normal_direction = np.full((count, 2), np.nan)
        if self.normal_flow is None:
            self.normal_flow = np.full((count, 2), np.nan)

    @property
    def valid(self) -> np.ndarray:
        return self.reason == VALID

    def flow_image(self) -> np.ndarray:
        """(rows, columns, 2) float32 (vx, vy) px/s per patch, NaN where invalid (the node's 32FC2)."""
        return self.flow.reshape(self.grid.rows, self.grid.columns, 2).astype(np.float32)

    def confidence_image(self) -> np.ndarray:
        """(rows, columns) float32 confidence per patch, 0 where invalid (the node's 32FC1)."""
        confidence = np.where(self.valid, np.nan_to_num(self.confidence, nan=0.0), 0.0)
        return confidence.reshape(self.grid.rows, self.grid.columns).astype(np.float32)


def motion_confidence(estimate: FlowEstimate) -> np.ndarray:
    """(P,) the confidence of each patch (``curvature_confidence``) times its motion over the
    window (|v| T, px): the flow's relative precision. The confidence falls as the flow's error in
    px over the window grows; divided by the motion, that error is the relative error |dv| / |v|:
    a slow patch (near the fixed point of a rotation) moves too few px over a window sized for the
    fast ones to be measured to a few %. NaN where the flow is invalid."""
    return np.asarray(estimate.confidence, dtype=np.float64) * window_motion_px(estimate)


def window_motion_px(estimate: FlowEstimate) -> np.ndarray:
    """(P,) each patch's motion over its window, |v| T (px; NaN where the flow is invalid)."""
    return np.linalg.norm(estimate.flow, axis=1) * estimate.duration_s


def window_speed_px_s(flows: np.ndarray | None, quantile: float) -> float | None:
    """The speed (px/s) that sizes the next window (``OpticalFlowSettings.window_motion_px``): the
    ``quantile`` of the finite flows' (P, 2) px/s speeds (the median, 0.5: the typical patch's; a
    higher one follows the fast patches), None when there is none."""
    if flows is None:
        return None
    speeds = np.linalg.norm(flows, axis=1)
    speeds = speeds[np.isfinite(speeds)]
    return float(np.quantile(speeds, quantile)) if speeds.size else None


def _take(estimate: FlowEstimate, other: FlowEstimate, rows: np.ndarray) -> None:
    """Copy the per-patch results of ``rows`` from ``other`` into ``estimate`` (in place)."""
    for name in ("flow", "confidence", "reason", "iterations", "normal", "normal_direction", "normal_flow"):
        getattr(estimate, name)[rows] = getattr(other, name)[rows]
    estimate.evaluations += other.evaluations


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
        for name in ("prior_weight", "max_motion_margins", "min_confidence"):
            value = getattr(settings, name)
            if not (math.isfinite(value) and value >= 0):
                raise ValueError(f"{name} must be a number >= 0, got {value}")
        for name in ("window_motion_px", "min_motion_px", "extended_events_factor"):
            value = getattr(settings, name)
            if not (math.isfinite(value) and value >= 0):
                raise ValueError(f"{name} must be a number >= 0, got {value}")
        if not (math.isfinite(settings.max_window_extension) and settings.max_window_extension >= 1):
            raise ValueError(f"max_window_extension must be at least 1 (spans of the window), got "
                             f"{settings.max_window_extension}")
        for name in ("window_speed_quantile", "min_relative_speed"):
            if not 0 <= getattr(settings, name) <= 1:
                raise ValueError(f"{name} must be in [0, 1], got {getattr(settings, name)}")
        if settings.min_borrowing_events < 1:
            raise ValueError(f"min_borrowing_events must be at least 1, got {settings.min_borrowing_events}")
        if settings.pixel_binning < 0 or (settings.max_window_events or 0) < 0:
            raise ValueError("pixel_binning and max_window_events must be >= 0 (0: from the sensor / all events)")
        self.settings = settings
        self.loss = get_loss(settings.loss)
        self.sensor_size = (width, height)
        #: pixels binned per side (``default_pixel_binning`` unless set)
        self.binning = settings.pixel_binning or default_pixel_binning(width, height)
        width, height = width // self.binning, height // self.binning
        #: events per window at most (thinned beyond; 0: all)
        if settings.max_window_events is not None:
            self.max_window_events = settings.max_window_events
        else:
            self.max_window_events = default_window_events(width, height) if self.binning > 1 else 0
        self.grid = PatchGrid(width, height, settings.patch_size_px, settings.patch_stride_px, settings.margin_px,
                              settings.border_px)
        self.blur_sigma_px = (default_blur_sigma_px(self.loss) if settings.blur_sigma_px is None
                              else settings.blur_sigma_px)
        self.objective = PatchObjective(self.grid, self.loss, settings.use_polarity, self.blur_sigma_px,
                                        FLOW_LOSS_OPTIONS if settings.loss_options is None else settings.loss_options)
        self._neighbours = self.grid.neighbours()
        sizes = tuple(int(size) for size in settings.pyramid_patch_sizes)
        if sizes and (min(sizes) <= settings.patch_size_px or list(sizes) != sorted(sizes, reverse=True)):
            raise ValueError(f"pyramid_patch_sizes must decrease and exceed the patch size "
                             f"{settings.patch_size_px} px, got {sizes}")
        self._coarser = (OpticalFlowEstimator(width, height, replace(settings, patch_size_px=sizes[-1],
                                                                     patch_stride_px=None, pixel_binning=1,
                                                                     max_window_events=0,
                                                                     pyramid_patch_sizes=sizes[:-1]))
                         if sizes else None)
        if self._coarser is not None:
            self._coarser.is_coarse_level = True
        #: a coarser pyramid level (its flows only start the finer level: no validity checks)
        self.is_coarse_level = False
        self._recent = RecentEvents()
        self.reset()

    def reset(self) -> None:
        """Forget the warm start."""
        self.previous: np.ndarray | None = None  # (P, 2) px/s, NaN where unknown
        #: windows solved a second time with the full margin (a flow outgrew its narrowed margin)
        self.margin_retries = 0
        self._previous_end_ns: int | None = None
        self._previous_duration_ns = 0
        self._recent.reset()  # the last windows' events (binned): ``_extended``, ``_slow_again``
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
        """The flow of every patch for one window of time-ordered events (raw pixels): thinned to
        ``max_window_events``, binned (``binning``), estimated, reported in raw pixels."""
        if self.max_window_events and len(events) > self.max_window_events:
            events = thin_events(events, self.max_window_events)
        binning = self.binning
        if binning == 1:
            return self._estimate_binned(events)
        estimate = self._estimate_binned(Events(events.x // binning, events.y // binning, events.t, events.p))
        estimate.centers = estimate.centers * binning + (binning - 1) / 2.0
        estimate.flow = estimate.flow * binning
        estimate.normal_flow = estimate.normal_flow * binning
        estimate.binning = binning
        return estimate

    def _estimate_binned(self, events: Events) -> FlowEstimate:
        """``estimate`` on events already thinned and binned (flows in binned px/s)."""
        settings = self.settings
        grid = self.grid
        count = grid.count
        nan2 = np.full((count, 2), np.nan)
        if len(events) == 0:
            return FlowEstimate(0, 0.0, grid.centers, nan2, np.zeros(count, dtype=np.int64), np.full(count, np.nan),
                                np.full(count, FEW_EVENTS), np.zeros(count, dtype=np.int64), 0, grid)
        warm = self._warm_flows(events)
        events = self._extended(events, warm)
        events = self._trimmed(events, warm)
        t_ref_ns = reference_time_ns(events, settings.t_ref)
        span_ns = int(events.t[-1]) - int(events.t[0])
        span_s = span_ns / NANOSECONDS_PER_SECOND
        self._span_s = span_s
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
                margins = np.where(grown, grid.margin, margins)
                again = self._solve(events, t_ref_ns, span_ns, warm, reach, margins, only=grown)
                _take(estimate, again, grown)
        if settings.borrowing and not self.is_coarse_level:
            self._borrow(estimate, events, t_ref_ns, span_ns, warm, reach)
        if settings.slow_motion_px > 0 and not self.is_coarse_level:
            self._slow_again(estimate, events, t_ref_ns, span_ns)
        self._previous_end_ns = int(events.t[-1])
        self._previous_duration_ns = span_ns
        flow = estimate.flow
        self.previous = flow.copy() if np.isfinite(flow).any() else None
        if ((settings.min_motion_confidence > 0 or settings.min_motion_px > 0) and not self.is_coarse_level
                and estimate.valid.any()):
            # after the warm start is kept: an imprecise flow is still the best start for the next window
            imprecise = estimate.valid & (motion_confidence(estimate) < settings.min_motion_confidence)
            imprecise |= estimate.valid & (window_motion_px(estimate) < self._min_motion_px(estimate))
            estimate.reason[imprecise] = IMPRECISE
            estimate.flow[imprecise] = np.nan
            estimate.borrowed &= ~imprecise
        return estimate

    def _trimmed(self, events: Events, warm) -> Events:
        """The window, or its central part when the warm start predicts more motion than
        ``max_motion_margins`` gathering margins over the window (90th percentile of the patches'
        speeds): a window cut by a number of events holds more motion the faster the camera
        turns, and a constant flow fits a patch's events over a few px of motion only."""
        limit = self.settings.max_motion_margins * self.grid.margin
        if limit <= 0 or warm is None or len(events) < 2 or self.is_coarse_level:  # a coarse level: the finer's cut
            return events
        speeds = np.linalg.norm(warm, axis=1)
        speeds = speeds[np.isfinite(speeds)]
        span_ns = int(events.t[-1]) - int(events.t[0])
        if not speeds.size or span_ns <= 0:
            return events
        motion = float(np.percentile(speeds, 90)) * span_ns / NANOSECONDS_PER_SECOND
        if motion <= limit:
            return events
        keep_ns = span_ns * limit / motion
        middle = int(events.t[0]) + span_ns // 2
        first, last = np.searchsorted(events.t, [middle - keep_ns / 2, middle + keep_ns / 2])
        return events[int(first):int(last)]

    def _min_motion_px(self, estimate: FlowEstimate) -> float:
        """The least motion (px over the window) a valid patch must show: ``min_motion_px``, or less
        where the window's median patch moves less than min_motion_px / ``min_relative_speed``
        (then that share of the median): slower patches are IMPRECISE. Why both: an error floor of a
        fraction of a px is over 10 % of a slow patch's flow (near a rotation's fixed point) while
        the window, sized for the typical patch, holds a good motion for the others; a scene that is
        slow everywhere (the window at its longest) keeps its flows."""
        settings = self.settings
        if settings.min_relative_speed <= 0:
            return settings.min_motion_px
        median_px = float(np.median(window_motion_px(estimate)[estimate.valid]))
        return min(settings.min_motion_px, settings.min_relative_speed * median_px)

    def _extended(self, events: Events, warm) -> Events:
        """The window, or with ``window_motion_px`` the window reaching back over the previous
        windows' events (``RecentEvents``) far enough to span that motion at the last estimate's
        speed (``window_speed_px_s``), at most ``max_window_extension`` times its own span
        (``focus_ros.windows.duration_for_motion_s``, the angular velocity's window rule). Why: the
        error of a patch's flow has a floor of a fraction of a px over the window; a slow scene's
        window, cut by a number of events, moves too few px for a small relative error. A fast one
        keeps its window (``_trimmed`` may cut it). The node and ``focus-ros flow`` feed the same
        windows: the same extended ones; the output rate is the windows'."""
        settings = self.settings
        if self.is_coarse_level or (settings.window_motion_px <= 0 and settings.slow_motion_px <= 0):
            return events
        span_ns = int(events.t[-1]) - int(events.t[0])
        span_factor = max(settings.max_window_extension if settings.window_motion_px > 0 else 1.0,
                          settings.slow_span_windows if settings.slow_motion_px > 0 else 1.0)
        self._recent.add(events, int(span_factor * span_ns) + span_ns)
        speed = window_speed_px_s(self.previous, settings.window_speed_quantile) if warm is not None else None
        if settings.window_motion_px <= 0 or speed is None or span_ns <= 0:
            return events
        longest_s = settings.max_window_extension * span_ns / NANOSECONDS_PER_SECOND
        wanted_ns = int(NANOSECONDS_PER_SECOND * min(duration_for_motion_s(settings.window_motion_px, speed, longest_s),
                                                     longest_s))
        if wanted_ns <= span_ns:
            return events
        extended = self._recent.since(int(events.t[-1]) - wanted_ns)
        if settings.extended_events_factor > 0:  # the cost of a window as cut, or a bounded multiple
            extended = thin_events(extended, max(len(events), int(settings.extended_events_factor * len(events))))
        return extended

    def _slow_again(self, estimate: FlowEstimate, events: Events, t_ref_ns: int, span_ns: int) -> None:
        """Solve the valid patches moving less than ``slow_motion_px`` over the window again on a
        span ``slow_span_windows`` times the window's, with the same reference time: the previous
        windows' events prepended (in place). Why: a window sized for the fast patches moves a slow
        one (near a rotation's fixed point) too few px for its speed to be measured to a few %; over
        the longer span it moves more and holds more events. Kept where that solve is valid."""
        settings = self.settings
        if self._recent.count < 2:
            return  # no past: the first window, or after a restart
        start_ns = t_ref_ns - int((settings.slow_span_windows - 0.5) * span_ns)
        motion = np.linalg.norm(estimate.flow, axis=1) * span_ns / NANOSECONDS_PER_SECOND
        slow = estimate.valid & (motion < settings.slow_motion_px)
        if not slow.any() or span_ns <= 0:
            return
        longer = self._recent.since(start_ns)
        longer = longer[:int(np.searchsorted(longer.t, int(events.t[-1]), side="right"))]
        longer_span_ns = int(longer.t[-1]) - int(longer.t[0])
        reach = max(t_ref_ns - int(longer.t[0]), int(longer.t[-1]) - t_ref_ns) / max(longer_span_ns, 1)
        self._span_s = longer_span_ns / NANOSECONDS_PER_SECOND
        # as the borrowing pass: the neighbours' prediction as a prior (an aperture patch's other component)
        prior = borrowing_prior(estimate.flow, self.grid.rows, self.grid.columns)
        prior = np.where(np.isfinite(prior).all(axis=1)[:, None], prior, estimate.flow)
        again = self._solve(longer, t_ref_ns, longer_span_ns, estimate.flow, reach, None, only=slow,
                            prior_px_s=prior)
        self._span_s = span_ns / NANOSECONDS_PER_SECOND
        _take(estimate, again, slow & again.valid)
        self.objective.set_events(events, t_ref_ns, None)  # the window's own events again (pictures)

    def _borrow(self, estimate: FlowEstimate, events: Events, t_ref_ns: int, span_ns: int, warm,
                reach: float) -> None:
        """Solve the patches with at least ``min_borrowing_events`` but fewer than
        ``min_events_per_patch`` events, and the aperture patches, with the flow their neighbours
        predict as a prior (``borrowing_prior``) (in place). An aperture patch's own events fix
        the component along its edge's normal, the prior the other: no aperture check for them."""
        settings = self.settings
        counts = estimate.event_counts
        sparse = (((counts >= settings.min_borrowing_events) & (counts < settings.min_events_per_patch))
                  | (estimate.reason == APERTURE) | (settings.smoothing & estimate.valid))
        if len(events) < settings.min_window_events or not sparse.any():
            return
        prior = borrowing_prior(estimate.flow, self.grid.rows, self.grid.columns)
        if settings.affine_prior and np.isfinite(estimate.flow).all(axis=1).sum() >= MIN_AFFINE_FLOWS:
            unknown = ~np.isfinite(prior).all(axis=1)
            prior[unknown] = fill_affine(estimate.flow, self.grid.centers, self._neighbours)[unknown]
        rows = sparse & np.isfinite(prior).all(axis=1)
        if not rows.any():
            return
        again = self._solve(events, t_ref_ns, span_ns, warm, reach, None, only=rows, prior_px_s=prior,
                            reuse_events=True)
        # a valid patch whose second solve fails keeps its first flow, an aperture patch its normal flow
        rows &= again.valid | ((estimate.reason != APERTURE) & (estimate.reason != VALID))
        _take(estimate, again, rows)
        estimate.borrowed |= rows & again.valid & (counts < settings.min_events_per_patch)

    def _solve(self, events: Events, t_ref_ns: int, span_ns: int, warm, reach: float, margins,
               only: np.ndarray | None = None, prior_px_s: np.ndarray | None = None,
               reuse_events: bool = False) -> FlowEstimate:
        """One window's flows from the starts (module docstring), events gathered within
        ``margins`` (P,) px (None: the grid's margin; ``reuse_events``: as gathered by the last
        call), only the patches ``only`` (P,) bool if given (the others: FEW_EVENTS); with
        ``prior_px_s`` (P, 2): started there, with the prior's quadratic cost (``prior_weight``)
        and at least ``min_borrowing_events`` per patch. No change of the warm-start state."""
        settings = self.settings
        grid = self.grid
        count = grid.count
        span_s = span_ns / NANOSECONDS_PER_SECOND
        nan2 = np.full((count, 2), np.nan)
        if not reuse_events:
            self.objective.set_events(events, t_ref_ns, margins)
        counts = self.objective.event_counts
        min_events = settings.min_events_per_patch if prior_px_s is None else settings.min_borrowing_events
        reason = np.where(counts >= min_events, VALID, FEW_EVENTS)
        if len(events) < settings.min_window_events or span_ns <= 0:
            reason[:] = FEW_EVENTS
        if only is not None:
            reason[~only] = FEW_EVENTS
        active = reason == VALID
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

        if prior_px_s is None:
            # coarse-to-fine only where a patch to solve has no warm start (first window, after a
            # reset or a gap, a patch whose neighbourhood had no flow): patches without events need none
            coarse = (self._coarse_flows(events)
                      if warm is None or not np.isfinite(warm[active]).all() else None)
            # candidate starts (px over the window), best score per patch wins
            start = np.zeros((count, 2))
            start_score = scores(start, active)
            for candidate in (warm, coarse):
                if candidate is None:
                    continue
                u = np.where(np.isfinite(candidate), candidate * span_s, 0.0)
                candidate_score = scores(u, active)
                better = active & (candidate_score > start_score)
                start = np.where(better[:, None], u, start)
                start_score = np.where(better, candidate_score, start_score)
            prior_u = None
        else:
            prior_u = np.where(np.isfinite(prior_px_s), prior_px_s * span_s, 0.0)
            start = prior_u
            start_score = scores(start, active)
            # per patch, in units of the normalised cost per px^2: sparser patches lean more on the prior
            weight = settings.prior_weight * settings.min_events_per_patch / np.maximum(counts, 1)
        scale = np.where(np.abs(start_score) > 0, np.abs(start_score), 1.0)

        def cost(u, rows):
            nonlocal evaluations
            evaluations += 1
            evaluation = self.objective.evaluate(u / span_s, rows)
            value = -sign * evaluation.values / scale
            gradient = -sign * evaluation.gradients * (1.0 / span_s) / scale[:, None]
            if prior_u is not None:
                offset = u - prior_u
                value = value + weight * np.einsum("ij,ij->i", offset, offset)
                gradient = gradient + 2.0 * weight[:, None] * offset
            return value, gradient

        result = minimize_batched(cost, start, active, settings.optimizer_settings, max_step=settings.max_step_px,
                                  straggler_share=settings.straggler_share)
        u = result.x
        iterations[:] = result.iterations
        if prior_u is None:
            score = -result.value * scale  # the cost is -score / scale at the optimiser's point
            # keep the start where the optimiser ended lower (noise)
            worse = active & (score < start_score)
            u = np.where(worse[:, None], start, u)
            score = np.where(worse, start_score, score)
        else:
            score = scores(u, active)
        reason[active & ~np.all(np.isfinite(u), axis=1)] = OUT_OF_RANGE
        beyond_margin = np.linalg.norm(np.nan_to_num(u), axis=1) * reach > self.objective.patch_margins
        reason[active & beyond_margin] = OUT_OF_RANGE
        normal = np.zeros(count, dtype=bool)
        normal_direction = np.full((count, 2), np.nan)
        normal_flow = np.full((count, 2), np.nan)
        if not self.is_coarse_level:
            reason, confidence, normal_direction = self._check_curvature(u, score, reason, scores,
                                                                         aperture_check=prior_u is None)
            normal = (reason == APERTURE) & np.isfinite(normal_direction).all(axis=1)
            along = np.einsum("ij,ij->i", np.nan_to_num(normal_direction), np.nan_to_num(u)) / span_s
            normal_flow = np.where(normal[:, None], along[:, None] * normal_direction, np.nan)
        flow = np.where((reason == VALID)[:, None], u / span_s, np.nan)
        self._solution = u  # px over the window, valid or not
        return FlowEstimate(t_ref_ns, span_s, grid.centers, flow, counts, confidence, reason, iterations,
                            evaluations, grid, normal=normal, normal_direction=normal_direction,
                            normal_flow=normal_flow)

    def _check_curvature(self, u, score, reason, scores, aperture_check: bool = True):
        """(reason, confidence (P,), edge normal (P, 2)): FLAT patches (the score drops by less
        than ``min_relative_drop`` of its value at u +- probe along x and along y, or their
        confidence is under ``min_confidence``), APERTURE patches (``aperture_ratio``, whose edge
        normal is returned) and the confidence (``curvature_confidence``) of the patches checked."""
        settings = self.settings
        probe = settings.probe_px
        rows = reason == VALID
        confidence = np.full(len(score), np.nan)
        normal = np.full((len(score), 2), np.nan)
        if not rows.any():
            return reason, confidence, normal
        along_x = scores(u + (probe, 0.0), rows), scores(u - (probe, 0.0), rows)
        along_y = scores(u + (0.0, probe), rows), scores(u - (0.0, probe), rows)
        diagonal = scores(u + (probe, probe), rows)
        confidence[rows] = curvature_confidence(score, along_x, along_y, diagonal,
                                                self.objective.event_counts)[rows]
        magnitude = np.where(np.abs(score) > 0, np.abs(score), 1.0)
        steepest = np.maximum(2.0 * score - along_x[0] - along_x[1], 2.0 * score - along_y[0] - along_y[1]) / 2.0
        reason = reason.copy()
        flat = rows & ~((steepest / magnitude >= settings.min_relative_drop)
                        & (confidence >= settings.min_confidence))
        reason[flat] = FLAT
        rows &= ~flat
        if not aperture_check:
            return reason, confidence, normal
        ratio, axes = aperture_ratio(self.objective.images(u / self._span_s, rows), self.grid.border)
        aperture = rows & ~(ratio >= settings.min_aperture_ratio)
        reason[aperture] = APERTURE
        normal[aperture] = axes[aperture]
        return reason, confidence, normal

    def with_settings(self, **changes) -> "OpticalFlowEstimator":
        """A new estimator with some settings changed (same sensor size)."""
        return OpticalFlowEstimator(*self.sensor_size, replace(self.settings, **changes))
