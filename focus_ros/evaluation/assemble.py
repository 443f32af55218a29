"""From finished jobs to table rows: align the ground truth, compare at t_ref, compute statistics.

With ground truth: the alignment check runs on the per-window median of all losses'
estimates (robust to a few bad losses), warns when the data's convention disagrees, and
is applied when asked (``align="auto"``). Without ground truth (single real windows), the
reference is a given ω (e.g. a published estimate) or, failing that, the per-window
median over the losses, so that the "errors" measure agreement.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from focus_ros.evaluation.alignment import Alignment, apply_alignment, estimate_alignment
from focus_ros.evaluation.ground_truth import GroundTruth
from focus_ros.evaluation.metrics import error_statistics
from focus_ros.evaluation.angular_velocity import Job, JobResult
from focus_ros.evaluation.tables import TableRow

ALIGN_CHOICES = ("auto", "none")


@dataclass
class Comparison:
    """What the estimates were compared against: t_ref (ns, W), truth (W, 3) rad/s at t_ref,
    peak |ω| component (deg/s), a description, and the alignment found (None without ground truth)."""

    t_ref_ns: np.ndarray
    truth: np.ndarray
    peak_deg_s: float
    description: str
    alignment: Alignment | None = None


def consensus_estimate(results: list[JobResult]) -> np.ndarray:
    """Per-window median (W, 3) rad/s of all results' estimates (NaN where none has one)."""
    stack = np.stack([r.angular_velocity for r in results])
    with np.errstate(all="ignore"):
        import warnings
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            return np.nanmedian(stack, axis=0)


def common_reference_times(results: list[JobResult]) -> np.ndarray:
    """The windows' t_ref (ns), checked to be the same for every result."""
    t_ref = results[0].t_ref_ns
    for result in results[1:]:
        if len(result.t_ref_ns) != len(t_ref) or np.abs(result.t_ref_ns - t_ref).max(initial=0) > 1000:
            raise ValueError(f"results of {result.job.name} use other windows than {results[0].job.name}")
    return t_ref


def compare_with_ground_truth(results: list[JobResult], ground_truth: GroundTruth, align: str = "none",
                              max_lag_ns: int = 50_000_000) -> Comparison:
    """Ground truth at each t_ref, after the sign/offset check (applied when align == "auto")."""
    if align not in ALIGN_CHOICES:
        raise ValueError(f"unknown --align '{align}': choose auto or none")
    t_ref = common_reference_times(results)
    alignment = estimate_alignment(t_ref, consensus_estimate(results), ground_truth, max_lag_ns=max_lag_ns)
    description = ground_truth.source
    if align == "auto" and alignment.reliable:
        ground_truth = apply_alignment(ground_truth, alignment)
        description += (f", aligned: signs {tuple(int(s) for s in alignment.signs)}, "
                        f"offset {alignment.offset_ns / 1e6:+.2f} ms")
    peak = ground_truth.peak_deg_s(int(t_ref.min()), int(t_ref.max())) if len(t_ref) else float("nan")
    return Comparison(t_ref, ground_truth.at(t_ref), peak, description, alignment)


def compare_with_reference(results: list[JobResult], reference_rad_s=None) -> Comparison:
    """Without ground truth: a fixed reference ω (rad/s) for every window, or the per-window
    median over the losses."""
    t_ref = common_reference_times(results)
    if reference_rad_s is not None:
        reference = np.asarray(reference_rad_s, dtype=np.float64).reshape(3)
        truth = np.tile(reference, (len(t_ref), 1))
        description = f"reference ω = ({', '.join(f'{v:.3f}' for v in reference)}) rad/s"
    else:
        truth = consensus_estimate(results)
        description = "per-window median of all losses' estimates (agreement, not accuracy)"
    with np.errstate(all="ignore"):
        peak = float(np.rad2deg(np.nanmax(np.abs(truth)))) if np.isfinite(truth).any() else float("nan")
    return Comparison(t_ref, truth, peak, description)


def table_rows(jobs: list[Job], results: dict[str, JobResult], comparison: Comparison | None) -> list[TableRow]:
    """One row per job, in the jobs' order; '-' rows for jobs that cannot run or have no result."""
    from focus_ros.losses import get_loss

    rows = []
    for job in jobs:
        title = get_loss(job.loss).title
        result = results.get(job.name)
        if job.status != "ok" or result is None:
            rows.append(TableRow(job.loss, title, job.polarity, job.status if job.status != "ok" else "missing"))
            continue
        statistics = None
        if comparison is not None:
            statistics = error_statistics(result.angular_velocity, comparison.truth, comparison.peak_deg_s)
        with np.errstate(all="ignore"):
            import warnings
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                mean_estimate = np.rad2deg(np.nanmean(result.angular_velocity, axis=0))
        rows.append(TableRow(job.loss, title, job.polarity, "ok", statistics, comparison.peak_deg_s
                             if comparison is not None else float("nan"), result.us_per_evaluation,
                             result.us_per_loss_evaluation, mean_estimate, int(result.degenerate.sum())))
    return rows
