"""Semi-dense depth of a reference view from events and known camera poses, by focus.

Pipeline per keyframe ("Focus Is All You Need", Sec. 4.3 and supplementary "Semi-dense
3D Reconstruction", with EMVS's DSI, Rebecq et al. IJCV 2018):

1. reference view: the camera pose at the keyframe's reference time (the middle of its
   events' time span);
2. DSI (:mod:`focus_ros.depth.dsi`): the keyframe's events back-projected into
   ``planes`` depth planes of the reference view, uniform in inverse depth over
   [z_min_m, z_max_m];
3. focus curves (:mod:`focus_ros.depth.focus`): for every pixel the chosen registry loss
   on the Gaussian-weighted patch of every slice (``method="focus"``), or EMVS's baseline,
   the voxel's own votes (``method="max_vote"``); depth at the peak, refined by a parabola;
   the score at the peak is the confidence;
4. semi-dense selection (:mod:`focus_ros.depth.semidense`): EMVS's adaptive threshold on the
   relative focus contrast, a minimum contrast, no rival peak along the ray, not at the DSI's
   border, median filter on the kept depths, radius outlier removal, back-projection to world
   points (the rules and their defaults: :class:`DepthSettings`).

With ``auto_depth_range`` the planes of a keyframe start at the depths the previous keyframe
saw; a keyframe beyond ``dsi_max_events`` votes with every k-th event (a compute budget).

A keyframe whose camera barely moved (pure rotation: no parallax) gets no depth and a
``warning`` saying so, instead of noise.

Where keyframes end, and what happens between them (the fused map, the scene depth fed back),
is the depth pipeline's (:mod:`focus_ros.pipelines.depth`).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np

from focus_ros.camera import Calibration
from focus_ros.depth.dsi import DEFAULT_EVENTS_PER_POSE, DEFAULT_MAX_DSI_BYTES, DisparitySpaceImage, plane_depths_m
from focus_ros.depth.focus import (MAX_VOTE, PATCH_LOSSES, RIVAL_SEPARATION_PLANES, PatchFocus, check_patch_loss,
                                   focus_peaks, gaussian_patch_weights, max_vote_scores, peak_sigma_planes)
from focus_ros.depth.semidense import (adaptive_threshold_mask, back_project, contrast_threshold_mask,
                                       median_filter_depth, neighbour_support_mask, relative_contrast)
from focus_ros.events import Events
from focus_ros.poses import Trajectory
from focus_ros.settings import setting

METHODS = ("focus", MAX_VOTE)
#: the focus loss of the depth estimator's defaults
DEFAULT_LOSS = "variance"
#: bound on the focus scores held at once (bytes): the focus stage works on bands of rows
FOCUS_BAND_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True)
class DepthSettings:
    """How to estimate depth from one keyframe (:mod:`focus_ros.settings`: one line of help, unit
    and range per field). Defaults follow the paper and EMVS where they give values; the
    selection rules' defaults (min_contrast, max_rival_ratio, border_planes, support_*) and the
    loss come from accuracy against density on simulated slider and 6-DoF sequences
    (EVALUATION.md, "Depth: selection rules" and "Depth under 6-DoF motion";
    benchmarks/eval_depth_selection.py): "variance" meets issue 25's targets with the fused map
    and is among the cheapest per keyframe. A second focus peak along a ray marks a pixel that
    only sees other edges' rays pass by; a peak at the DSI's border is a depth outside the range.
    The default range, 0.3-10 m: a DAVIS240C's 200 px focal length sees 0.3 px of parallax per
    1 cm of baseline at 10 m. ``loss`` "max_vote" is EMVS's baseline (the most votes along the
    ray): it sets ``method`` to "max_vote" (and ``loss`` to the default, unused by it).
    """

    loss: str = setting(DEFAULT_LOSS, "focus loss on the DSI patches, or max_vote (EMVS's baseline: the most votes "
                        f"along the ray); one of: {', '.join(PATCH_LOSSES + (MAX_VOTE,))}")
    use_polarity: bool = setting(False, "votes carry the event polarity (+-1) instead of 1", option="--polarity")
    #: "focus" (the paper: extremal focus of the patch loss) or "max_vote" (EMVS: the voxel with the
    #: most votes along the ray)
    method: str = "focus"
    planes: int = setting(100, "depth planes of the DSI, uniform in inverse depth (EMVS: 100)", minimum=2,
                          maximum=1000)
    z_min_m: float = setting(0.3, "nearest depth plane; with a depth range from the scene (auto_depth_range), the "
                             "nearest the planes may go",
                             unit="m", minimum=0.01, maximum=1000.0, option="--z-min")
    z_max_m: float = setting(10.0, "farthest depth plane; with a depth range from the scene (auto_depth_range), the "
                             "farthest the planes may go",
                             unit="m", minimum=0.01, maximum=1000.0, option="--z-max")
    patch_size_px: int = setting(3, "side of the focus patch, odd (the paper: 3)", unit="px", minimum=1, maximum=31,
                                 option="--patch-size")
    patch_sigma_px: float = setting(1.0, "Gaussian sigma of the patch weights (favouring the centre as the paper's "
                                    "patch does)", unit="px", minimum=0.1, maximum=20.0, option="--patch-sigma")
    #: a parabola through the focus peak and its neighbours (sub-plane depth)
    refine_peak: bool = True
    threshold_block_px: int = setting(5, "adaptive threshold window on the focus contrast, odd (EMVS: 5)", unit="px",
                                      minimum=3, maximum=101, option="--threshold-block")
    threshold_offset: float = setting(0.0, "a pixel is kept when its relative focus contrast exceeds the mean of its "
                                      "neighbourhood by this", minimum=0.0, maximum=1.0)
    min_confidence_rank: float = setting(0.0, "lowest confidence rank kept among the observed pixels (0-1; 0.8: at "
                                         "most the 20 % most confident, the rule before the adaptive threshold); "
                                         "0 = off", minimum=0.0, maximum=1.0)
    min_contrast: float = setting(1.0, "lowest focus contrast kept, relative to the keyframe's median (1 = a typical "
                                  "observed pixel); 0 = off", minimum=0.0, maximum=1000.0)
    max_rival_ratio: float = setting(0.5, "highest contrast of a second focus peak along the ray (more than 3 planes "
                                     "away), as a share of the best; 1 = off", minimum=0.0, maximum=1.0)
    border_planes: int = setting(2, "depths peaking within this many planes of the DSI's ends are dropped",
                                 unit="planes", minimum=0, maximum=100)
    median_filter_px: int = setting(5, "median filter on the kept depths, odd (EMVS: 5-15); 1 = none", unit="px",
                                    minimum=1, maximum=51, option="--median")
    support_radius_px: int = setting(2, "radius outlier removal window radius", unit="px", minimum=1, maximum=20,
                                     option=None)
    support_tolerance: float = setting(0.02, "radius outlier removal depth tolerance (fraction of the depth)",
                                       minimum=0.0, maximum=1.0, option=None)
    support_neighbours: int = setting(5, "radius outlier removal: kept pixels need this many kept neighbours (within "
                                      "support_radius_px) at a depth within support_tolerance; 0 = off", minimum=0,
                                      maximum=100)
    map_support_neighbours: int = setting(2, "the same rule for the points offered to the fused map (looser: the map "
                                          "keeps only what another keyframe confirms); 0 = off", minimum=0,
                                          maximum=100)
    auto_depth_range: bool = setting(True, "the DSI's planes over the depths the previous keyframe saw, with a margin "
                                     "(true), or over the whole z_min_m-z_max_m for every keyframe (false: "
                                     "--fixed-depth-range)", option="--fixed-depth-range", negated_option=True)
    #: events sharing one interpolated pose in the DSI (EMVS: 1024)
    events_per_pose: int = DEFAULT_EVENTS_PER_POSE
    min_parallax_px: float = setting(1.0, "keyframes with less parallax (f x baseline x (1/z_min - 1/z_max)) get no "
                                     "depth (a camera at rest or rotating only)", unit="px", minimum=0.0,
                                     maximum=1000.0, option=None)
    min_events: int = setting(1000, "keyframes with fewer events get no depth", unit="events", minimum=1,
                              maximum=100_000_000, option=None)
    #: memory bound of the DSI (bytes): on a sensor where ``planes`` planes would need more, the
    #: estimator uses as many as fit (1280x720: 72 planes; 640x480 and smaller: all 100), the
    #: parabola through the peak keeping the depth sub-plane; with the focus stage's bands
    #: (FOCUS_BAND_BYTES) a keyframe stays under 512 MiB (test/test_dsi.py measures it)
    max_dsi_bytes: int = DEFAULT_MAX_DSI_BYTES
    dsi_max_events: int = setting(400_000, "compute budget: a keyframe with more events votes with every k-th (uniform "
                                  "in time) so that its time stays bounded; 0 = every event", unit="events",
                                  minimum=0, maximum=100_000_000)
    #: the losses' LossOptions (None: defaults)
    loss_options: object = None

    def __post_init__(self) -> None:
        if self.loss == MAX_VOTE:  # the baseline chosen where a loss is: its method, the default (unused) loss
            object.__setattr__(self, "method", MAX_VOTE)
            object.__setattr__(self, "loss", DEFAULT_LOSS)
        if self.method not in METHODS:
            raise ValueError(f"unknown depth method {self.method!r}; choose one of {', '.join(METHODS)}")
        if self.method == "focus":
            check_patch_loss(self.loss, self.use_polarity)
        plane_depths_m(self.z_min_m, self.z_max_m, self.planes)
        gaussian_patch_weights(self.patch_size_px, self.patch_sigma_px)
        for name in ("threshold_block_px", "median_filter_px"):
            value = getattr(self, name)
            if not (isinstance(value, int) and value >= 1 and value % 2 == 1):
                raise ValueError(f"{name} must be an odd number of px, got {value!r}")
        if self.threshold_block_px < 3:
            raise ValueError(f"threshold_block_px must be >= 3, got {self.threshold_block_px}")
        for name in ("threshold_offset", "min_parallax_px"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0):
                raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
        if not 0.0 <= self.min_confidence_rank <= 1.0:
            raise ValueError(f"min_confidence_rank must be within 0-1, got {self.min_confidence_rank!r}")
        if not 0.0 <= self.max_rival_ratio <= 1.0:
            raise ValueError(f"max_rival_ratio must be within 0-1, got {self.max_rival_ratio!r}")
        for name in ("min_contrast", "support_tolerance"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0):
                raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
        for name in ("border_planes", "support_radius_px", "support_neighbours", "map_support_neighbours"):
            value = getattr(self, name)
            if not (isinstance(value, (int, np.integer)) and value >= 0):
                raise ValueError(f"{name} must be an integer >= 0, got {value!r}")
        if 2 * self.border_planes >= self.planes:
            raise ValueError(f"border_planes {self.border_planes} leaves no plane of {self.planes}")
        if not (isinstance(self.dsi_max_events, (int, np.integer)) and self.dsi_max_events >= 0):
            raise ValueError(f"dsi_max_events must be an integer >= 0, got {self.dsi_max_events!r}")
        if self.events_per_pose < 1 or self.min_events < 1:
            raise ValueError("events_per_pose and min_events must be >= 1")


@dataclass
class DepthKeyframe:
    """The depth of one reference view.

    t_ref_ns: reference time (ns); world_from_camera: 4×4 pose of the reference view (m);
    depth_m: (H, W) float32, metres along the optical axis on the undistorted (pinhole K)
    grid of the reference view, NaN = unknown (REP-118); confidence: (H, W) float32, the
    contrast of the focus curve at its peak (score at the peak minus the curve's median,
    loss units; NaN where no event voted; see focus_ros.depth.focus.focus_peaks); mask: (H, W)
    bool, the pixels of the semi-dense map; points_world: (M, 3) float32 m; point_confidence:
    (M,) float32; point_sigma_m: (M,) float32, each point's depth standard deviation (m along the
    optical axis: :meth:`DepthEstimator.depth_sigma_m`, calibrated so that about 68 % of the true
    depths lie within it); pixels: (M, 2) int32 (x, y) of the points; map_points_world: (K, 3)
    float32 m, the points offered to the fused map (the looser ``map_support_neighbours``: K >= M
    usually), map_point_sigma_m: (K,) float32 m their depth standard deviations;
    event_count: events in the keyframe; vote_count: bilinear votes cast inside the image;
    parallax_px: f · largest camera displacement from the reference · (1/z_min − 1/z_max);
    pose_batch_error_px: bound on the vote displacement from sharing one pose per batch;
    timing_s: seconds per stage ("dsi", "focus", "peaks", "select", "total");
    warning: "" or why the keyframe has no depth (too few events, no parallax);
    z_range_m: (nearest, farthest) plane of the DSI it was computed with (m).
    """

    t_ref_ns: int
    world_from_camera: np.ndarray
    depth_m: np.ndarray
    confidence: np.ndarray
    mask: np.ndarray
    points_world: np.ndarray
    point_confidence: np.ndarray
    pixels: np.ndarray
    event_count: int
    vote_count: int = 0
    parallax_px: float = 0.0
    pose_batch_error_px: float = 0.0
    timing_s: dict = field(default_factory=dict)
    warning: str = ""
    z_range_m: tuple = (float("nan"), float("nan"))
    map_points_world: np.ndarray = field(default_factory=lambda: np.empty((0, 3), np.float32))
    point_sigma_m: np.ndarray = field(default_factory=lambda: np.empty(0, np.float32))
    map_point_sigma_m: np.ndarray = field(default_factory=lambda: np.empty(0, np.float32))

    @property
    def point_count(self) -> int:
        return len(self.points_world)


@dataclass
class FocusFeatures:
    """Every pixel's focus curve reduced to its peak (H, W arrays): depth_m (float32 m, the
    peak, refined), confidence (float32, the peak's contrast in loss units), plane (float32,
    fractional plane index of the peak), rival (float32 0-1, see
    :func:`focus_ros.depth.focus.focus_peaks`), observed (bool, some vote on the ray), width
    (float32 planes, the peak's width, ``focus_peaks``' ``with_width``; None if not computed)."""

    depth_m: np.ndarray
    confidence: np.ndarray
    plane: np.ndarray
    rival: np.ndarray
    observed: np.ndarray
    width: np.ndarray | None = None

    @classmethod
    def empty(cls, height: int, width: int) -> "FocusFeatures":
        arrays = [np.empty((height, width), np.float32) for _ in range(4)]
        return cls(*arrays, np.zeros((height, width), bool), np.empty((height, width), np.float32))


#: auto_depth_range: the quantile of the published depths that sets the next keyframe's nearest
#: plane, and the factor it is moved nearer by (a scene changes between keyframes)
DEPTH_RANGE_QUANTILES = (0.02,)
DEPTH_RANGE_MARGIN = 1.4
#: fewest published points from which a keyframe's depths set the range
DEPTH_RANGE_MIN_POINTS = 200


def depth_range_from_keyframe(keyframe: "DepthKeyframe", settings: DepthSettings) -> tuple[float, float] | None:
    """(z_min, z_max) m for the next keyframe's planes from a keyframe's published depths: the
    nearest plane at their 2 % quantile over DEPTH_RANGE_MARGIN (within the search range), the
    farthest at the search range's z_max_m. Only the near end adapts: planes are uniform in
    inverse depth, so it is the near end that sets their spacing (0.3 m -> 0.6 m halves it; 4 m
    -> 10 m at the far end changes it by a few %), and a far end fitted to a keyframe that saw
    only near things would hide the far ones from every later keyframe. None when the keyframe
    has too few points."""
    if keyframe.point_count < DEPTH_RANGE_MIN_POINTS:
        return None
    depths = keyframe.depth_m[keyframe.pixels[:, 1], keyframe.pixels[:, 0]]
    low = max(settings.z_min_m, float(np.quantile(depths, DEPTH_RANGE_QUANTILES[0])) / DEPTH_RANGE_MARGIN)
    low = min(low, settings.z_max_m / 2.0)
    return low, settings.z_max_m


#: two peaks along a ray are rivals when their disparities differ by more than this (px)
RIVAL_SEPARATION_PX = 2.0


def rival_separation_planes(planes: int, parallax_px: float) -> int:
    """Planes either side of a focus peak that belong to it: RIVAL_SEPARATION_PX of parallax
    (the planes span parallax_px px of disparity), at least RIVAL_SEPARATION_PLANES."""
    if not parallax_px > 0:
        return planes
    return max(RIVAL_SEPARATION_PLANES, int(math.ceil(RIVAL_SEPARATION_PX * (planes - 1) / parallax_px)))


#: fewest planes the estimator reduces to on a large sensor (below, it asks for more memory instead)
MIN_PLANES = 20


def planes_within(calibration: Calibration, planes: int, max_dsi_bytes: int) -> int:
    """``planes``, or as many as fit into max_dsi_bytes at the sensor's size (float32 voxels);
    ValueError naming the fix when fewer than MIN_PLANES would."""
    per_plane = calibration.width * calibration.height * 4
    fit = int(max_dsi_bytes // per_plane)
    if fit >= planes:
        return int(planes)
    if fit < MIN_PLANES:
        raise ValueError(f"a DSI of {calibration.width}x{calibration.height} px needs {per_plane / 2**20:.1f} MiB per "
                         f"plane: {max_dsi_bytes / 2**20:.0f} MiB hold {fit} planes, fewer than {MIN_PLANES} "
                         "(raise max_dsi_bytes)")
    return fit


class DepthEstimator:
    """Depth of reference views from events and a :class:`~focus_ros.poses.Trajectory`.

    One DSI (:attr:`planes` × sensor size float32: ``settings.planes``, or fewer where they would
    not fit in ``settings.max_dsi_bytes``) is allocated once and reused.
    :meth:`estimate` does the whole keyframe; :meth:`build_dsi` and :meth:`depth_from_dsi`
    expose the two halves (to score one DSI with several losses, or plot focus curves).
    """

    def __init__(self, calibration: Calibration, settings: DepthSettings | None = None):
        self.calibration = calibration
        self.settings = DepthSettings() if settings is None else settings
        settings = self.settings
        self.planes = planes_within(calibration, settings.planes, settings.max_dsi_bytes)
        self.depths_m = plane_depths_m(settings.z_min_m, settings.z_max_m, self.planes)
        self.dsi = DisparitySpaceImage(calibration, self.depths_m, settings.events_per_pose, settings.max_dsi_bytes)
        self.patch_weights = gaussian_patch_weights(settings.patch_size_px, settings.patch_sigma_px)
        self._focus_cache: dict = {}
        self._fitted_range: tuple[float, float] | None = None  # auto_depth_range: planes for the next keyframe

    def reset(self) -> None:
        """Forget the depth range seen (auto_depth_range): the next keyframe searches the whole
        [z_min_m, z_max_m] again (a new stream, another scene)."""
        self._fitted_range = None

    def patch_focus(self, loss: str) -> PatchFocus:
        """The (cached) patch scorer of a registry loss with this estimator's patch weights."""
        if loss not in self._focus_cache:
            self._focus_cache[loss] = PatchFocus(loss, self.patch_weights, self.settings.loss_options)
        return self._focus_cache[loss]

    def build_dsi(self, events: Events, trajectory: Trajectory, t_ref_ns: int | None = None,
                  use_polarity: bool | None = None) -> DisparitySpaceImage:
        """Back-project ``events`` into the DSI of the reference view at ``t_ref_ns``
        (default: the middle of the events' time span). Returns the estimator's DSI (valid
        until the next call). PoseCoverageError naming both time ranges when the poses do
        not cover the events or the reference time."""
        if len(events) == 0:
            raise ValueError("no events for the keyframe")
        if t_ref_ns is None:
            t_ref_ns = int(events.t[0]) + (int(events.t[-1]) - int(events.t[0])) // 2
        trajectory.check_covers(min(int(events.t[0]), t_ref_ns), max(int(events.t[-1]), t_ref_ns), "events")
        polarity = self.settings.use_polarity if use_polarity is None else use_polarity
        budget = self.settings.dsi_max_events
        if budget and len(events) > budget:  # the compute budget: every k-th event, in time order
            events = events[::math.ceil(len(events) / budget)]
        self.dsi.reset(int(t_ref_ns), trajectory.world_from_camera(int(t_ref_ns)))
        self.dsi.add_events(events, trajectory, use_polarity=polarity)
        return self.dsi

    def focus_scores(self, dsi: DisparitySpaceImage, method: str | None = None, loss: str | None = None) -> np.ndarray:
        """Scores (H, W, planes) float32, higher = sharper: ``sign · loss`` on patches, or votes."""
        return self._scores(dsi.votes, bool(dsi.polarity), method, loss)

    def _scores(self, votes: np.ndarray, polarity: bool, method: str | None, loss: str | None) -> np.ndarray:
        method = self.settings.method if method is None else method
        if method == MAX_VOTE:
            return max_vote_scores(votes)
        loss = self.settings.loss if loss is None else loss
        check_patch_loss(loss, polarity)
        return self.patch_focus(loss).scores(votes)

    def focus_features(self, dsi: DisparitySpaceImage, method: str | None = None,
                       loss: str | None = None, timing: dict | None = None) -> FocusFeatures:
        """Every pixel's focus curve reduced to its peak (:class:`FocusFeatures`), computed in
        bands of rows so that the scores in memory stay within :data:`FOCUS_BAND_BYTES` plus
        a patch's halo, whatever the sensor size. ``timing``: seconds of the "focus" (scores) and
        "peaks" stages are added to it."""
        height, width, planes = dsi.votes.shape
        radius = 0 if (method or self.settings.method) == MAX_VOTE else self.settings.patch_size_px // 2
        rows = max(8, FOCUS_BAND_BYTES // (width * planes * 4))
        features = FocusFeatures.empty(height, width)
        separation = rival_separation_planes(planes, dsi.parallax_px())
        for top in range(0, height, rows):
            bottom = min(height, top + rows)
            first, last = max(0, top - radius), min(height, bottom + radius)
            started = time.perf_counter()
            scores = self._scores(dsi.votes[first:last], bool(dsi.polarity), method, loss)
            scored = time.perf_counter()
            depth, confidence, plane, rival, peak_width = focus_peaks(
                scores[top - first:bottom - first], dsi.inverse_depths, self.settings.refine_peak, True, separation,
                with_width=True)
            if timing is not None:
                timing["focus"] = timing.get("focus", 0.0) + scored - started
                timing["peaks"] = timing.get("peaks", 0.0) + time.perf_counter() - scored
            band = slice(top, bottom)
            features.depth_m[band], features.confidence[band] = depth, confidence
            features.plane[band], features.rival[band] = plane, rival
            features.width[band] = peak_width
            features.observed[band] = np.any(dsi.slices[:, band] != 0.0, axis=0)
        return features

    def select(self, features: FocusFeatures, settings: DepthSettings | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(mask of the published pixels, their filtered depth (H, W) float32 m, NaN elsewhere)
        by the selection rules of ``settings`` (default the estimator's; see DepthSettings)."""
        settings = self.settings if settings is None else settings
        mask, depth = self._candidates(features, settings)
        return self._supported(mask, depth, settings.support_neighbours, settings)

    def _candidates(self, features: FocusFeatures, settings: DepthSettings) -> tuple[np.ndarray, np.ndarray]:
        """(mask, median-filtered depth (H, W) float32 m) of the pixels every rule but the
        neighbour support keeps."""
        planes = self.dsi.planes
        # a flat focus curve (no contrast, e.g. a constant patch) has no depth
        peaked = features.observed & (features.confidence > 0.0)
        contrast = relative_contrast(features.confidence, peaked)
        if settings.min_confidence_rank > 0.0:  # a fixed share (the rule before issue 25): thresholds on ranks
            mask = adaptive_threshold_mask(features.confidence, peaked, settings.threshold_block_px,
                                           settings.threshold_offset, settings.min_confidence_rank)
        else:  # EMVS's adaptive threshold, on the relative contrast
            mask = contrast_threshold_mask(contrast, peaked, settings.threshold_block_px, settings.threshold_offset)
        if settings.min_contrast > 0.0:
            mask &= contrast >= settings.min_contrast
        if settings.max_rival_ratio < 1.0:
            mask &= features.rival <= settings.max_rival_ratio
        if settings.border_planes > 0:
            mask &= (features.plane >= settings.border_planes) & (features.plane <= planes - 1 - settings.border_planes)
        return mask, median_filter_depth(features.depth_m, mask, settings.median_filter_px)

    @staticmethod
    def _supported(mask: np.ndarray, depth: np.ndarray, neighbours: int,
                   settings: DepthSettings) -> tuple[np.ndarray, np.ndarray]:
        """The candidates (mask, depth) with at least ``neighbours`` supporting neighbours (0 = all)."""
        if neighbours > 0:
            mask = neighbour_support_mask(depth, mask, settings.support_radius_px, settings.support_tolerance,
                                          neighbours)
            depth = np.where(mask, depth, np.float32(np.nan)).astype(np.float32)
        return mask, depth

    @staticmethod
    def depth_sigma_m(features: FocusFeatures, depth_m: np.ndarray, dsi: DisparitySpaceImage) -> np.ndarray:
        """Each pixel's depth standard deviation (H, W) float32 m, for the depths ``depth_m`` (H, W) m
        (the published, median-filtered ones; NaN where NaN): the focus peak's position uncertainty
        in planes (:func:`focus_ros.depth.focus.peak_sigma_planes`: its width over the square root of
        its relative contrast, the DSI's pose batches, a floor), times the DSI's inverse-depth step
        (1/m per plane, the spacing the keyframe's parallax is resolved with), in depth:
        sigma_Z = Z² · sigma_rho. NaN where the peak has no contrast."""
        planes = len(dsi.inverse_depths)
        step_per_m = abs(float(dsi.inverse_depths[-1] - dsi.inverse_depths[0])) / (planes - 1)  # 1/m per plane
        px_per_plane = dsi.parallax_px() / (planes - 1)
        batch_planes = dsi.pose_batch_error_px / px_per_plane if px_per_plane > 0 else 0.0
        peaked = features.observed & (features.confidence > 0.0)
        sigma_planes = peak_sigma_planes(features.width, relative_contrast(features.confidence, peaked), batch_planes)
        depth = np.asarray(depth_m, np.float64)
        return (depth * depth * step_per_m * sigma_planes).astype(np.float32)

    def depth_from_dsi(self, dsi: DisparitySpaceImage, method: str | None = None,
                       loss: str | None = None) -> DepthKeyframe:
        """Depth, confidence, semi-dense mask and world points from a built DSI."""
        settings = self.settings
        timing = {}
        empty = self._empty_keyframe(dsi)
        if dsi.event_count < settings.min_events:
            empty.warning = f"too few events for depth: {dsi.event_count} < {settings.min_events}"
            return empty
        parallax = dsi.parallax_px()
        if parallax < settings.min_parallax_px:
            empty.warning = (f"no parallax: the camera moved {dsi.max_translation_m * 1000:.1f} mm "
                             f"(parallax {parallax:.2f} px < {settings.min_parallax_px} px), "
                             "depth is unobservable (pure rotation?)")
            return empty
        features = self.focus_features(dsi, method, loss, timing)
        mark = time.perf_counter()
        candidates, candidate_depth = self._candidates(features, settings)
        mask, filtered = self._supported(candidates, candidate_depth, settings.support_neighbours, settings)
        points, pixels = back_project(filtered, self.calibration, dsi.world_from_reference)
        map_depth = self._supported(candidates, candidate_depth, settings.map_support_neighbours, settings)[1]
        map_points, map_pixels = back_project(map_depth, self.calibration, dsi.world_from_reference)
        sigma = self.depth_sigma_m(features, candidate_depth, dsi)  # both clouds' pixels are candidates
        confidence = np.where(features.observed, features.confidence, np.float32(np.nan)).astype(np.float32)
        timing["select"] = time.perf_counter() - mark
        return DepthKeyframe(
            t_ref_ns=int(dsi.t_ref_ns), world_from_camera=dsi.world_from_reference.copy(), depth_m=filtered,
            confidence=confidence, mask=mask, points_world=points,
            point_confidence=confidence[pixels[:, 1], pixels[:, 0]].astype(np.float32), pixels=pixels,
            event_count=dsi.event_count, vote_count=dsi.vote_count, parallax_px=parallax,
            pose_batch_error_px=dsi.pose_batch_error_px, timing_s=timing,
            z_range_m=(float(dsi.depths_m.min()), float(dsi.depths_m.max())), map_points_world=map_points,
            point_sigma_m=sigma[pixels[:, 1], pixels[:, 0]],
            map_point_sigma_m=sigma[map_pixels[:, 1], map_pixels[:, 0]])

    def estimate(self, events: Events, trajectory: Trajectory, t_ref_ns: int | None = None) -> DepthKeyframe:
        """The depth of the reference view at ``t_ref_ns`` (default: the middle of the
        events' span) from one keyframe's events and the trajectory. With
        ``auto_depth_range`` the planes span the depths the previous keyframe saw (with a
        margin); the first keyframe, or one after a keyframe without depth, is first
        estimated over the whole [z_min_m, z_max_m] to find its range, then again."""
        started = time.perf_counter()
        bootstrap = self.settings.auto_depth_range and self._fitted_range is None
        if self.settings.auto_depth_range:
            self._use_range(*(self._fitted_range or (self.settings.z_min_m, self.settings.z_max_m)))
        dsi = self.build_dsi(events, trajectory, t_ref_ns)
        dsi_seconds = time.perf_counter() - started
        keyframe = self.depth_from_dsi(dsi)
        if self.settings.auto_depth_range:
            fitted = depth_range_from_keyframe(keyframe, self.settings)
            if bootstrap and fitted is not None:
                self._use_range(*fitted)
                mark = time.perf_counter()
                dsi = self.build_dsi(events, trajectory, t_ref_ns)
                dsi_seconds += time.perf_counter() - mark
                keyframe = self.depth_from_dsi(dsi)
                fitted = depth_range_from_keyframe(keyframe, self.settings) or fitted
            self._fitted_range = fitted  # the next keyframe's planes (the DSI keeps this one's votes)
        keyframe.timing_s["dsi"] = dsi_seconds
        keyframe.timing_s["total"] = time.perf_counter() - started
        return keyframe

    def _use_range(self, z_min_m: float, z_max_m: float) -> None:
        """Planes uniform in inverse depth over [z_min_m, z_max_m] (same count, same memory)."""
        self.depths_m = plane_depths_m(float(z_min_m), float(z_max_m), self.planes)
        self.dsi.set_depths(self.depths_m)

    def _empty_keyframe(self, dsi: DisparitySpaceImage) -> DepthKeyframe:
        shape = (self.calibration.height, self.calibration.width)
        return DepthKeyframe(
            t_ref_ns=int(dsi.t_ref_ns), world_from_camera=dsi.world_from_reference.copy(),
            depth_m=np.full(shape, np.nan, np.float32), confidence=np.full(shape, np.nan, np.float32),
            mask=np.zeros(shape, bool), points_world=np.empty((0, 3), np.float32),
            point_confidence=np.empty(0, np.float32), pixels=np.empty((0, 2), np.int32),
            event_count=dsi.event_count, vote_count=dsi.vote_count, parallax_px=dsi.parallax_px(),
            pose_batch_error_px=dsi.pose_batch_error_px)


def depth_method_names() -> tuple[str, ...]:
    """The names accepted where a focus loss or the max-vote baseline is chosen."""
    return PATCH_LOSSES + (MAX_VOTE,)


def warm_up(estimator: DepthEstimator) -> None:
    """Run every stage of the estimator once on a small synthetic keyframe (random events,
    a camera moving 0.1 m): the first call of each compiled stage loads it (~1 s, holding
    the GIL), better at start-up than in the first keyframe's latency."""
    rng = np.random.default_rng(0)
    count = max(estimator.settings.min_events, 5000)
    calibration = estimator.calibration
    events = Events.from_arrays(rng.integers(0, calibration.width, count), rng.integers(0, calibration.height, count),
                                np.linspace(0, 100_000_000, count).astype(np.int64), np.ones(count))
    trajectory = Trajectory([0, 100_000_000], [[0.0, 0.0, 0.0], [0.1, 0.0, 0.0]], [[0.0, 0.0, 0.0, 1.0]] * 2)
    estimator.estimate(events, trajectory)
    estimator.reset()  # the synthetic scene's depth range is not the camera's
