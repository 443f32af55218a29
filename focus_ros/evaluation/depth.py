"""Depth evaluation: the semi-dense depth of every focus loss and of the max-vote baseline
against ground-truth depth maps (the simulator's, :mod:`focus_ros.sources.depth_maps`).

Protocol
--------
1. **Keyframes** (:func:`keyframe_windows`): ``count`` reference times spread evenly over
   the sequence (the middles of ``count`` equal parts of the event span where a whole
   keyframe fits), each snapped to the time of a ground-truth depth map (every 20 ms on the
   simulator), so that the truth is exact (maps are never interpolated in time); a
   keyframe's events are the ``events_per_keyframe`` events centred on its reference time
   (shifted to fit inside the sequence), or, with a keyframe baseline B, the events of the
   time around it during which the camera stays within B/2 of its reference position.
2. **One DSI per keyframe and polarity mode** (the engine's ``DepthEstimator.build_dsi``; with
   ``auto_depth_range`` its planes over the depths the engine finds for that keyframe, as
   ``DepthEstimator.estimate`` finds them for a first keyframe),
   scored by every method (``DepthEstimator.depth_from_dsi(dsi, method, loss)``): the
   max-vote baseline sees exactly the votes the focus losses see.
3. **Ground truth on the estimate's grid** (:func:`ground_truth_on_reference_grid`): the
   engine's depth maps live on the undistorted (pinhole K) grid of the reference view, the
   truth on the distorted sensor grid; each grid pixel is distorted with the calibration and
   the truth read at that sensor position. Where the 2×2 sensor pixels around it agree within
   1 % (inside a surface) the truth is their bilinear interpolation; where they do not (an
   occlusion boundary crosses the pixel), the point is compared with the nearest of the four
   depths, i.e. a point on a depth edge counts as right when it is right for either side
   (the edge's sub-pixel position is not observable). :attr:`DepthErrors.edge_share` says how
   many points that concerns.
4. **Errors** on the *published* points (the semi-dense mask after the median filter, what
   ``focus-ros depth`` writes), pooled over keyframes: relative depth error
   |Z_est − Z_true| / Z_true, its median and mean, the share within 5 % and 10 %; density =
   published points / reference pixels with ground truth; time per keyframe = DSI build +
   depth from the DSI for that method (median over keyframes, ms).
5. **Equal density**: to compare a loss with the max-vote baseline at the same density, the
   same statistics on the ``n`` most confident published points of each, ``n`` = the smaller
   of their point counts on each keyframe (:attr:`DepthResult.at_equal_density`,
   :attr:`DepthResult.baseline_at_equal_density`).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np

from focus_ros.camera import Calibration
from focus_ros.events import Events

MAX_VOTE = "max_vote"
#: relative disagreement (fraction) of the 2×2 truth pixels above which a pixel is on a depth edge
EDGE_TOLERANCE = 0.01
#: points closer than this (px) to a depth edge count as "near an edge" in the error breakdown
NEAR_EDGE_PX = 3.0
POLARITY_MODES = ("without", "with")
#: fractions of each keyframe's published points (most confident first) for accuracy versus density
DENSITY_FRACTIONS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)


# ---------------------------------------------------------------------------------------- keyframes


@dataclass(frozen=True)
class KeyframeWindow:
    """One evaluation keyframe: reference time (ns, a ground-truth map time), the index of its
    ground-truth map, and its events' index range [start, stop) in the sequence."""

    t_ref_ns: int
    truth_index: int
    start: int
    stop: int


def keyframe_windows(event_t_ns: np.ndarray, truth_t_ns: np.ndarray, count: int,
                     events_per_keyframe: int, baseline_m: float | None = None,
                     positions_at=None) -> list[KeyframeWindow]:
    """``count`` keyframes evenly spread over the sequence (see the module docstring).

    Not the keyframes the depth pipeline cuts (:class:`focus_ros.pipelines.depth.KeyframeSelector`:
    consecutive keyframes ending by parallax, their reference time the middle of their events):
    an evaluation needs a reference view exactly at a ground-truth map's time (maps are never
    interpolated in time), the same few views for every loss and polarity mode, and the events
    around each view, which a stream cut into consecutive keyframes gives none of.

    event_t_ns: the events' times (sorted, ns); truth_t_ns: the ground-truth map times (ns).
    Reference times are ground-truth times inside the events' span, at least half a keyframe
    from either end where the sequence allows; duplicates are dropped. With ``baseline_m``
    (m) and ``positions_at`` (times ns (N,) -> camera positions (N, 3) m) a keyframe instead
    holds the events of the time around its reference during which the camera stays within
    baseline_m / 2 of its reference position (a baseline of about baseline_m however fast
    the events come: a rotating camera makes many events per metre of travel), and the
    reference times are the middles of ``count`` equal parts of the events' time span.
    ValueError when there is nothing to evaluate.
    """
    if count < 1 or events_per_keyframe < 1:
        raise ValueError(f"need at least 1 keyframe of at least 1 event, got {count} keyframes of "
                         f"{events_per_keyframe} events")
    total = len(event_t_ns)
    if total == 0:
        raise ValueError("the sequence has no events")
    size = min(int(events_per_keyframe), total)
    inside = truth_t_ns[(truth_t_ns >= event_t_ns[0]) & (truth_t_ns <= event_t_ns[-1])]
    if not len(inside):
        raise ValueError(f"no ground-truth depth map inside the events' time span "
                         f"{event_t_ns[0] / 1e9:.6f}-{event_t_ns[-1] / 1e9:.6f} s")
    if baseline_m is not None:
        if not (baseline_m > 0 and positions_at is not None):
            raise ValueError(f"a keyframe baseline must be > 0 m and needs the camera positions, got {baseline_m}")
        first, last = int(event_t_ns[0]), int(event_t_ns[-1])
        wanted_times = first + (np.arange(count) + 0.5) * (last - first) / count
        grid = np.arange(first, last + 1, 1_000_000, dtype=np.int64)  # camera positions every 1 ms
        positions = np.asarray(positions_at(grid), np.float64)
    else:
        # centre event indices: the middles of `count` equal parts of the span where a whole keyframe fits
        low, high = size // 2, total - (size - size // 2)
        wanted_times = event_t_ns[np.round(low + (np.arange(count) + 0.5) * (high - low) / count).astype(np.int64)]
    windows, used = [], set()
    for wanted in wanted_times:
        truth_index = int(np.argmin(np.abs(truth_t_ns - int(wanted))))
        t_ref = int(truth_t_ns[truth_index])
        if truth_index in used or not (event_t_ns[0] <= t_ref <= event_t_ns[-1]):
            continue
        used.add(truth_index)
        middle = int(np.searchsorted(event_t_ns, t_ref))
        if baseline_m is None:
            start = min(max(middle - size // 2, 0), total - size)
            windows.append(KeyframeWindow(t_ref, truth_index, start, start + size))
            continue
        reference = int(np.searchsorted(grid, t_ref))
        away = np.linalg.norm(positions - np.asarray(positions_at(np.array([t_ref])), np.float64)[0], axis=1) \
            >= 0.5 * baseline_m
        before = np.flatnonzero(away[:reference])
        after = np.flatnonzero(away[reference:])
        t_start = int(grid[before[-1]]) if len(before) else first
        t_stop = int(grid[reference + after[0]]) if len(after) else last
        windows.append(KeyframeWindow(t_ref, truth_index, int(np.searchsorted(event_t_ns, t_start)),
                                      int(np.searchsorted(event_t_ns, t_stop, side="right"))))
    return windows


# ---------------------------------------------------------------------------------------- ground truth


@dataclass(frozen=True)
class ReferenceTruth:
    """Ground truth on the undistorted reference grid (H, W): ``depth_m`` the bilinear truth
    (NaN outside the sensor), ``corners_m`` (H, W, 4) the depths of the 2×2 sensor pixels
    around each grid pixel, ``at_edge`` where they disagree by more than EDGE_TOLERANCE,
    ``edge_distance_px`` the distance (px) to the nearest such depth discontinuity."""

    depth_m: np.ndarray
    corners_m: np.ndarray
    at_edge: np.ndarray
    edge_distance_px: np.ndarray

    @property
    def known(self) -> np.ndarray:
        return np.isfinite(self.depth_m) | np.any(np.isfinite(self.corners_m), axis=2)


def ground_truth_on_reference_grid(depth_sensor_m: np.ndarray, calibration: Calibration,
                                   edge_tolerance: float = EDGE_TOLERANCE) -> ReferenceTruth:
    """Resample a ground-truth depth map of the distorted sensor grid onto the undistorted
    (pinhole K) grid of the engine's depth maps (module docstring, step 3)."""
    truth = np.asarray(depth_sensor_m, np.float64)
    height, width = truth.shape
    rows, columns = np.mgrid[0:height, 0:width].astype(np.float64)
    normalized = np.stack([(columns - calibration.cx) / calibration.fx,
                           (rows - calibration.cy) / calibration.fy], axis=-1)
    distorted = calibration.distort(normalized)
    u = calibration.fx * distorted[..., 0] + calibration.cx
    v = calibration.fy * distorted[..., 1] + calibration.cy
    u0, v0 = np.floor(u).astype(np.int64), np.floor(v).astype(np.int64)
    inside = (u0 >= 0) & (u0 + 1 < width) & (v0 >= 0) & (v0 + 1 < height)
    u0c, v0c = np.clip(u0, 0, width - 2), np.clip(v0, 0, height - 2)
    corners = np.stack([truth[v0c, u0c], truth[v0c, u0c + 1], truth[v0c + 1, u0c], truth[v0c + 1, u0c + 1]],
                       axis=-1)
    corners[~inside] = np.nan
    corners[~np.isfinite(corners)] = np.nan  # +inf (nothing hit) is no truth
    fu, fv = (u - u0)[..., None], (v - v0)[..., None]
    weights = np.concatenate([(1 - fu) * (1 - fv), fu * (1 - fv), (1 - fu) * fv, fu * fv], axis=-1)
    some = np.any(np.isfinite(corners), axis=2)
    filled_low = np.where(np.isfinite(corners), corners, np.inf).min(axis=2)
    filled_high = np.where(np.isfinite(corners), corners, -np.inf).max(axis=2)
    with np.errstate(invalid="ignore"):
        at_edge = some & ~(filled_high - filled_low <= edge_tolerance * filled_low)
    bilinear = np.sum(weights * corners, axis=2)
    bilinear[at_edge | ~np.all(np.isfinite(corners), axis=2)] = np.nan
    import cv2
    distance = cv2.distanceTransform((~at_edge).astype(np.uint8), cv2.DIST_L2, cv2.DIST_MASK_PRECISE)
    return ReferenceTruth(bilinear.astype(np.float32), corners.astype(np.float32), at_edge, distance)


def relative_errors(depth_m: np.ndarray, pixels: np.ndarray, truth: ReferenceTruth) -> tuple[np.ndarray, np.ndarray]:
    """(|Z − Z_true| / Z_true per point, its distance (px) to the nearest depth edge) for the
    estimated depths ``depth_m`` (M,) at ``pixels`` (M, 2) (x, y) of the reference grid;
    NaN where there is no truth. On an edge: the smallest error over the 2×2 corners."""
    x, y = pixels[:, 0], pixels[:, 1]
    depth = np.asarray(depth_m, np.float64)
    edge = truth.at_edge[y, x]
    distance = truth.edge_distance_px[y, x].astype(np.float64)
    reference = truth.depth_m[y, x].astype(np.float64)
    errors = np.abs(depth - reference) / reference
    if edge.any():
        corners = truth.corners_m[y[edge], x[edge]].astype(np.float64)
        corner_errors = np.abs(depth[edge, None] - corners) / corners  # NaN where a corner has no truth
        nearest = np.where(np.isnan(corner_errors), np.inf, corner_errors).min(axis=1)
        errors[edge] = np.where(np.isfinite(nearest), nearest, np.nan)
    return errors, distance


# ---------------------------------------------------------------------------------------- statistics


@dataclass(frozen=True)
class DepthErrors:
    """Relative depth error statistics (fractions, not %) over the points of some keyframes.

    points: points with ground truth; median, mean: of |Z − Z_true| / Z_true; within_5,
    within_10: share of points with an error ≤ 5 % and ≤ 10 %; density: points / reference
    pixels with ground truth (pooled over keyframes); edge_share: share of points on a depth
    edge (compared with the nearer side); near_edge_share: share of points within
    NEAR_EDGE_PX of a depth edge; within_5_away_from_edges: share within 5 % among the other
    points; without_truth: points where no truth exists.
    """

    points: int
    median: float
    mean: float
    within_5: float
    within_10: float
    density: float
    edge_share: float
    near_edge_share: float = float("nan")
    within_5_away_from_edges: float = float("nan")
    without_truth: int = 0

    @classmethod
    def from_errors(cls, errors: np.ndarray, edge_distance_px: np.ndarray, known_pixels: int) -> "DepthErrors":
        """Statistics of relative errors (NaN = no truth) with each point's distance (px) to
        the nearest depth edge (0 = on it); known_pixels: reference pixels with truth."""
        errors = np.asarray(errors, np.float64)
        valid = np.isfinite(errors)
        used = errors[valid]
        nan = float("nan")
        density = len(used) / known_pixels if known_pixels else nan
        if not len(used):
            return cls(0, nan, nan, nan, nan, density, nan, without_truth=int((~valid).sum()))
        distance = np.asarray(edge_distance_px, np.float64)[valid]
        away = distance >= NEAR_EDGE_PX
        return cls(points=len(used), median=float(np.median(used)), mean=float(np.mean(used)),
                   within_5=float(np.mean(used <= 0.05)), within_10=float(np.mean(used <= 0.10)),
                   density=density, edge_share=float(np.mean(distance == 0)),
                   near_edge_share=float(np.mean(~away)),
                   within_5_away_from_edges=float(np.mean(used[away] <= 0.05)) if away.any() else nan,
                   without_truth=int((~valid).sum()))


@dataclass
class DepthResult:
    """One (method, polarity) row: method is a loss name or "max_vote"; status "ok" or why
    there is no number ("unsupported: ..."); errors over the published points;
    at_equal_density / baseline_at_equal_density: this method's and the max-vote baseline's
    most confident points, as many of each as the sparser of the two has on every keyframe
    (None without the baseline); ms_per_keyframe: median of DSI build + depth from DSI;
    keyframes / keyframes_with_depth: evaluated / with points; warnings: the engine's
    keyframe warnings; density_curve: (F, 3) rows (density, median error, share within 5 %)
    of the most confident fraction f of the published points of every keyframe, f in
    DENSITY_FRACTIONS (accuracy versus density)."""

    method: str
    polarity: str
    status: str = "ok"
    errors: DepthErrors | None = None
    at_equal_density: DepthErrors | None = None
    baseline_at_equal_density: DepthErrors | None = None
    ms_per_keyframe: float = float("nan")
    keyframes: int = 0
    keyframes_with_depth: int = 0
    warnings: list = field(default_factory=list)
    density_curve: np.ndarray | None = None


# ---------------------------------------------------------------------------------------- the run


@dataclass
class KeyframeOutcome:
    """What one method gave on one keyframe: the engine's DepthKeyframe, per-point relative
    errors and distances (px) to the nearest depth edge (aligned with keyframe.pixels), and
    the seconds it took (DSI build + depth from the DSI)."""

    keyframe: object
    errors: np.ndarray
    edge_distance_px: np.ndarray
    seconds: float


@dataclass
class DepthEvaluation:
    """Results of :func:`evaluate_depth`: rows (one per method and polarity mode), the keyframe
    windows, the ground truth of the first keyframe on the reference grid, and the first
    keyframe's outcome per (method, polarity) for pictures; dsi_votes: the first keyframe's
    DSI votes per polarity mode (H, W, planes) for pictures and focus curves; depths_m: plane
    depths (m); patch_focus: loss -> the estimator's PatchFocus (for focus curves)."""

    rows: list
    windows: list
    first_truth: ReferenceTruth | None
    first_outcomes: dict
    dsi_votes: dict
    depths_m: np.ndarray
    settings: object
    calibration: Calibration
    patch_focus: object = None


def _most_confident(outcome: KeyframeOutcome, count: int) -> np.ndarray:
    """Indices of the ``count`` published points of highest confidence."""
    confidence = np.nan_to_num(outcome.keyframe.point_confidence.astype(np.float64), nan=-np.inf)
    return np.argsort(-confidence, kind="stable")[:count]


def _pooled(outcomes, selections, truth_pixels) -> DepthErrors:
    """DepthErrors of the selected points of every keyframe (all points when selections is None)."""
    errors, edges = [], []
    for index, outcome in enumerate(outcomes):
        chosen = slice(None) if selections is None else selections[index]
        errors.append(outcome.errors[chosen])
        edges.append(outcome.edge_distance_px[chosen])
    return DepthErrors.from_errors(np.concatenate(errors), np.concatenate(edges), int(np.sum(truth_pixels)))


def _summarize(method, polarity, per_keyframe, baseline, truth_pixels) -> DepthResult:
    """Pool per-keyframe outcomes of one (method, polarity) into a DepthResult; baseline: the
    max-vote outcomes of the same keyframes (None when not evaluated)."""
    warnings = sorted({o.keyframe.warning for o in per_keyframe if o.keyframe.warning})
    result = DepthResult(method, polarity, keyframes=len(per_keyframe),
                         keyframes_with_depth=sum(len(o.errors) > 0 for o in per_keyframe), warnings=warnings,
                         ms_per_keyframe=1e3 * float(np.median([o.seconds for o in per_keyframe])))
    result.errors = _pooled(per_keyframe, None, truth_pixels)
    sweep = [_pooled(per_keyframe, [_most_confident(o, int(round(fraction * len(o.errors)))) for o in per_keyframe],
                     truth_pixels) for fraction in DENSITY_FRACTIONS]
    result.density_curve = np.array([(e.density, e.median, e.within_5) for e in sweep], np.float64)
    if baseline is not None:
        counts = [min(len(o.errors), len(b.errors)) for o, b in zip(per_keyframe, baseline)]
        result.at_equal_density = _pooled(per_keyframe, [_most_confident(o, n) for o, n in
                                                         zip(per_keyframe, counts)], truth_pixels)
        result.baseline_at_equal_density = _pooled(baseline, [_most_confident(b, n) for b, n in
                                                              zip(baseline, counts)], truth_pixels)
    return result


def depth_inputs(recording, keyframes: int, events_per_keyframe: int, keyframe_baseline_m: float | None = None):
    """(depth ground truth, trajectory, the events the poses cover, keyframe windows) of a
    recording; ValueError naming what is missing (poses, ground truth, calibration, events)."""
    from focus_ros.poses import Trajectory
    from focus_ros.sources.depth_maps import DepthGroundTruth

    if recording.poses is None or not len(recording.poses):
        raise ValueError("the sequence has no camera poses (groundtruth.txt or a pose topic): depth needs them")
    truth = DepthGroundTruth.from_recording(recording)
    if truth is None:
        raise ValueError("the sequence has no depth ground truth (depthmaps.txt or a /dvs/depthmap topic); "
                         "simulate one with: focus-ros simulate --preset slider")
    if recording.calibration is None:
        raise ValueError("the sequence has no calibration")
    trajectory = Trajectory.from_poses(recording.poses)
    events: Events = recording.events
    first, last = trajectory.t_range_ns
    covered = (events.t >= first) & (events.t <= last)
    if not covered.all():
        events = events[covered]
    windows = keyframe_windows(events.t, truth.t, keyframes, events_per_keyframe, keyframe_baseline_m,
                               lambda t_ns: trajectory.interpolate(t_ns)[1])
    return truth, trajectory, events, windows


def evaluate_depth(recording, methods, polarity_modes=POLARITY_MODES, keyframes: int = 3,
                   events_per_keyframe: int = 500_000, settings=None, progress=None,
                   keyframe_baseline_m: float | None = None) -> DepthEvaluation:
    """Evaluate ``methods`` (registry loss names with a patch version, and/or "max_vote") on a
    recording with poses and depth ground truth (module docstring).

    settings: the engine's DepthSettings (its loss, method and use_polarity are overridden per
    row); progress: called with 1 after each (keyframe, polarity, method) step;
    keyframe_baseline_m: keyframes by camera travel instead of event count (see
    :func:`keyframe_windows`). Combinations the engine refuses (e.g. an area loss with signed
    votes) become rows with status "unsupported: reason". ValueError naming what is missing
    (poses, ground truth, events).
    """
    from focus_ros.estimators.depth import DepthEstimator, DepthSettings

    settings = DepthSettings() if settings is None else settings
    truth, trajectory, events, windows = depth_inputs(recording, keyframes, events_per_keyframe, keyframe_baseline_m)
    estimator = DepthEstimator(recording.calibration, settings)
    calibration = recording.calibration

    outcomes: dict = {}
    truth_pixels, first_truth, dsi_votes = [], None, {}
    refused: dict = {}
    for index, window in enumerate(windows):
        reference = ground_truth_on_reference_grid(truth.depth_m[window.truth_index], calibration)
        truth_pixels.append(reference.known)
        if first_truth is None:
            first_truth = reference
        keyframe_events = events[window.start:window.stop]
        if settings.auto_depth_range:  # the keyframe's planes over its scene's depths, as the engine finds them
            estimator.reset()
            estimator.estimate(keyframe_events, trajectory, window.t_ref_ns)
        for polarity in polarity_modes:
            use_polarity = polarity == "with"
            started = time.perf_counter()
            dsi = estimator.build_dsi(keyframe_events, trajectory, window.t_ref_ns, use_polarity=use_polarity)
            dsi_seconds = time.perf_counter() - started
            if index == 0:
                dsi_votes[polarity] = dsi.votes.copy()
            for method in methods:
                key = (method, polarity)
                if key in refused:
                    if progress:
                        progress(1)
                    continue
                started = time.perf_counter()
                try:
                    if method == MAX_VOTE:
                        keyframe = estimator.depth_from_dsi(dsi, method=MAX_VOTE)
                    else:
                        keyframe = estimator.depth_from_dsi(dsi, method="focus", loss=method)
                except ValueError as error:  # a combination the engine refuses (with the reason)
                    refused[key] = str(error)
                    if progress:
                        progress(1)
                    continue
                seconds = dsi_seconds + time.perf_counter() - started
                depth = keyframe.depth_m[keyframe.pixels[:, 1], keyframe.pixels[:, 0]]
                errors, distances = relative_errors(depth, keyframe.pixels, reference)
                outcomes.setdefault(key, []).append(KeyframeOutcome(keyframe, errors, distances, seconds))
                if progress:
                    progress(1)

    rows = []
    for polarity in polarity_modes:
        baseline = outcomes.get((MAX_VOTE, polarity))
        for method in methods:
            key = (method, polarity)
            if key in refused:
                rows.append(DepthResult(method, polarity, status=f"unsupported: {refused[key]}"))
                continue
            rows.append(_summarize(method, polarity, outcomes[key], baseline, truth_pixels))
    first_outcomes = {key: value[0] for key, value in outcomes.items()}
    return DepthEvaluation(rows, windows, first_truth, first_outcomes, dsi_votes, estimator.depths_m.copy(),
                           settings, calibration, estimator.patch_focus)


# ---------------------------------------------------------------------------- the grid


def depth_job(data, methods, polarity: str, keyframes: int, events_per_keyframe: int, settings,
              keyframe_baseline_m: float | None) -> DepthEvaluation:
    """A grid job (in a worker): :func:`evaluate_depth` of every method in one polarity mode on
    the delivered sequence (one DSI per keyframe shared by all methods, as the protocol wants).
    Its ``patch_focus`` (a method of the worker's estimator) is left out: see
    :func:`merge_depth_evaluations`."""
    evaluation = evaluate_depth(data.recording, methods, (polarity,), keyframes, events_per_keyframe, settings,
                                keyframe_baseline_m=keyframe_baseline_m)
    evaluation.patch_focus = None
    return evaluation


def depth_grid_jobs(recording, methods, polarity_modes, keyframes: int, events_per_keyframe: int, settings,
                    keyframe_baseline_m: float | None, output, sequence: str) -> list:
    """One grid job per polarity mode of the sequence named ``sequence``, keyed
    ``<sequence>/depth/<polarity>``; their results kept in ``output``/jobs/ (a rerun with the same
    options, events, poses and depth-map times resumes from them)."""
    from pathlib import Path

    from focus_ros.evaluation.angular_velocity import event_summary
    from focus_ros.evaluation.grid import GridJob, PickleStore, fingerprint

    depth_inputs(recording, keyframes, events_per_keyframe, keyframe_baseline_m)  # refused here, not in a job
    store = PickleStore(Path(output) / "jobs")
    summary = event_summary(recording.events)
    jobs = []
    for polarity in polarity_modes:
        arguments = {"methods": list(methods), "polarity": polarity, "keyframes": keyframes,
                     "events_per_keyframe": events_per_keyframe, "settings": settings,
                     "keyframe_baseline_m": keyframe_baseline_m}
        jobs.append(GridJob(f"{sequence}/depth/{polarity}", sequence, depth_job, arguments,
                            fingerprint("depth", arguments, summary, recording.poses, recording.depth_times), store))
    return jobs


def merge_depth_evaluations(parts: list) -> DepthEvaluation:
    """The evaluation of several polarity modes from the per-mode evaluations (in mode order):
    exactly what :func:`evaluate_depth` gives for those modes at once (the modes share nothing
    but the keyframes, which are the same), with ``patch_focus`` of a fresh estimator."""
    from focus_ros.estimators.depth import DepthEstimator

    first = parts[0]
    return DepthEvaluation([row for part in parts for row in part.rows], first.windows, first.first_truth,
                           {key: value for part in parts for key, value in part.first_outcomes.items()},
                           {key: value for part in parts for key, value in part.dsi_votes.items()},
                           first.depths_m, first.settings, first.calibration,
                           DepthEstimator(first.calibration, first.settings).patch_focus)


def focus_curves(votes: np.ndarray, x: int, y: int, losses, patch_focus) -> dict:
    """Focus score along depth (per plane) of the patch at pixel (x, y) for each loss:
    {loss: (planes,) float64}, computed on a crop of the DSI around the pixel (the patch
    values depend only on its k×k neighbourhood, zero outside the image, so a crop with a
    margin gives the same numbers). patch_focus: loss -> the engine's PatchFocus."""
    height, width, _ = votes.shape
    margin = 4
    top, left = max(y - margin, 0), max(x - margin, 0)
    crop = np.ascontiguousarray(votes[top:min(y + margin + 1, height), left:min(x + margin + 1, width)])
    curves = {}
    for loss in losses:
        scores = patch_focus(loss).scores(crop)
        curves[loss] = np.asarray(scores[y - top, x - left], np.float64)
    return curves


def pick_curve_pixel(outcome: KeyframeOutcome, truth: ReferenceTruth, depth_range_m=(0.8, 1.6)) -> tuple[int, int]:
    """A pixel for the focus-curve figure: among the published points of ``outcome`` that are
    correct (error ≤ 2 %), not on a depth edge, with a true depth in depth_range_m, the one
    of highest confidence (falls back to any published point)."""
    keyframe = outcome.keyframe
    pixels = keyframe.pixels
    if not len(pixels):
        raise ValueError("no published point to plot focus curves for")
    x, y = pixels[:, 0], pixels[:, 1]
    true_depth = truth.depth_m[y, x]
    good = ((outcome.errors <= 0.02) & (outcome.edge_distance_px >= NEAR_EDGE_PX) & (true_depth >= depth_range_m[0])
            & (true_depth <= depth_range_m[1]))
    candidates = np.flatnonzero(good) if good.any() else np.arange(len(pixels))
    confidence = np.nan_to_num(keyframe.point_confidence[candidates].astype(np.float64), nan=-np.inf)
    chosen = candidates[int(np.argmax(confidence))]
    return int(x[chosen]), int(y[chosen])


# ---------------------------------------------------------------------------- published clouds


def cloud_relative_errors(points_world: np.ndarray, t_ref_ns: int, ground_truth, trajectory,
                          calibration: Calibration, with_depths: bool = False):
    """Relative depth error |Z − Z_true| / Z_true of each world point (M, 3) m, as the depth
    evaluation counts it (:func:`relative_errors`: ground truth
    resampled onto the undistorted grid, a point on a depth edge right for either side).

    A published cloud's reference time lies between ground-truth maps (every 20 ms), so the
    points are seen from the camera of the map nearest to ``t_ref_ns`` (its pose at that
    map's time: exact, no interpolation between maps): Z is their depth along that camera's
    optical axis, their pixel the pinhole projection. NaN for points outside that view or
    without ground truth. ground_truth: :class:`~focus_ros.sources.depth_maps.DepthGroundTruth`;
    trajectory: :class:`~focus_ros.poses.Trajectory` (world from camera). ``with_depths``: also
    the points' Z (m) in that view, so that |Z - Z_true| = error x Z_true can be compared with a
    depth standard deviation.
    """
    index = ground_truth.nearest_index(int(t_ref_ns))
    world_from_camera = trajectory.world_from_camera(int(ground_truth.t[index]))
    camera = (np.asarray(points_world, np.float64) - world_from_camera[:3, 3]) @ world_from_camera[:3, :3]
    errors = np.full(len(camera), np.nan)
    in_front = np.flatnonzero(camera[:, 2] > 1e-6)
    pixels = np.round(calibration.project(camera[in_front], distort=False)).astype(np.int64)
    inside = ((pixels[:, 0] >= 0) & (pixels[:, 0] < calibration.width) &
              (pixels[:, 1] >= 0) & (pixels[:, 1] < calibration.height))
    truth = ground_truth_on_reference_grid(ground_truth.depth_m[index], calibration)
    errors[in_front[inside]], _ = relative_errors(camera[in_front[inside], 2], pixels[inside], truth)
    return (errors, camera[:, 2]) if with_depths else errors


def map_relative_errors(points_world: np.ndarray, keyframe_stamps_ns, ground_truth, trajectory,
                        calibration: Calibration, with_depths: bool = False, point_views: np.ndarray | None = None):
    """Relative depth error of each point of a fused map (world frame, M x 3 m), judged as
    :func:`cloud_relative_errors` judges a keyframe's cloud.

    ``point_views`` (M,) int: each point's own keyframe, an index into ``keyframe_stamps_ns``
    (the reference times of the keyframes added to the map, in order;
    :meth:`~focus_ros.depth.fusion.FusedMap.point_keyframes`): each point is judged in the view its
    depth was estimated in. Without it (a map read from a topic or a file carries no keyframe),
    in the first keyframe's view that sees it with ground truth; there a point that this view has
    behind a nearer surface (a wall seen past a panel's edge from a later keyframe) is judged
    against that surface's depth, so the errors are pessimistic in an occluded scene.
    NaN where no view has it. ``with_depths``: also each point's Z (m) in the view that judged it
    (NaN: none)."""
    errors = np.full(len(points_world), np.nan)
    depths = np.full(len(points_world), np.nan)
    if point_views is not None:
        point_views = np.asarray(point_views)
        if point_views.shape != (len(points_world),):
            raise ValueError(f"{point_views.shape} point views for {len(points_world)} map points")
        for view in np.unique(point_views):
            own = np.flatnonzero(point_views == view)
            errors[own], depths[own] = cloud_relative_errors(points_world[own], keyframe_stamps_ns[int(view)],
                                                             ground_truth, trajectory, calibration, with_depths=True)
        return (errors, depths) if with_depths else errors
    for stamp in keyframe_stamps_ns:
        missing = np.flatnonzero(np.isnan(errors))
        if not len(missing):
            break
        found, seen_depths = cloud_relative_errors(points_world[missing], stamp, ground_truth, trajectory,
                                                   calibration, with_depths=True)
        judged = np.isfinite(found)
        errors[missing[judged]], depths[missing[judged]] = found[judged], seen_depths[judged]
    return (errors, depths) if with_depths else errors


def cloud_error_summary(errors: np.ndarray) -> dict:
    """median relative error, share within 5 % (of the points with ground truth), points."""
    known = errors[np.isfinite(errors)]
    return {"points": int(len(errors)), "with_ground_truth": int(len(known)),
            "median_relative_error": float(np.median(known)) if len(known) else float("nan"),
            "within_5_percent": float(np.mean(known < 0.05)) if len(known) else float("nan")}


def expected_keyframes(event_count: int, keyframe_events: int, min_events: int = 1000) -> int:
    """Keyframes of a stream cut every ``keyframe_events`` events, the rest (≥ min_events)
    making one more at the end (``focus-ros depth``, and depth_node once the stream idles)."""
    return event_count // keyframe_events + (1 if event_count % keyframe_events >= min_events else 0)


def percent(value: float) -> float:
    """A fraction as a percentage (NaN stays NaN)."""
    return 100.0 * value if value is not None and math.isfinite(value) else float("nan")
