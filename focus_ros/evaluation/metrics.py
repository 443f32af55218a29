"""Angular-velocity error statistics in deg/s, as in the paper's Tables 2 and 6-7.

For the windows w = 1..W with an estimate, the error is e_w = ω_est(t_ref,w) − ω_gt(t_ref,w)
(converted to deg/s). Reported, per (loss, polarity):

- per-axis RMS: sqrt(mean_w e_w,a²) for a = x, y, z (the ω_x, ω_y, ω_z columns);
- μ, σ: mean and standard deviation of all 3W error components pooled;
- RMS: sqrt(mean of all 3W squared components) (so RMS² = μ² + σ² with σ the
  population standard deviation);
- RMS as a percentage of the peak |ω| component of the ground truth over the evaluated
  time span (the paper's "2.7 % of |ω_max| = 670 deg/s");
- the distribution of the per-window error |e_w| (norm of the 3-vector): median, 90th
  percentile, maximum, and the windows above 5 times the median (one wrong window hides in
  an RMS).

Windows whose estimate is NaN (degenerate) or whose ground truth is NaN (outside its
span) are left out and counted.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class ErrorStatistics:
    """Error statistics in deg/s; windows: windows given; used: windows with estimate and truth."""

    rms_per_axis: np.ndarray
    mean: float
    std: float
    rms: float
    rms_percent_of_peak: float
    windows: int
    used: int
    #: per-window error norms |e_w| (deg/s): median, 90th percentile, maximum
    median_norm: float = float("nan")
    p90_norm: float = float("nan")
    max_norm: float = float("nan")
    #: windows with |e_w| above 5 times the median
    above_5x_median: int = 0


def errors_deg_s(estimates_rad_s, truth_rad_s) -> np.ndarray:
    """ω_est − ω_gt in deg/s, shape (W, 3); NaN where either is NaN."""
    estimates = np.asarray(estimates_rad_s, dtype=np.float64)
    truth = np.asarray(truth_rad_s, dtype=np.float64)
    if estimates.shape != truth.shape or estimates.ndim != 2 or estimates.shape[1] != 3:
        raise ValueError(f"estimates and ground truth must both have shape (W, 3), "
                         f"got {estimates.shape} and {truth.shape}")
    return np.rad2deg(estimates - truth)


def error_statistics(estimates_rad_s, truth_rad_s, peak_deg_s: float) -> ErrorStatistics:
    """Statistics of ω_est − ω_gt (module docstring) over windows where both are finite;
    peak_deg_s: the sequence's peak |ω| component (deg/s) for the percentage."""
    errors = errors_deg_s(estimates_rad_s, truth_rad_s)
    usable = np.all(np.isfinite(errors), axis=1)
    used = errors[usable]
    if len(used) == 0:
        nan = float("nan")
        return ErrorStatistics(np.full(3, np.nan), nan, nan, nan, nan, len(errors), 0)
    pooled = used.ravel()
    rms = float(np.sqrt(np.mean(pooled ** 2)))
    percent = 100.0 * rms / peak_deg_s if peak_deg_s and np.isfinite(peak_deg_s) else float("nan")
    norms = np.linalg.norm(used, axis=1)
    median = float(np.median(norms))
    return ErrorStatistics(rms_per_axis=np.sqrt(np.mean(used ** 2, axis=0)), mean=float(pooled.mean()),
                           std=float(pooled.std()), rms=rms, rms_percent_of_peak=percent,
                           windows=len(errors), used=int(usable.sum()), median_norm=median,
                           p90_norm=float(np.percentile(norms, 90)), max_norm=float(norms.max()),
                           above_5x_median=int((norms > 5 * median).sum()))
