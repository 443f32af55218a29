"""Optical-flow ground truth and errors (patch flow, ``focus_ros.estimators.optical_flow``).

Ground truth for a camera rotating at ω (rad/s, camera frame x right, y down, z forward) in a
static scene, in pixels of the raw (distorted) image, as the events are seen:

- a pixel's undistorted bearing b = (b_x, b_y, 1) (the calibration's look-up table) moves as
  db/dt = b × ω (the warp convention of ``focus_ros.warps``: b(t_ref) = exp([ω]× (t − t_ref)) b(t));
- its normalised image point n = (b_x, b_y) as dn/dt = (Ḃ_x − b_x Ḃ_z, Ḃ_y − b_y Ḃ_z);
- the raw pixel as du/dt = diag(f_x, f_y) · J_d(n) · dn/dt, with J_d the 2×2 Jacobian of the
  calibration's radial-tangential distortion (central differences of ``Calibration.distort``).

All three are linear in ω: ``rotation_flow_basis`` gives, per pixel, the 2×3 matrix M with
du/dt = M ω (px/s per rad/s). A patch's ground truth is the mean of M ω over the patch's events
(the estimator fits one v to exactly these events), with ω at the window's reference time.

Errors per valid patch (``FlowErrors``): the endpoint error |v − v_gt| in px/s and in px over the
window's time span T (|v − v_gt| · T), the share of patches whose endpoint error exceeds 3 px
over the window, the relative error |v − v_gt| / |v_gt| (its median, and the share over
``RELATIVE_TAIL``, 10 %: issue 24's targets), the estimator's confidence of each, and the share
of the patches with events that the estimator reported valid; density: the share of the patches
holding at least ``DENSE_MIN_EVENTS`` events given a full flow, and apart those given a normal
flow only (with the relative error of its component along the edge's normal).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from focus_ros.camera import Calibration

#: an endpoint error over this many px (over the window) counts as an outlier (MVSEC convention)
OUTLIER_PX = 3.0

_BASIS_CACHE: dict = {}


def rotation_flow_basis(calibration: Calibration) -> np.ndarray:
    """(height, width, 2, 3) matrix M per raw pixel: its image velocity du/dt = M ω (px/s) for a
    camera rotating at ω rad/s (module docstring). Cached per calibration."""
    cached = _BASIS_CACHE.get(calibration)
    if cached is not None:
        return cached
    bearings = calibration.bearing_lut()  # (H, W, 2)
    bx, by = bearings[..., 0], bearings[..., 1]
    zeros, ones = np.zeros_like(bx), np.ones_like(bx)
    # d bearing / dt = b x omega = [b]x omega, with b = (bx, by, 1)
    skew = np.stack([np.stack([zeros, -ones, by], -1),
                     np.stack([ones, zeros, -bx], -1),
                     np.stack([-by, bx, zeros], -1)], -2)  # (H, W, 3, 3)
    projection = np.stack([np.stack([ones, zeros, -bx], -1), np.stack([zeros, ones, -by], -1)], -2)  # (H, W, 2, 3)
    normalized_rate = projection @ skew  # (H, W, 2, 3): dn/dt per omega
    basis = _distorted_pixel_rate(calibration, bearings, normalized_rate)
    _BASIS_CACHE[calibration] = basis
    return basis


def translation_flow_basis(calibration: Calibration) -> np.ndarray:
    """(height, width, 2, 3) matrix T per raw pixel: the image velocity of a static point at depth
    Z (m, along the optical axis) for a camera translating at v (m/s, camera frame) is T v / Z
    (px/s): dn/dt = (-v_x + b_x v_z, -v_y + b_y v_z) / Z, then the distortion and focal lengths as
    in ``rotation_flow_basis``. Cached per calibration."""
    key = ("translation", calibration)
    cached = _BASIS_CACHE.get(key)
    if cached is not None:
        return cached
    bearings = calibration.bearing_lut()
    bx, by = bearings[..., 0], bearings[..., 1]
    zeros, ones = np.zeros_like(bx), np.ones_like(bx)
    normalized_rate = np.stack([np.stack([-ones, zeros, bx], -1), np.stack([zeros, -ones, by], -1)], -2)
    basis = _distorted_pixel_rate(calibration, bearings, normalized_rate)
    _BASIS_CACHE[key] = basis
    return basis


def _distorted_pixel_rate(calibration: Calibration, bearings: np.ndarray, normalized_rate: np.ndarray) -> np.ndarray:
    """diag(fx, fy) J_d(n) normalized_rate per pixel (J_d by central differences), read-only."""
    step = 1e-6
    jacobian = np.empty(bearings.shape[:2] + (2, 2))
    for axis in range(2):
        offset = np.zeros(2)
        offset[axis] = step
        jacobian[..., :, axis] = (calibration.distort(bearings + offset) - calibration.distort(bearings - offset)) / (2 * step)
    focal = np.array([calibration.fx, calibration.fy])
    basis = focal[:, None] * (jacobian @ normalized_rate)
    basis.setflags(write=False)
    return basis


def pixel_flow_from_rotation(calibration: Calibration, omega_rad_s, x, y) -> np.ndarray:
    """Image velocity (N, 2) px/s of raw pixels (x, y) for angular velocity ω (3,) rad/s."""
    basis = rotation_flow_basis(calibration)
    return basis[np.asarray(y, dtype=np.int64), np.asarray(x, dtype=np.int64)] @ np.asarray(omega_rad_s, dtype=np.float64)


def patch_flow_from_rotation(calibration: Calibration, grid, events, omega_rad_s, velocity_m_s=None,
                             depth_m=None, binning: int = 1) -> np.ndarray:
    """Ground-truth flow (P, 2) px/s of every patch of ``grid`` (focus_ros.flow.patches.PatchGrid):
    the mean image velocity of its events for a camera rotating at ω rad/s and, when given,
    translating at velocity_m_s (3,) m/s (camera frame) in a static scene of depth depth_m
    ((height, width) m along the optical axis, per raw pixel; NaN/<= 0 where unknown: such events
    are left out); NaN for patches without events. ``binning``: the grid is in pixels binned that
    many per side (the estimator's ``binning``); the velocities stay in raw px/s."""
    event_index, patch = grid.memberships(events.x // binning, events.y // binning, margin=0)
    x, y = events.x[event_index].astype(np.int64), events.y[event_index].astype(np.int64)
    velocity = pixel_flow_from_rotation(calibration, omega_rad_s, x, y)
    if velocity_m_s is not None:
        depth = np.asarray(depth_m, dtype=np.float64)[y, x]
        known = np.isfinite(depth) & (depth > 0)
        translation = translation_flow_basis(calibration)[y, x] @ np.asarray(velocity_m_s, dtype=np.float64)
        velocity = velocity + translation / np.where(known, depth, np.nan)[:, None]
        patch, velocity = patch[known], velocity[known]
    counts = np.bincount(patch, minlength=grid.count).astype(np.float64)
    result = np.full((grid.count, 2), np.nan)
    has = counts > 0
    for axis in range(2):
        sums = np.bincount(patch, weights=velocity[:, axis], minlength=grid.count)
        result[has, axis] = sums[has] / counts[has]
    return result


@dataclass
class FlowErrors:
    """Endpoint errors of the valid patches of several windows, and the counts behind the shares.

    endpoint_px_s: (K,) |v − v_gt| px/s; endpoint_px: (K,) the same times each window's span (px);
    relative: (K,) |v − v_gt| / |v_gt|; confidence: (K,) the estimator's confidence of each;
    valid: patches reported valid with ground truth; candidates: patches with events and ground
    truth (the denominator of the valid share); dense_candidates, dense_valid, dense_normal:
    patches with at least ``DENSE_MIN_EVENTS`` events and ground truth, those of them valid and
    those given normal flow only (aperture: counted apart); normal_relative: (N,) relative error
    of the normal flows' component along their normal, |n·(v − v_gt)| / |n·v_gt|.
    """

    endpoint_px_s: np.ndarray
    endpoint_px: np.ndarray
    valid: int
    candidates: int
    relative: np.ndarray = None
    confidence: np.ndarray = None
    dense_candidates: int = 0
    dense_valid: int = 0
    dense_normal: int = 0
    normal_relative: np.ndarray = None

    def __post_init__(self):
        for name in ("relative", "confidence", "normal_relative"):
            if getattr(self, name) is None:
                setattr(self, name, np.full(len(self.endpoint_px_s), np.nan) if name != "normal_relative"
                        else np.empty(0))

    @property
    def average_endpoint_px_s(self) -> float:
        return float(np.mean(self.endpoint_px_s)) if self.valid else float("nan")

    @property
    def average_endpoint_px(self) -> float:
        return float(np.mean(self.endpoint_px)) if self.valid else float("nan")

    @property
    def outlier_share(self) -> float:
        """Share of valid patches with an endpoint error over OUTLIER_PX px over the window."""
        return float(np.mean(self.endpoint_px > OUTLIER_PX)) if self.valid else float("nan")

    @property
    def valid_share(self) -> float:
        return self.valid / self.candidates if self.candidates else float("nan")

    @property
    def median_relative(self) -> float:
        """Median of |v − v_gt| / |v_gt| over the valid patches (a fraction)."""
        return float(np.median(self.relative)) if self.valid else float("nan")

    @property
    def relative_tail_share(self) -> float:
        """Share of valid patches off by more than RELATIVE_TAIL of the true speed."""
        return float(np.mean(self.relative > RELATIVE_TAIL)) if self.valid else float("nan")

    @property
    def dense_valid_share(self) -> float:
        """Share of the patches with at least DENSE_MIN_EVENTS events given a full flow."""
        return self.dense_valid / self.dense_candidates if self.dense_candidates else float("nan")

    @property
    def dense_normal_share(self) -> float:
        """Share of the patches with at least DENSE_MIN_EVENTS events given a normal flow only."""
        return self.dense_normal / self.dense_candidates if self.dense_candidates else float("nan")


#: a patch off by more than this fraction of its true speed counts in the tail (issue 24's target)
RELATIVE_TAIL = 0.10
#: the density target counts the patches holding at least this many events
DENSE_MIN_EVENTS = 50


def window_errors(estimate, truth_px_s: np.ndarray, min_events: int = 1) -> FlowErrors:
    """Errors of one ``FlowEstimate`` against ground truth (P, 2) px/s (NaN: none); the valid
    share counts the patches with at least ``min_events`` events (default: any event)."""
    has_truth = np.all(np.isfinite(truth_px_s), axis=1)
    candidates = has_truth & (estimate.event_counts >= min_events)
    valid = candidates & estimate.valid
    error = np.linalg.norm(estimate.flow[valid] - truth_px_s[valid], axis=1)
    speed = np.linalg.norm(truth_px_s[valid], axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        relative = error / speed
    dense = has_truth & (estimate.event_counts >= DENSE_MIN_EVENTS)
    normal_flags = getattr(estimate, "normal", None)
    normal = (dense & normal_flags) if normal_flags is not None else np.zeros_like(dense)
    normal_relative = np.empty(0)
    if normal.any():
        direction = estimate.normal_direction[normal]
        measured = np.einsum("ij,ij->i", estimate.normal_flow[normal], direction)
        true = np.einsum("ij,ij->i", truth_px_s[normal], direction)
        with np.errstate(divide="ignore", invalid="ignore"):
            normal_relative = np.abs(measured - true) / np.abs(true)
    return FlowErrors(error, error * estimate.duration_s, int(valid.sum()), int(candidates.sum()), relative,
                      np.asarray(estimate.confidence)[valid], int(dense.sum()), int((dense & estimate.valid).sum()),
                      int(normal.sum()), normal_relative)


def combine(errors: list[FlowErrors]) -> FlowErrors:
    """All windows' errors together."""
    if not errors:
        return FlowErrors(np.empty(0), np.empty(0), 0, 0)
    joined = lambda name: np.concatenate([getattr(e, name) for e in errors])  # noqa: E731
    total = lambda name: sum(getattr(e, name) for e in errors)  # noqa: E731
    return FlowErrors(joined("endpoint_px_s"), joined("endpoint_px"), total("valid"), total("candidates"),
                      joined("relative"), joined("confidence"), total("dense_candidates"), total("dense_valid"),
                      total("dense_normal"), joined("normal_relative"))


# ---------------------------------------------------------------------------- evaluation runs


def duration_window_bounds(t_ns: np.ndarray, duration_ns: int, max_windows: int | None = None) -> np.ndarray:
    """[start, end) event indices (W, 2) of consecutive windows of ``duration_ns`` ns from the first event."""
    if duration_ns <= 0:
        raise ValueError(f"window duration must be positive, got {duration_ns} ns")
    if len(t_ns) == 0:
        return np.empty((0, 2), np.int64)
    edges = np.arange(int(t_ns[0]), int(t_ns[-1]) + 1, duration_ns, dtype=np.int64)
    bounds = np.searchsorted(t_ns, edges, side="left")
    windows = np.stack([bounds[:-1], bounds[1:]], axis=1)
    windows = windows[windows[:, 1] > windows[:, 0]]
    return windows[:max_windows] if max_windows is not None else windows


class EstimatedRotation:
    """A stand-in for ground truth on recordings without any: ω of each window estimated from the
    whole frame (``AngularVelocityEstimator``, the paper's CG with the variance), for a
    consistency check of the patch flows of a rotating camera. ``at(t_ns)`` answers for the
    reference times of the windows given to ``prepare``."""

    source = "full-frame angular velocity estimate (variance)"

    def __init__(self, calibration: Calibration, t_ref: str = "middle"):
        from focus_ros.estimators.angular_velocity import AngularVelocityEstimator, AngularVelocitySettings

        self._estimator = AngularVelocityEstimator(calibration, AngularVelocitySettings(t_ref=t_ref))
        self._omega: dict[int, np.ndarray] = {}

    def prepare(self, events, windows) -> None:
        from focus_ros.events import Events

        for start, end in windows:
            window = Events(events.x[start:end], events.y[start:end], events.t[start:end], events.p[start:end])
            estimate = self._estimator.estimate(window)
            self._omega[estimate.t_ref_ns] = estimate.angular_velocity

    def at(self, t_ns) -> np.ndarray:
        return np.array([self._omega.get(int(t), np.full(3, np.nan)) for t in np.atleast_1d(t_ns)])

    def __getstate__(self):
        """Pickled (to a grid worker, into a fingerprint) without the estimator: ``at`` needs
        only the ω found by ``prepare``."""
        return {"_omega": dict(sorted(self._omega.items()))}


def has_translation_ground_truth(recording) -> bool:
    """True when the recording has camera poses and depth maps (the simulator's six_dof)."""
    return (recording.depth_maps is not None and recording.depth_times is not None and len(recording.depth_times)
            and recording.poses is not None and len(recording.poses) >= 3)


def camera_motion(recording, t_ns: int) -> tuple[np.ndarray, np.ndarray]:
    """(linear velocity (3,) m/s in the camera frame, depth map (height, width) m) at t_ns: the
    velocity from the poses' positions (central differences, interpolated at t_ns, rotated into
    the camera frame by the interpolated orientation), the depth map linearly interpolated
    between the two nearest in time."""
    from scipy.spatial.transform import Rotation, Slerp

    poses = recording.poses
    t_s = (poses.t - poses.t[0]) / 1e9
    query = (t_ns - poses.t[0]) / 1e9
    world_velocity = np.gradient(poses.position, t_s, axis=0)
    velocity = np.array([np.interp(query, t_s, world_velocity[:, axis]) for axis in range(3)])
    orientation = Slerp(t_s, Rotation.from_quat(poses.orientation))(np.clip(query, t_s[0], t_s[-1]))
    camera_velocity = orientation.inv().apply(velocity)
    times = recording.depth_times
    after = int(np.clip(np.searchsorted(times, t_ns), 1, len(times) - 1)) if len(times) > 1 else 0
    if len(times) == 1:
        return camera_velocity, recording.depth_maps[0]
    before = after - 1
    weight = float(np.clip((t_ns - times[before]) / max(times[after] - times[before], 1), 0.0, 1.0))
    depth = (1.0 - weight) * recording.depth_maps[before].astype(np.float64) + weight * recording.depth_maps[after]
    return camera_velocity, depth


@dataclass
class FlowRun:
    """One loss over the windows: errors of every window (``FlowErrors``), t_ref (s) and the
    estimator's CPU time per window (ms, ``time.process_time``: without the waits for a core)."""

    loss: str
    windows: list
    t_ref_s: np.ndarray
    ms_per_window: np.ndarray

    @property
    def errors(self) -> FlowErrors:
        return combine(self.windows)


def run_flow_evaluation(recording, ground_truth, windows: np.ndarray, settings, progress=None,
                        offset: int = 0) -> FlowRun:
    """Estimate patch flow with ``settings`` (``OpticalFlowSettings``) on every window
    ([start, end) event indices, consecutive: warm start; estimated by the flow's pipeline,
    ``focus_ros.pipelines.optical_flow``, as ``focus-ros flow`` does) and compare with the ground truth:
    ω at each t_ref (``focus_ros.evaluation.ground_truth.GroundTruth``) and, when the recording
    has poses and depth maps (the simulator's six_dof), the camera's translation and the depth
    (``camera_motion``). ``recording.events`` are the sequence's events from index ``offset`` on.
    """
    import time

    from focus_ros.events import NANOSECONDS_PER_SECOND, Events
    from focus_ros.pipelines.optical_flow import OpticalFlowPipeline

    calibration = recording.calibration
    pipeline = OpticalFlowPipeline(calibration.width, calibration.height, settings)
    estimator = pipeline.estimator
    events = recording.events
    with_depth = has_translation_ground_truth(recording)
    per_window, t_ref, elapsed = [], [], []
    for start, end in np.asarray(windows) - offset:
        window = Events(*(np.array(getattr(events, name)[start:end]) for name in ("x", "y", "t", "p")))
        began = time.process_time()
        estimate = pipeline.estimate(window)
        elapsed.append((time.process_time() - began) * 1e3)
        omega = ground_truth.at([estimate.t_ref_ns])[0]
        velocity, depth = (camera_motion(recording, estimate.t_ref_ns) if with_depth else (None, None))
        truth = (patch_flow_from_rotation(calibration, estimator.grid, window, omega, velocity, depth,
                                          estimator.binning)
                 if np.all(np.isfinite(omega)) else np.full((estimator.grid.count, 2), np.nan))
        per_window.append(window_errors(estimate, truth))
        t_ref.append(estimate.t_ref_ns / NANOSECONDS_PER_SECOND)
        if progress is not None:
            progress.update(1)
    return FlowRun(settings.loss, per_window, np.asarray(t_ref), np.asarray(elapsed))


def flow_job(data, settings, windows: np.ndarray, ground_truth) -> FlowRun:
    """A grid job (in a worker): :func:`run_flow_evaluation` of one loss's settings on the
    delivered sequence data."""
    return run_flow_evaluation(data.recording, ground_truth, windows, settings, offset=data.offset)


def flow_grid_jobs(settings_list: list, recording, ground_truth, windows: np.ndarray, output, sequence: str) -> list:
    """One grid job per loss (``OpticalFlowSettings``) of the sequence named ``sequence``, keyed
    ``<sequence>/optical_flow/<loss>``; their results (``FlowRun``) kept in ``output``/jobs/
    (a rerun with the same settings, windows, events and ground truth resumes from them)."""
    from pathlib import Path

    from focus_ros.evaluation.angular_velocity import event_summary
    from focus_ros.evaluation.grid import GridJob, PickleStore, fingerprint

    store = PickleStore(Path(output) / "jobs")
    summary = event_summary(recording.events)
    return [GridJob(f"{sequence}/optical_flow/{settings.loss}", sequence, flow_job,
                    {"settings": settings, "windows": windows, "ground_truth": ground_truth},
                    fingerprint("optical_flow", settings, windows, summary, ground_truth,
                                has_translation_ground_truth(recording)), store)
            for settings in settings_list]


def markdown_flow_table(runs: list[FlowRun]) -> str:
    """One row per loss: average endpoint error (px over the window, px/s), share over 3 px, median
    relative error and share over 10 % of the speed, share valid (of the patches with events, and of
    those with at least DENSE_MIN_EVENTS: full and normal flow), median CPU ms per window; the best
    average endpoint error in bold."""
    from focus_ros.evaluation.tables import _cell

    header = ("| loss | AEE (px over window) | AEE (px/s) | > 3 px (%) | median rel. (%) | > 10 % (%) | valid (%) | "
              f"valid of >= {DENSE_MIN_EVENTS} events (%) | normal only (%) | CPU ms/window (median) |\n"
              "|---|---|---|---|---|---|---|---|---|---|\n")
    best_px = min((run.errors.average_endpoint_px for run in runs if run.errors.valid), default=None)
    lines = []
    for run in runs:
        errors = run.errors
        aee = _cell(errors.average_endpoint_px, 3)
        if best_px is not None and errors.valid and errors.average_endpoint_px == best_px:
            aee = f"**{aee}**"
        lines.append(f"| {run.loss} | {aee} | {_cell(errors.average_endpoint_px_s, 1)} | "
                     f"{_cell(100 * errors.outlier_share, 2)} | {_cell(100 * errors.median_relative, 2)} | "
                     f"{_cell(100 * errors.relative_tail_share, 1)} | {_cell(100 * errors.valid_share, 1)} | "
                     f"{_cell(100 * errors.dense_valid_share, 1)} | {_cell(100 * errors.dense_normal_share, 1)} | "
                     f"{_cell(float(np.median(run.ms_per_window)) if len(run.ms_per_window) else float('nan'), 1)} |")
    return header + "\n".join(lines) + "\n"


def write_flow_csv(runs: list[FlowRun], path) -> None:
    import csv

    from focus_ros.evaluation.tables import _number

    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["loss", "windows", "valid_patches", "candidate_patches", "aee_px", "aee_px_s",
                         "outlier_share", "median_relative", "relative_tail_share", "valid_share",
                         "dense_valid_share", "dense_normal_share", "median_ms_per_window"])
        for run in runs:
            errors = run.errors
            writer.writerow([run.loss, len(run.windows), errors.valid, errors.candidates,
                             _number(errors.average_endpoint_px), _number(errors.average_endpoint_px_s),
                             _number(errors.outlier_share), _number(errors.median_relative),
                             _number(errors.relative_tail_share), _number(errors.valid_share),
                             _number(errors.dense_valid_share), _number(errors.dense_normal_share),
                             _number(float(np.median(run.ms_per_window)) if len(run.ms_per_window) else None)])


def plot_flow_errors(runs: list[FlowRun], path, title: str = ""):
    """Average endpoint error (px over the window) per window over time, one line per loss."""
    from focus_ros.evaluation.plots import _save, plt

    figure, axis = plt.subplots(figsize=(8, 3.5))
    for run in runs:
        average = [e.average_endpoint_px for e in run.windows]
        axis.plot(run.t_ref_s, average, linewidth=1.0, label=run.loss)
    axis.axhline(OUTLIER_PX, color="black", linestyle=":", linewidth=0.8)
    axis.set_xlabel("t_ref [s]")
    axis.set_ylabel("average endpoint error [px over window]")
    axis.set_yscale("log")
    axis.grid(alpha=0.3)
    axis.legend(fontsize=7)
    axis.set_title(title, fontsize=9)
    figure.tight_layout()
    return _save(figure, path)


def patch_landscape(window, grid, loss: str, use_polarity: bool, patch: int, center_px_s, offsets_px_s,
                    t_ref: str = "middle") -> np.ndarray:
    """Focus score (sign * loss, higher is sharper) of one patch over the flows
    center + (offset_x, offset_y) px/s: (len(offsets) rows for vy, len(offsets) columns for vx).
    The IWE is the estimator's (default blur of the loss, its loss options)."""
    from focus_ros.estimators.optical_flow import FLOW_LOSS_OPTIONS, default_blur_sigma_px, reference_time_ns
    from focus_ros.losses import get_loss
    from focus_ros.flow.patches import PatchObjective

    loss_object = get_loss(loss)
    objective = PatchObjective(grid, loss_object, use_polarity, default_blur_sigma_px(loss_object), FLOW_LOSS_OPTIONS)
    objective.set_events(window, reference_time_ns(window, t_ref))
    active = np.zeros(grid.count, dtype=bool)
    active[patch] = True
    flows = np.zeros((grid.count, 2))
    offsets = np.asarray(offsets_px_s, dtype=np.float64)
    scores = np.empty((len(offsets), len(offsets)))
    for row, offset_y in enumerate(offsets):
        for column, offset_x in enumerate(offsets):
            flows[patch] = (center_px_s[0] + offset_x, center_px_s[1] + offset_y)
            scores[row, column] = loss_object.sign * objective.evaluate(flows, active, with_gradient=False).values[patch]
    return scores
