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
4. semi-dense selection (:mod:`focus_ros.depth.semidense`): adaptive threshold on the
   confidence map, median filter on the kept depths, back-projection to world points.

A keyframe whose camera barely moved (pure rotation: no parallax) gets no depth and a
``warning`` saying so, instead of noise.

:class:`KeyframeSelector` cuts an event stream into keyframes (every K events, or every B
metres of camera travel), the same way for the ROS node and the command line.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np

from focus_ros.camera import Calibration
from focus_ros.depth.dsi import DEFAULT_EVENTS_PER_POSE, DEFAULT_MAX_DSI_BYTES, DisparitySpaceImage, plane_depths_m
from focus_ros.depth.focus import (MAX_VOTE, PATCH_LOSSES, PatchFocus, check_patch_loss, focus_peaks,
                                   gaussian_patch_weights, max_vote_scores)
from focus_ros.depth.semidense import adaptive_threshold_mask, back_project, median_filter_depth
from focus_ros.events import Events
from focus_ros.poses import Trajectory

METHODS = ("focus", MAX_VOTE)


@dataclass(frozen=True)
class DepthSettings:
    """How to estimate depth. Defaults follow the paper and EMVS where they give values.

    loss: registry loss for the focus curves; any name of
        ``focus_ros.depth.focus.PATCH_LOSSES``; ignored by method "max_vote". Default
        "laplacian_magnitude": on the simulated slider it is among the most accurate losses
        without polarity, clearly ahead of EVO's local variance at the same cost per
        keyframe (one 3×3 correlation per slice); the few that match it cost several times
        its focus-stage time (EVALUATION.md, "Depth"; BENCHMARKS.md, "Depth").
    use_polarity: votes carry the event polarity ±1 (True) or count 1 (False, default).
    method: "focus" (the paper: extremal focus of the patch loss) or "max_vote" (EMVS:
        the voxel with the most votes along the ray).
    planes: number of depth planes of the DSI (EMVS: 100).
    z_min_m, z_max_m: depth range of the planes, m (default 0.45–2.4 m, the paper's
        slider_depth figure); planes uniform in inverse depth.
    patch_size_px: side of the focus patch, odd px (paper: 3).
    patch_sigma_px: σ of its Gaussian weights, px (default 1.0, favouring the centre as the
        paper's patch does; centre weight 1).
    refine_peak: parabola through the peak and its neighbours (sub-plane depth; default True).
    threshold_block_px: side of the adaptive threshold's Gaussian window, odd px (EMVS 5).
    threshold_offset: a pixel is kept when the rank of its confidence among the observed
        pixels (0–1) exceeds the Gaussian mean rank of its neighbourhood by this (default 0);
    min_confidence_rank: and is at least this rank (default 0.8: at most the 20 % most
        confident observed pixels; the same density for every loss).
    median_filter_px: side of the median filter on the kept depths, odd px (EMVS 5–15;
        default 5; 1 = none).
    events_per_pose: events sharing one interpolated pose in the DSI (EMVS: 1024).
    min_parallax_px: below this parallax (f · baseline · (1/z_min − 1/z_max), px) the
        keyframe is reported as having no parallax and gets no depth (default 1.0 px: with
        less, the nearest and farthest planes differ by under a pixel, and depth would be noise).
    min_events: keyframes with fewer events get no depth (default 1000).
    max_dsi_bytes: memory bound of the DSI (default 512 MiB; 640×480×100 planes = 123 MB).
    loss_options: the losses' LossOptions (None: defaults).
    """

    loss: str = "laplacian_magnitude"
    use_polarity: bool = False
    method: str = "focus"
    planes: int = 100
    z_min_m: float = 0.45
    z_max_m: float = 2.4
    patch_size_px: int = 3
    patch_sigma_px: float = 1.0
    refine_peak: bool = True
    threshold_block_px: int = 5
    threshold_offset: float = 0.0
    min_confidence_rank: float = 0.8
    median_filter_px: int = 5
    events_per_pose: int = DEFAULT_EVENTS_PER_POSE
    min_parallax_px: float = 1.0
    min_events: int = 1000
    max_dsi_bytes: int = DEFAULT_MAX_DSI_BYTES
    loss_options: object = None

    def __post_init__(self) -> None:
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
    (M,) float32; pixels: (M, 2) int32 (x, y) of the points;
    event_count: events in the keyframe; vote_count: bilinear votes cast inside the image;
    parallax_px: f · largest camera displacement from the reference · (1/z_min − 1/z_max);
    pose_batch_error_px: bound on the vote displacement from sharing one pose per batch;
    timing_s: seconds per stage ("dsi", "focus", "peaks", "select", "total");
    warning: "" or why the keyframe has no depth (too few events, no parallax).
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

    @property
    def point_count(self) -> int:
        return len(self.points_world)


class DepthEstimator:
    """Depth of reference views from events and a :class:`~focus_ros.poses.Trajectory`.

    One DSI (``settings.planes`` × sensor size float32) is allocated once and reused.
    :meth:`estimate` does the whole keyframe; :meth:`build_dsi` and :meth:`depth_from_dsi`
    expose the two halves (to score one DSI with several losses, or plot focus curves).
    """

    def __init__(self, calibration: Calibration, settings: DepthSettings | None = None):
        self.calibration = calibration
        self.settings = DepthSettings() if settings is None else settings
        settings = self.settings
        self.depths_m = plane_depths_m(settings.z_min_m, settings.z_max_m, settings.planes)
        self.dsi = DisparitySpaceImage(calibration, self.depths_m, settings.events_per_pose, settings.max_dsi_bytes)
        self.patch_weights = gaussian_patch_weights(settings.patch_size_px, settings.patch_sigma_px)
        self._focus_cache: dict = {}

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
        self.dsi.reset(int(t_ref_ns), trajectory.world_from_camera(int(t_ref_ns)))
        self.dsi.add_events(events, trajectory, use_polarity=polarity)
        return self.dsi

    def focus_scores(self, dsi: DisparitySpaceImage, method: str | None = None, loss: str | None = None) -> np.ndarray:
        """Scores (H, W, planes) float32, higher = sharper: ``sign · loss`` on patches, or votes."""
        method = self.settings.method if method is None else method
        if method == MAX_VOTE:
            return max_vote_scores(dsi.votes)
        loss = self.settings.loss if loss is None else loss
        check_patch_loss(loss, bool(dsi.polarity))
        return self.patch_focus(loss).scores(dsi.votes)

    def depth_from_dsi(self, dsi: DisparitySpaceImage, method: str | None = None,
                       loss: str | None = None) -> DepthKeyframe:
        """Depth, confidence, semi-dense mask and world points from a built DSI."""
        settings = self.settings
        timing = {}
        started = time.perf_counter()
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
        scores = self.focus_scores(dsi, method, loss)
        timing["focus"] = time.perf_counter() - started
        mark = time.perf_counter()
        depth, confidence, _ = focus_peaks(scores, dsi.inverse_depths, settings.refine_peak)
        timing["peaks"] = time.perf_counter() - mark
        mark = time.perf_counter()
        observed = np.any(dsi.slices != 0.0, axis=0)
        # a flat focus curve (no contrast, e.g. a constant patch) has no depth
        peaked = observed & (confidence > 0.0)
        mask = adaptive_threshold_mask(confidence, peaked, settings.threshold_block_px,
                                       settings.threshold_offset, settings.min_confidence_rank)
        filtered = median_filter_depth(depth, mask, settings.median_filter_px)
        points, pixels = back_project(filtered, self.calibration, dsi.world_from_reference)
        confidence = np.where(observed, confidence, np.float32(np.nan)).astype(np.float32)
        timing["select"] = time.perf_counter() - mark
        return DepthKeyframe(
            t_ref_ns=int(dsi.t_ref_ns), world_from_camera=dsi.world_from_reference.copy(), depth_m=filtered,
            confidence=confidence, mask=mask, points_world=points,
            point_confidence=confidence[pixels[:, 1], pixels[:, 0]].astype(np.float32), pixels=pixels,
            event_count=dsi.event_count, vote_count=dsi.vote_count, parallax_px=parallax,
            pose_batch_error_px=dsi.pose_batch_error_px, timing_s=timing)

    def estimate(self, events: Events, trajectory: Trajectory, t_ref_ns: int | None = None) -> DepthKeyframe:
        """The depth of the reference view at ``t_ref_ns`` (default: the middle of the
        events' span) from one keyframe's events and the trajectory."""
        started = time.perf_counter()
        dsi = self.build_dsi(events, trajectory, t_ref_ns)
        dsi_seconds = time.perf_counter() - started
        keyframe = self.depth_from_dsi(dsi)
        keyframe.timing_s["dsi"] = dsi_seconds
        keyframe.timing_s["total"] = time.perf_counter() - started
        return keyframe

    def _empty_keyframe(self, dsi: DisparitySpaceImage) -> DepthKeyframe:
        shape = (self.calibration.height, self.calibration.width)
        return DepthKeyframe(
            t_ref_ns=int(dsi.t_ref_ns), world_from_camera=dsi.world_from_reference.copy(),
            depth_m=np.full(shape, np.nan, np.float32), confidence=np.full(shape, np.nan, np.float32),
            mask=np.zeros(shape, bool), points_world=np.empty((0, 3), np.float32),
            point_confidence=np.empty(0, np.float32), pixels=np.empty((0, 2), np.int32),
            event_count=dsi.event_count, vote_count=dsi.vote_count, parallax_px=dsi.parallax_px(),
            pose_batch_error_px=dsi.pose_batch_error_px)


class KeyframeSelector:
    """Cuts an event stream into consecutive keyframes, for the node and the command line.

    every_events: a keyframe holds this many events (default 1,000,000, the paper's
    slider_depth reconstruction); every_baseline_m: if given, a keyframe ends as soon as
    the camera has moved this far (m) from its position at the keyframe's first event
    (checked every ``baseline_check_events`` events), or at ``every_events`` events,
    whichever comes first. Memory: at most ``every_events`` buffered events.

    :meth:`push` takes the next events (and the trajectory, needed for the baseline
    rule) and returns the completed keyframes' events; :meth:`flush` returns what is left
    (at least ``min_events``) at the end of a stream.
    """

    def __init__(self, every_events: int = 1_000_000, every_baseline_m: float | None = None,
                 min_events: int = 1000, baseline_check_events: int = 1000):
        if every_events < 1:
            raise ValueError(f"keyframe every_events must be >= 1, got {every_events}")
        if every_baseline_m is not None and not (math.isfinite(every_baseline_m) and every_baseline_m > 0):
            raise ValueError(f"keyframe every_baseline_m must be > 0 m, got {every_baseline_m}")
        self.every_events = int(every_events)
        self.every_baseline_m = every_baseline_m
        self.min_events = int(min_events)
        self.baseline_check_events = int(baseline_check_events)
        self._chunks: list[Events] = []
        self._chunk_starts: list[int] = []
        self._buffered = 0
        self._reset_baseline()

    def _reset_baseline(self) -> None:
        self._next_sample = 0          # next event index (in the keyframe) to check for baseline
        self._start_position = None    # camera position at the keyframe's first event (m)
        self._start_uncovered = False  # no pose at the first event: only the event rule applies

    @property
    def buffered_events(self) -> int:
        return self._buffered

    def push(self, events: Events, trajectory: Trajectory | None = None) -> list[Events]:
        """Buffer ``events`` (time order); return the keyframes they complete. Each push
        costs the new events' baseline samples, not the whole buffer (fine for 1-ms messages)."""
        if self.every_baseline_m is not None and trajectory is None:
            raise ValueError("the baseline keyframe rule needs the trajectory")
        completed = []
        if len(events):
            self._chunk_starts.append(self._buffered)
            self._chunks.append(events)
            self._buffered += len(events)
        while self._buffered:
            end = self._keyframe_end(trajectory)
            if end is None:
                break
            buffered = Events.concatenate(self._chunks)
            completed.append(buffered[:end])
            rest = buffered[end:]
            self._chunks = [rest] if len(rest) else []
            self._chunk_starts = [0] if len(rest) else []
            self._buffered = len(rest)
            self._reset_baseline()
        return completed

    def flush(self) -> Events | None:
        """The events left over at the end of a stream (None if fewer than min_events)."""
        rest = Events.concatenate(self._chunks)
        self._chunks, self._chunk_starts, self._buffered = [], [], 0
        self._reset_baseline()
        return rest if len(rest) >= self.min_events else None

    def _times_at(self, indices: np.ndarray) -> np.ndarray:
        """Times (ns) of the buffered events at ``indices`` (keyframe order), without joining chunks."""
        starts = np.asarray(self._chunk_starts)
        which = np.searchsorted(starts, indices, side="right") - 1
        times = np.empty(len(indices), np.int64)
        for chunk in np.unique(which):
            selected = which == chunk
            times[selected] = self._chunks[chunk].t[indices[selected] - starts[chunk]]
        return times

    def _keyframe_end(self, trajectory: Trajectory | None) -> int | None:
        """Index one past the keyframe's last event, or None when it is not complete yet."""
        limit = min(self._buffered, self.every_events)
        if self.every_baseline_m is not None and trajectory is not None and len(trajectory) \
                and not self._start_uncovered and self._next_sample < limit:
            first_pose, last_pose = trajectory.t_range_ns
            samples = np.arange(self._next_sample, limit, self.baseline_check_events)
            times = self._times_at(samples)
            if self._start_position is None:
                t_first = int(self._times_at(np.array([0]))[0])
                if not first_pose <= t_first <= last_pose:
                    if t_first < first_pose:  # poses will not come back in time
                        self._start_uncovered = True
                    times = times[:0]
                else:
                    self._start_position = trajectory.interpolate([t_first])[1][0]
            # samples beyond the last pose wait for more poses (a stream's poses may lag)
            covered = int(np.searchsorted(times, last_pose, side="right")) if len(times) else 0
            if covered:
                _, positions = trajectory.interpolate(times[:covered])
                moved = np.linalg.norm(positions - self._start_position, axis=1) >= self.every_baseline_m
                if moved.any():
                    return max(int(samples[int(np.argmax(moved))]), 1)
                self._next_sample = int(samples[covered - 1]) + self.baseline_check_events
        return self.every_events if self._buffered >= self.every_events else None


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
