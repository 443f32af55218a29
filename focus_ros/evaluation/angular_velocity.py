"""Every (loss, polarity) job of the angular velocity over the same windows, resumably.

1. ``build_windows``: window [start, end) event indices, built once for all jobs
   (consecutive windows of N events within a time range, every K-th, at most M).
2. ``grid_jobs``: the jobs as :class:`focus_ros.evaluation.grid.GridJob` for
   :func:`focus_ros.evaluation.grid.run_grid` (a local process pool or Ray tasks): each job
   runs the warm-started estimator over all windows in order, times value+gradient
   evaluations (``compute_job``) and returns the files of its result; the driver writes
   ``<out>/estimates/<loss>__<polarity>.json`` then ``.csv`` atomically (``write_job_files``).
   A job whose CSV exists with the same fingerprint (same windows, settings and events) is
   skipped on resume; one with another fingerprint is refused (no mixing of runs in a folder).
3. ``read_job_result``: a finished job's estimates back as arrays.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import math
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from focus_ros.camera import Calibration
from focus_ros.events import NANOSECONDS_PER_SECOND, Events
from focus_ros.optimize import OptimizerSettings
from focus_ros.evaluation.timing import median_microseconds

POLARITY_MODES = ("without", "with")
ESTIMATE_COLUMNS = ("window", "start_index", "end_index", "t_ref", "wx", "wy", "wz", "iterations",
                    "evaluations", "score", "degenerate")
EVENT_FIELDS = ("x", "y", "t", "p")


@dataclass(frozen=True)
class EstimatorOptions:
    """Estimator settings shared by all jobs (see AngularVelocitySettings)."""

    kernel: str = "bilinear"
    sigma: float = 1.0
    t_ref: str = "middle"
    warp: str = "exact"
    optimizer: str = "cg"
    blur_sigma_px: float | None = None  # None: each loss's default (default_blur_sigma_px)
    warm_start: str = "previous"
    value_tolerance: float = OptimizerSettings().value_tolerance


@dataclass(frozen=True)
class Job:
    """One (loss, polarity) combination; status "ok" or why it cannot run ("degenerate",
    "unsupported") with the reason."""

    loss: str
    polarity: str
    status: str = "ok"
    reason: str = ""

    @property
    def name(self) -> str:
        return f"{self.loss}__{self.polarity}"


@dataclass
class JobResult:
    """A finished job: t_ref (ns, W), angular_velocity (W, 3) rad/s (NaN when degenerate),
    degenerate (W,) bool, and timings in µs (median value+gradient of the objective; loss alone)."""

    job: Job
    t_ref_ns: np.ndarray
    angular_velocity: np.ndarray
    degenerate: np.ndarray
    us_per_evaluation: float
    us_per_loss_evaluation: float
    elapsed_s: float = float("nan")


def plan_jobs(losses, polarity_modes=POLARITY_MODES) -> list[Job]:
    """Jobs for each loss and polarity mode, marking the combinations the paper leaves as '-':
    MAV / local MAV without polarity, mean timestamp with polarity (degenerate), and losses
    defined only on count images with polarity (unsupported) unless the objective splits them
    per polarity (``focus_ros.objective.supported_polarity_modes``: the areas)."""
    from focus_ros.losses import LOSSES, get_loss
    from focus_ros.objective import supported_polarity_modes

    jobs = []
    for name in losses:
        if name not in LOSSES:
            raise ValueError(f"unknown loss '{name}': choose from {', '.join(LOSSES)}")
        loss = get_loss(name)
        for mode in polarity_modes:
            if mode not in POLARITY_MODES:
                raise ValueError(f"unknown polarity mode '{mode}': choose with, without or both")
            if mode == "without" and loss.degenerate_without_polarity:
                jobs.append(Job(name, mode, "degenerate", "without polarity the IWE sums to the event count"))
            elif mode == "with" and loss.uses_timestamps:
                jobs.append(Job(name, mode, "degenerate", "the mean timestamp uses the count image only"))
            elif mode not in supported_polarity_modes(loss):
                modes = supported_polarity_modes(loss)
                jobs.append(Job(name, mode, "unsupported", f"loss works only {' or '.join(modes)} polarity"))
            else:
                jobs.append(Job(name, mode))
    return jobs


def build_windows(t_ns: np.ndarray, window_events: int, every: int = 1, max_windows: int | None = None,
                  time_range_ns: tuple[int, int] | None = None) -> np.ndarray:
    """[start, end) event indices (int64, shape (W, 2)) of consecutive windows of window_events
    events inside time_range_ns = (start, end) ns (default: all events), keeping every
    every-th window and at most max_windows."""
    if window_events <= 0:
        raise ValueError(f"window size must be a positive number of events, got {window_events}")
    if every <= 0:
        raise ValueError(f"--every must be a positive number of windows, got {every}")
    if max_windows is not None and max_windows <= 0:
        raise ValueError(f"--max-windows must be positive, got {max_windows}")
    first, last = 0, len(t_ns)
    if time_range_ns is not None:
        start_ns, end_ns = time_range_ns
        if not end_ns > start_ns:
            raise ValueError(f"time range end must follow its start, got [{start_ns / 1e9}, {end_ns / 1e9}] s")
        first = int(np.searchsorted(t_ns, start_ns, side="left"))
        last = int(np.searchsorted(t_ns, end_ns, side="left"))
    starts = np.arange(first, last - window_events + 1, window_events, dtype=np.int64)[::every]
    if max_windows is not None:
        starts = starts[:max_windows]
    return np.stack([starts, starts + window_events], axis=1) if len(starts) else np.empty((0, 2), np.int64)


# ---------------------------------------------------------------------------- event summary


def event_summary(events: Events) -> dict:
    """Count and first/last times (ns) of the events: part of every job's fingerprint."""
    return {"count": len(events), "first_ns": int(events.t[0]) if len(events) else 0,
            "last_ns": int(events.t[-1]) if len(events) else 0}


# ---------------------------------------------------------------------------- one job


def job_fingerprint(job: Job, windows: np.ndarray, options: EstimatorOptions, event_summary: dict) -> str:
    """A hash of what determines a job's result: loss, polarity, windows, estimator options, events."""
    digest = hashlib.sha256()
    digest.update(json.dumps([job.loss, job.polarity, asdict(options), event_summary], sort_keys=True).encode())
    digest.update(np.ascontiguousarray(windows, dtype=np.int64).tobytes())
    return digest.hexdigest()[:16]


def result_paths(output: Path, job: Job) -> tuple[Path, Path]:
    """(estimates CSV, metadata JSON) of a job in the output folder."""
    folder = Path(output) / "estimates"
    return folder / f"{job.name}.csv", folder / f"{job.name}.json"


def is_finished(output: Path, job: Job, fingerprint: str) -> bool:
    """True when the job's CSV exists with this fingerprint; ValueError when it exists for
    different windows or settings (refuse to mix runs in one folder)."""
    csv_path, meta_path = result_paths(output, job)
    if not csv_path.is_file():
        return False
    stored = json.loads(meta_path.read_text()).get("fingerprint") if meta_path.is_file() else None
    if stored != fingerprint:
        raise ValueError(f"{csv_path} holds results of a different run (other windows or settings): "
                         "use another --output folder or delete it")
    return True


def _time_evaluations(estimator, events: Events, windows: np.ndarray, omegas: np.ndarray,
                      timing_windows: int, repeats: int) -> tuple[float, float]:
    """Median µs of one value+gradient evaluation of the objective at the estimate, and of the
    loss alone there (value and image gradients, through the objective's own loss step: both
    polarity planes when the loss is split per polarity, without the blur of its gradient),
    over up to timing_windows windows spread over the sequence."""
    from focus_ros.estimators.angular_velocity import reference_time_ns

    usable = [i for i in range(len(windows)) if np.all(np.isfinite(omegas[i]))]
    if not usable or timing_windows <= 0:
        return float("nan"), float("nan")
    picks = [usable[int(k)] for k in np.linspace(0, len(usable) - 1, min(timing_windows, len(usable)))]
    objective = estimator.objective
    whole, alone = [], []
    for index in picks:
        start, end = windows[index]
        window = _window_events(events, start, end)
        objective.set_events(window, reference_time_ns(window, estimator.settings.t_ref), int(window.t[0]))
        omega = omegas[index]
        whole.append(median_microseconds(lambda: objective.evaluate(omega), repeats, warmup=1))
        objective.evaluate(omega, with_gradient=False)  # the IWE planes at the estimate
        alone.append(median_microseconds(objective.evaluate_loss, repeats, warmup=0))
    return float(np.median(whole)), float(np.median(alone))


def _window_events(events: Events, start: int, end: int) -> Events:
    return Events(*(np.array(getattr(events, name)[start:end]) for name in EVENT_FIELDS))


@dataclass(frozen=True)
class JobFiles:
    """A finished job's result as the text of its two files: metadata JSON and estimates CSV."""

    meta_json: str
    estimates_csv: str


def compute_job(job: Job, events: Events, calibration: Calibration, windows: np.ndarray, options: EstimatorOptions,
                fingerprint: str, progress: Callable[[int], None] | None = None, timing_windows: int = 3,
                timing_repeats: int = 15, offset: int = 0) -> JobFiles:
    """Estimate every window in order with warm start and time evaluations: the job's files.
    ``events`` are the sequence's events from index ``offset`` on (windows index the sequence)."""
    from focus_ros.estimators.angular_velocity import AngularVelocityEstimator, AngularVelocitySettings

    settings = AngularVelocitySettings(loss=job.loss, use_polarity=job.polarity == "with", kernel=options.kernel,
                                       sigma=options.sigma, t_ref=options.t_ref, warp=options.warp,
                                       optimizer=options.optimizer, blur_sigma_px=options.blur_sigma_px,
                                       warm_start=options.warm_start,
                                       optimizer_settings=OptimizerSettings(value_tolerance=options.value_tolerance))
    estimator = AngularVelocityEstimator(calibration, settings)
    started = time.perf_counter()
    records, omegas = [], np.full((len(windows), 3), np.nan)
    for index, (start, end) in enumerate(windows):
        estimate = estimator.estimate(_window_events(events, start - offset, end - offset))
        omegas[index] = estimate.angular_velocity
        records.append([index, int(start), int(end), f"{estimate.t_ref_ns / NANOSECONDS_PER_SECOND:.9f}",
                        *(f"{v:.9g}" if math.isfinite(v) else "nan" for v in estimate.angular_velocity),
                        estimate.iterations, estimate.evaluations, f"{estimate.score:.9g}",
                        int(estimate.degenerate)])
        if progress is not None:
            progress(1)
    elapsed = time.perf_counter() - started
    us_whole, us_loss = _time_evaluations(estimator, events, windows - offset, omegas, timing_windows,
                                          timing_repeats)
    meta = json.dumps({
        "loss": job.loss, "polarity": job.polarity, "fingerprint": fingerprint, "windows": len(windows),
        "us_per_evaluation": us_whole, "us_per_loss_evaluation": us_loss, "elapsed_s": elapsed,
        "estimator": asdict(options)}, indent=1)
    text = io.StringIO(newline="")
    writer = csv.writer(text)
    writer.writerow(ESTIMATE_COLUMNS)
    writer.writerows(records)
    return JobFiles(meta, text.getvalue())


def write_job_files(output: Path, job: Job, files: JobFiles) -> Path:
    """Write a job's JSON and then its CSV (the completion marker), each atomically."""
    csv_path, meta_path = result_paths(output, job)
    csv_path.parent.mkdir(parents=True, exist_ok=True)
    _write_atomically(meta_path, files.meta_json)
    _write_atomically(csv_path, files.estimates_csv)
    return csv_path


def run_job(job: Job, events: Events, calibration: Calibration, windows: np.ndarray, options: EstimatorOptions,
            output: Path, fingerprint: str, progress: Callable[[int], None] | None = None,
            timing_windows: int = 3, timing_repeats: int = 15) -> Path:
    """:func:`compute_job` in this process, then :func:`write_job_files`: the CSV's path."""
    files = compute_job(job, events, calibration, windows, options, fingerprint, progress, timing_windows,
                        timing_repeats)
    return write_job_files(output, job, files)


def _write_atomically(path: Path, text: str) -> None:
    temporary = path.with_name(path.name + ".tmp")
    with open(temporary, "w", newline="") as handle:
        handle.write(text)
    os.replace(temporary, path)


def read_job_result(output: Path, job: Job) -> JobResult:
    """A finished job's estimates and timings (ValueError naming the file when malformed)."""
    csv_path, meta_path = result_paths(output, job)
    meta = json.loads(meta_path.read_text())
    with open(csv_path, newline="") as handle:
        reader = csv.DictReader(handle)
        if tuple(reader.fieldnames or ()) != ESTIMATE_COLUMNS:
            raise ValueError(f"{csv_path}: expected columns {','.join(ESTIMATE_COLUMNS)}")
        rows = list(reader)
    try:
        t_ref_ns = np.array([round(float(r["t_ref"]) * NANOSECONDS_PER_SECOND) for r in rows], dtype=np.int64)
        omega = np.array([[float(r["wx"]), float(r["wy"]), float(r["wz"])] for r in rows]).reshape(-1, 3)
        degenerate = np.array([r["degenerate"] == "1" for r in rows], dtype=bool)
    except (TypeError, ValueError) as error:
        raise ValueError(f"{csv_path}: malformed row ({error})") from None
    return JobResult(job, t_ref_ns, omega, degenerate, float(meta.get("us_per_evaluation", math.nan)),
                     float(meta.get("us_per_loss_evaluation", math.nan)), float(meta.get("elapsed_s", math.nan)))


# ---------------------------------------------------------------------------- the grid


def estimate_job(data, job: Job, windows: np.ndarray, options: EstimatorOptions, fingerprint: str,
                 timing_windows: int = 3) -> JobFiles:
    """A grid job (in a worker): :func:`compute_job` on the delivered sequence data."""
    return compute_job(job, data.events, data.recording.calibration, windows, options, fingerprint,
                       timing_windows=timing_windows, offset=data.offset)


class EstimateStore:
    """The grid's store of angular-velocity jobs: ``<output>/estimates/<loss>__<polarity>.csv``
    and ``.json`` (the format above); ``load`` gives a :class:`JobResult`."""

    def __init__(self, output: Path):
        self.output = Path(output)

    def load(self, grid_job) -> JobResult | None:
        job = grid_job.arguments["job"]
        return read_job_result(self.output, job) if is_finished(self.output, job, grid_job.fingerprint) else None

    def save(self, grid_job, files: JobFiles) -> None:
        write_job_files(self.output, grid_job.arguments["job"], files)


def grid_jobs(jobs: list[Job], events: Events, windows: np.ndarray, options: EstimatorOptions, output: Path,
              sequence: str, timing_windows: int = 3) -> list:
    """The runnable jobs (status "ok") as grid jobs of the sequence named ``sequence``, keyed
    ``<sequence>/angular_velocity/<loss>__<polarity>``, their results in ``output``."""
    from focus_ros.evaluation.grid import GridJob

    summary = event_summary(events)
    store = EstimateStore(output)
    result = []
    for job in jobs:
        if job.status != "ok":
            continue
        fingerprint = job_fingerprint(job, windows, options, summary)
        arguments = {"job": job, "windows": windows, "options": options, "fingerprint": fingerprint,
                     "timing_windows": timing_windows}
        result.append(GridJob(f"{sequence}/angular_velocity/{job.name}", sequence, estimate_job, arguments,
                              fingerprint, store))
    return result
