"""Check of the ground truth's axis signs and time offset against the estimates.

The IMU of the Event Camera Dataset's rotation bags predates a driver fix of its axes,
and gyro and events may be offset in time. Before trusting RMS numbers we look for the
per-axis sign s_a and the common time offset d that make the ground truth best match the
estimates, over a lag range (default ±50 ms, 0.25-ms steps):

    minimise over d, s:  Σ_w Σ_a (ω_est,a(t_w) − s_a ω_gt,a(t_w + d))²,

i.e. maximise the cross-correlation Σ_w ω_est,a(t_w) s_a ω_gt,a(t_w + d) corrected for the
energy of the shifted ground truth; for each d the best s_a is the sign of that
cross-correlation. (A plain normalised correlation would not see a shift of a slowly,
linearly varying signal.) A flipped axis or an offset beyond a tolerance (default 3 ms) is
reported in one line; ``apply_alignment`` returns the corrected ground truth:
ω'(t) = s ⊙ ω_gt(t + d). An axis whose Pearson correlation with the estimates stays below
0.5 (too little motion on it) keeps its sign.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from focus_ros.evaluation.ground_truth import GroundTruth

AXES = ("x", "y", "z")
DEFAULT_MAX_LAG_NS = 50_000_000
DEFAULT_LAG_STEP_NS = 250_000
DEFAULT_OFFSET_TOLERANCE_NS = 3_000_000
#: below this |correlation| an axis carries too little signal to decide its sign
MIN_SIGN_CORRELATION = 0.5
MIN_WINDOWS = 8


@dataclass(frozen=True)
class Alignment:
    """Best match of the ground truth to the estimates.

    signs: (3,) ±1, multiply the ground truth's axes by these; offset_ns: compare the
    estimate at t with the ground truth at t + offset_ns; correlation: (3,) signed
    correlation per axis at that offset (before flipping); windows: how many windows were
    used; reliable: False when too few windows or too little motion to decide.
    """

    signs: np.ndarray = field(default_factory=lambda: np.ones(3))
    offset_ns: int = 0
    correlation: np.ndarray = field(default_factory=lambda: np.full(3, np.nan))
    windows: int = 0
    reliable: bool = False
    note: str = ""

    def flipped_axes(self) -> list[str]:
        return [AXES[axis] for axis in range(3) if self.signs[axis] < 0]

    def disagrees(self, offset_tolerance_ns: int = DEFAULT_OFFSET_TOLERANCE_NS) -> bool:
        """True when an axis is flipped or the offset exceeds the tolerance (ns)."""
        return self.reliable and (bool(self.flipped_axes()) or abs(self.offset_ns) > offset_tolerance_ns)

    def describe(self) -> str:
        """One line: signs, offset (ms) and correlations."""
        if not self.reliable:
            return f"alignment check inconclusive: {self.note}"
        correlations = ", ".join(f"{axis} {value:+.3f}" for axis, value in zip(AXES, self.correlation))
        flipped = ", ".join(self.flipped_axes()) or "none"
        return (f"best match: flipped axes {flipped}, time offset {self.offset_ns / 1e6:+.2f} ms "
                f"(correlation {correlations}, {self.windows} windows)")

    def warning(self, offset_tolerance_ns: int = DEFAULT_OFFSET_TOLERANCE_NS, applied: bool = False) -> str | None:
        """A one-line warning when the data's convention disagrees with the assumed one, else None;
        applied: the correction was applied (says so instead of suggesting --align auto)."""
        if not self.disagrees(offset_tolerance_ns):
            return None
        problems = []
        if self.flipped_axes():
            problems.append("ground-truth axis " + ", ".join(self.flipped_axes()) + " has the opposite sign")
        if abs(self.offset_ns) > offset_tolerance_ns:
            problems.append(f"ground truth is offset by {self.offset_ns / 1e6:+.2f} ms "
                            f"(tolerance {offset_tolerance_ns / 1e6:g} ms)")
        return ("warning: the ground truth disagrees with the estimates' convention: " + "; ".join(problems)
                + ("; corrected (--align auto)" if applied else " (use --align auto to correct it)"))

    def as_dict(self) -> dict:
        return {"signs": [int(s) for s in self.signs], "offset_ms": self.offset_ns / 1e6,
                "correlation": [None if not np.isfinite(c) else round(float(c), 6) for c in self.correlation],
                "windows": self.windows, "reliable": self.reliable, "note": self.note}


def _correlations(estimates: np.ndarray, truth: np.ndarray) -> np.ndarray:
    """Pearson correlation per axis of two (N, 3) arrays (NaN where an axis is constant)."""
    centered_estimates = estimates - estimates.mean(axis=0)
    centered_truth = truth - truth.mean(axis=0)
    numerator = (centered_estimates * centered_truth).sum(axis=0)
    denominator = np.sqrt((centered_estimates ** 2).sum(axis=0) * (centered_truth ** 2).sum(axis=0))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(denominator > 0, numerator / denominator, np.nan)


def estimate_alignment(t_ref_ns, estimates, ground_truth: GroundTruth,
                       max_lag_ns: int = DEFAULT_MAX_LAG_NS, lag_step_ns: int = DEFAULT_LAG_STEP_NS) -> Alignment:
    """Per-axis signs and the common time offset (ns, within ±max_lag_ns, on a lag_step_ns grid)
    that best match ground_truth to the estimates (N, 3) rad/s at times t_ref_ns (ns).
    Windows with a NaN estimate are ignored."""
    t_ref_ns = np.asarray(t_ref_ns, dtype=np.int64)
    estimates = np.asarray(estimates, dtype=np.float64)
    if estimates.shape != (len(t_ref_ns), 3):
        raise ValueError(f"estimates must have shape ({len(t_ref_ns)}, 3), got {estimates.shape}")
    finite = np.all(np.isfinite(estimates), axis=1)
    if finite.sum() < MIN_WINDOWS:
        return Alignment(windows=int(finite.sum()),
                         note=f"{int(finite.sum())} windows with an estimate, need at least {MIN_WINDOWS}")
    if lag_step_ns <= 0 or max_lag_ns < 0:
        raise ValueError(f"lag step must be positive and lag range non-negative, got {lag_step_ns}, {max_lag_ns} ns")
    steps = int(max_lag_ns // lag_step_ns)
    lags = np.arange(-steps, steps + 1, dtype=np.int64) * np.int64(lag_step_ns)
    times, values = t_ref_ns[finite], estimates[finite]
    # compare every lag on the same windows: those the ground truth covers at every lag
    covered = (times - max_lag_ns >= ground_truth.t[0]) & (times + max_lag_ns <= ground_truth.t[-1])
    if covered.sum() >= MIN_WINDOWS:
        times, values = times[covered], values[covered]
    best = (np.inf, 0, np.ones(3), 0)
    for lag in lags:
        truth = ground_truth.at(times + lag)
        usable = np.all(np.isfinite(truth), axis=1)
        if usable.sum() < MIN_WINDOWS:
            continue
        signs = np.where((values[usable] * truth[usable]).sum(axis=0) < 0, -1.0, 1.0)
        mean_squared_error = float(np.mean((values[usable] - signs * truth[usable]) ** 2))
        # prefer the smallest |lag| among equal errors
        if mean_squared_error < best[0] * (1 - 1e-12) or (
                mean_squared_error <= best[0] * (1 + 1e-12) and abs(lag) < abs(best[1])):
            best = (mean_squared_error, int(lag), signs, int(usable.sum()))
    error, offset_ns, best_signs, windows = best
    if not np.isfinite(error):
        return Alignment(windows=0, note="ground truth does not cover the estimates' times")
    truth = ground_truth.at(times + offset_ns)
    usable = np.all(np.isfinite(truth), axis=1)
    correlation = _correlations(values[usable], truth[usable])
    decided = np.isfinite(correlation) & (np.abs(correlation) >= MIN_SIGN_CORRELATION)
    signs = np.where(decided, best_signs, 1.0)
    if not decided.any():
        return Alignment(signs, offset_ns, correlation, windows, reliable=False,
                         note="no axis correlates with the ground truth (|corr| < "
                              f"{MIN_SIGN_CORRELATION}): too little motion or wrong data")
    note = ""
    if not decided.all():
        weak = ", ".join(AXES[a] for a in range(3) if not decided[a])
        note = f"axis {weak} correlates weakly (|corr| < {MIN_SIGN_CORRELATION}): its sign is left as is"
    return Alignment(signs, offset_ns, correlation, windows, reliable=True, note=note)


def apply_alignment(ground_truth: GroundTruth, alignment: Alignment) -> GroundTruth:
    """Ground truth corrected by the alignment: ω'(t) = signs ⊙ ω(t + offset)."""
    return ground_truth.shifted(-alignment.offset_ns).with_signs(alignment.signs)
