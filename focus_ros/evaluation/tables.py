"""The evaluation table as Markdown and CSV, in the layout of the paper's Tables 2 and 6-7.

One :class:`TableRow` per (loss, polarity mode). Combinations that cannot estimate motion
(MAV and local MAV without polarity, mean timestamp with polarity, areas with a signed
IWE) appear as "-", like the paper.
"""

from __future__ import annotations

import csv
import math
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from focus_ros.evaluation.metrics import ErrorStatistics

POLARITY_MODES = ("without", "with")
POLARITY_HEADINGS = {"without": "w/o", "with": "w/"}

CSV_COLUMNS = ("loss", "title", "polarity", "status", "windows", "used_windows", "degenerate_windows",
               "error_x", "error_y", "error_z", "mean", "std", "rms", "rms_percent_of_peak", "peak_deg_s",
               "us_per_evaluation", "us_per_loss_evaluation", "mean_wx", "mean_wy", "mean_wz",
               "median_error_norm", "p90_error_norm", "max_error_norm", "windows_above_5x_median")


@dataclass
class TableRow:
    """One (loss, polarity) result.

    status: "ok", or why there is no number ("degenerate", "unsupported", "missing");
    statistics: errors in deg/s (None without a result); us_per_evaluation: median µs of one
    value+gradient evaluation of the whole objective (warp + IWE + loss + adjoint) on a
    window; us_per_loss_evaluation: median µs of the loss alone (value + image gradient) on
    an IWE, the paper's "Time" column; mean_estimate_deg_s: mean estimate over the windows
    (deg/s), useful without ground truth; degenerate_windows: windows without an estimate.
    """

    loss: str
    title: str
    polarity: str
    status: str = "ok"
    statistics: ErrorStatistics | None = None
    peak_deg_s: float = float("nan")
    us_per_evaluation: float = float("nan")
    us_per_loss_evaluation: float = float("nan")
    mean_estimate_deg_s: np.ndarray = field(default_factory=lambda: np.full(3, np.nan))
    degenerate_windows: int = 0

    def csv_record(self) -> dict:
        """The row as CSV fields (empty where there is no number)."""
        statistics = self.statistics
        record = {"loss": self.loss, "title": self.title, "polarity": self.polarity, "status": self.status,
                  "degenerate_windows": self.degenerate_windows}
        if statistics is not None:
            record.update(windows=statistics.windows, used_windows=statistics.used,
                          error_x=_number(statistics.rms_per_axis[0]), error_y=_number(statistics.rms_per_axis[1]),
                          error_z=_number(statistics.rms_per_axis[2]), mean=_number(statistics.mean),
                          std=_number(statistics.std), rms=_number(statistics.rms),
                          rms_percent_of_peak=_number(statistics.rms_percent_of_peak),
                          median_error_norm=_number(statistics.median_norm), p90_error_norm=_number(statistics.p90_norm),
                          max_error_norm=_number(statistics.max_norm),
                          windows_above_5x_median=statistics.above_5x_median)
        record.update(peak_deg_s=_number(self.peak_deg_s), us_per_evaluation=_number(self.us_per_evaluation),
                      us_per_loss_evaluation=_number(self.us_per_loss_evaluation),
                      mean_wx=_number(self.mean_estimate_deg_s[0]), mean_wy=_number(self.mean_estimate_deg_s[1]),
                      mean_wz=_number(self.mean_estimate_deg_s[2]))
        return record


def _number(value, digits: int = 6) -> str:
    """A float as CSV text; '' for NaN/None."""
    if value is None or not math.isfinite(float(value)):
        return ""
    return f"{float(value):.{digits}g}"


def _cell(value, digits: int = 2) -> str:
    """A float as a Markdown cell; '-' for NaN/None."""
    if value is None or not math.isfinite(float(value)):
        return "-"
    return f"{float(value):.{digits}f}"


def write_csv(rows: list, path: Path, columns=CSV_COLUMNS) -> None:
    """Write the rows (one per loss and polarity; anything with ``csv_record()``, e.g. a
    :class:`TableRow`) to path with the given columns, atomically."""
    path = Path(path)
    temporary = path.with_name(path.name + ".tmp")
    with open(temporary, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns, restval="")
        writer.writeheader()
        for row in rows:
            writer.writerow(row.csv_record())
    os.replace(temporary, path)


def markdown_table(header: list[str], rows: list[list[str]]) -> str:
    """A Markdown table: first column left-aligned, the others right-aligned."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" + "---:|" * (len(header) - 1)]
    lines += ["| " + " | ".join(cells) + " |" for cells in rows]
    return "\n".join(lines) + "\n"


def _by_loss(rows: list[TableRow]) -> dict[str, dict[str, TableRow]]:
    grouped: dict[str, dict[str, TableRow]] = {}
    for row in rows:
        grouped.setdefault(row.loss, {})[row.polarity] = row
    return grouped


def _best(values: list[float], key=lambda v: v) -> float | None:
    finite = [v for v in values if v is not None and math.isfinite(v)]
    return min(finite, key=key) if finite else None


def _bold_if(text: str, value, best) -> str:
    if best is not None and value is not None and math.isfinite(value) and text != "-" \
            and _cell(value) == _cell(best):
        return f"**{text}**"
    return text


def markdown_summary(rows: list[TableRow], modes=POLARITY_MODES) -> str:
    """The paper's Table 2 layout: RMS error (deg/s) per polarity mode, % of peak, µs per evaluation."""
    grouped = _by_loss(rows)
    header = ["Focus loss"]
    for mode in modes:
        header += [f"RMS {POLARITY_HEADINGS[mode]} [deg/s]", f"RMS {POLARITY_HEADINGS[mode]} [% peak]"]
    header += [f"µs/eval {POLARITY_HEADINGS[mode]}" for mode in modes]
    header += ["µs/loss"]
    rms_best = {mode: _best([_rms(g.get(mode)) for g in grouped.values()]) for mode in modes}
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" + "---:|" * (len(header) - 1)]
    for loss, by_mode in grouped.items():
        title = next(iter(by_mode.values())).title
        cells = [title]
        for mode in modes:
            row = by_mode.get(mode)
            rms = _rms(row)
            cells.append(_bold_if(_cell(rms), rms, rms_best[mode]))
            cells.append(_cell(row.statistics.rms_percent_of_peak) if rms is not None else "-")
        for mode in modes:
            row = by_mode.get(mode)
            cells.append(_cell(row.us_per_evaluation, 0) if row is not None and row.status == "ok" else "-")
        loss_times = [r.us_per_loss_evaluation for r in by_mode.values() if r.status == "ok"]
        cells.append(_cell(float(np.median(loss_times)), 1) if loss_times else "-")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def markdown_details(rows: list[TableRow], modes=POLARITY_MODES) -> str:
    """The paper's Tables 6-7 layout: per mode, RMS error per axis, μ, σ, RMS (deg/s), % of peak."""
    grouped = _by_loss(rows)
    header = ["Focus loss"]
    for mode in modes:
        heading = POLARITY_HEADINGS[mode]
        header += [f"ω_x {heading}", f"ω_y {heading}", f"ω_z {heading}", f"μ {heading}", f"σ {heading}",
                   f"RMS {heading}", f"% peak {heading}", f"windows {heading}"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" + "---:|" * (len(header) - 1)]
    for loss, by_mode in grouped.items():
        cells = [next(iter(by_mode.values())).title]
        for mode in modes:
            row = by_mode.get(mode)
            statistics = row.statistics if row is not None and row.status == "ok" else None
            if statistics is None:
                cells += ["-"] * 8
                continue
            cells += [_cell(v) for v in statistics.rms_per_axis]
            cells += [_cell(statistics.mean), _cell(statistics.std), _cell(statistics.rms),
                      _cell(statistics.rms_percent_of_peak), f"{statistics.used}/{statistics.windows}"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def markdown_distribution(rows: list[TableRow], modes=POLARITY_MODES) -> str:
    """Per-window error distribution per mode: median, 90th percentile and maximum of |e_w|
    (deg/s), max / median and the windows above 5x the median."""
    grouped = _by_loss(rows)
    header = ["Focus loss"]
    for mode in modes:
        heading = POLARITY_HEADINGS[mode]
        header += [f"median {heading}", f"p90 {heading}", f"max {heading}", f"max/median {heading}",
                   f"> 5x median {heading}"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" + "---:|" * (len(header) - 1)]
    for loss, by_mode in grouped.items():
        cells = [next(iter(by_mode.values())).title]
        for mode in modes:
            row = by_mode.get(mode)
            statistics = row.statistics if row is not None and row.status == "ok" else None
            if statistics is None or not math.isfinite(statistics.median_norm):
                cells += ["-"] * 5
                continue
            ratio = statistics.max_norm / statistics.median_norm if statistics.median_norm > 0 else math.inf
            cells += [_cell(statistics.median_norm), _cell(statistics.p90_norm), _cell(statistics.max_norm, 1),
                      _cell(ratio, 1), str(statistics.above_5x_median)]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def markdown_estimates(rows: list[TableRow], modes=POLARITY_MODES) -> str:
    """Mean estimate per loss and mode (deg/s) and its distance to the reference (RMS, deg/s):
    the table for sequences without ground truth (e.g. single real windows)."""
    grouped = _by_loss(rows)
    header = ["Focus loss"]
    for mode in modes:
        heading = POLARITY_HEADINGS[mode]
        header += [f"ω {heading} [deg/s]", f"distance {heading} [deg/s]"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" + "---:|" * (len(header) - 1)]
    for loss, by_mode in grouped.items():
        cells = [next(iter(by_mode.values())).title]
        for mode in modes:
            row = by_mode.get(mode)
            if row is None or row.status != "ok" or not np.all(np.isfinite(row.mean_estimate_deg_s)):
                cells += ["-", "-"]
                continue
            cells.append("(" + ", ".join(f"{v:.1f}" for v in row.mean_estimate_deg_s) + ")")
            cells.append(_cell(_euclidean(row)))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _rms(row: TableRow | None) -> float | None:
    if row is None or row.status != "ok" or row.statistics is None:
        return None
    return row.statistics.rms


def _euclidean(row: TableRow) -> float:
    """|ω_est − ω_ref| (deg/s) from the per-axis RMS errors (exact for one window)."""
    return float(np.sqrt(np.sum(row.statistics.rms_per_axis ** 2)))
