"""PNG figures of an evaluation (matplotlib, Agg backend), from plain arrays.

- ``plot_estimate_vs_truth``: estimated and ground-truth ω (deg/s) over time, per axis;
- ``plot_error_boxplots``: error box plots per axis over consecutive time intervals
  (the paper's Fig. 4 uses 15-s intervals);
- ``plot_iwe_pair``: the image of warped events before (ω = 0) and after compensation;
- ``plot_landscape_slices`` / ``plot_landscape_grid``: normalised focus scores along 1-D
  slices and over a 2-D grid through the optimum (the paper's loss-landscape figures).
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

AXES = ("x", "y", "z")


def _save(figure, path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return path


def plot_estimate_vs_truth(t_s, estimate_rad_s, truth_rad_s, path, title: str = "") -> Path:
    """Three stacked panels (ω_x, ω_y, ω_z in deg/s vs time in s): estimate and ground truth."""
    t_s = np.asarray(t_s, dtype=np.float64)
    estimate = np.rad2deg(np.asarray(estimate_rad_s, dtype=np.float64))
    truth = np.rad2deg(np.asarray(truth_rad_s, dtype=np.float64))
    figure, axes = plt.subplots(3, 1, sharex=True, figsize=(9, 6.5))
    for axis, panel in enumerate(axes):
        panel.plot(t_s, truth[:, axis], color="black", linewidth=1.2, label="ground truth")
        panel.plot(t_s, estimate[:, axis], color="tab:red", linewidth=0.9, linestyle="--", label="estimate")
        panel.set_ylabel(f"ω_{AXES[axis]} [deg/s]")
        panel.grid(alpha=0.3)
    axes[0].legend(loc="upper left", fontsize=8)
    axes[-1].set_xlabel("time [s]")
    axes[0].set_title(title)
    figure.tight_layout()
    return _save(figure, path)


def interval_groups(t_s, errors_deg_s, interval_s: float) -> tuple[list[str], list[np.ndarray]]:
    """Errors (W, 3) grouped by consecutive time intervals of interval_s seconds from the first
    time: (labels "a-b s", list of (n_i, 3) arrays), empty intervals left out, NaN rows dropped."""
    if not interval_s > 0:
        raise ValueError(f"box-plot interval must be positive (s), got {interval_s}")
    t_s = np.asarray(t_s, dtype=np.float64)
    errors = np.asarray(errors_deg_s, dtype=np.float64)
    finite = np.all(np.isfinite(errors), axis=1)
    t_s, errors = t_s[finite], errors[finite]
    if not len(t_s):
        return [], []
    origin = t_s.min()
    # the last time closes the last interval (no one-window box after a span that divides evenly)
    count = max(int(np.ceil((t_s.max() - origin) / interval_s)), 1)
    index = np.minimum(np.floor((t_s - origin) / interval_s).astype(int), count - 1)
    labels, groups = [], []
    for bin_index in np.unique(index):
        start = origin + bin_index * interval_s
        labels.append(f"{start:.3g}-{start + interval_s:.3g} s")
        groups.append(errors[index == bin_index])
    return labels, groups


def plot_error_boxplots(t_s, errors_deg_s, path, interval_s: float = 15.0, title: str = "") -> Path:
    """Box plots of the error (deg/s) per axis, one box per interval of interval_s seconds."""
    labels, groups = interval_groups(t_s, errors_deg_s, interval_s)
    if not groups:
        raise ValueError("no window with both an estimate and ground truth: nothing to plot")
    figure, axes = plt.subplots(1, 3, sharey=True, figsize=(11, 4))
    for axis, panel in enumerate(axes):
        panel.boxplot([group[:, axis] for group in groups], showfliers=True, flierprops={"markersize": 2})
        panel.set_xticks(range(1, len(labels) + 1), labels, rotation=45, fontsize=7)
        panel.axhline(0.0, color="gray", linewidth=0.8)
        panel.set_title(f"error ω_{AXES[axis]}")
        panel.grid(alpha=0.3, axis="y")
    axes[0].set_ylabel("estimate − ground truth [deg/s]")
    figure.suptitle(title)
    figure.tight_layout()
    return _save(figure, path)


def plot_iwe_pair(iwe_before, iwe_after, path, titles=("ω = 0 (before)", "estimated ω (after)"),
                  title: str = "") -> Path:
    """Two images of warped events side by side, on a common symmetric grey scale (signed IWE)
    or a common [0, max] scale (counts)."""
    before = np.asarray(iwe_before, dtype=np.float64)
    after = np.asarray(iwe_after, dtype=np.float64)
    signed = min(before.min(), after.min()) < 0
    # one scale for both (the 99.5th percentile of the sharper image): the compensated image's
    # higher peaks are what the comparison shows
    limit = max(max(np.percentile(np.abs(image), 99.5) for image in (before, after)), 1e-9)
    figure, axes = plt.subplots(1, 2, figsize=(10, 4))
    for panel, image, label in zip(axes, (before, after), titles):
        if signed:
            shown = panel.imshow(image, cmap="seismic", vmin=-limit, vmax=limit)
        else:
            shown = panel.imshow(image, cmap="gray", vmin=0, vmax=limit)
        panel.set_title(label)
        panel.axis("off")
        figure.colorbar(shown, ax=panel, fraction=0.035)
    figure.suptitle(title)
    figure.tight_layout()
    return _save(figure, path)


def plot_landscape_slices(offsets, normalized_scores, path, parameter_labels=("ω_x", "ω_y", "ω_z"),
                          marker=None, unit: str = "deg/s", title: str = "") -> Path:
    """Normalised score along 1-D slices: offsets (S,) in ``unit``; normalized_scores: dict
    label -> (P, S) array, one row per parameter; marker: (P,) offsets of the true value."""
    offsets = np.asarray(offsets, dtype=np.float64)
    count = len(parameter_labels)
    figure, axes = plt.subplots(1, count, sharey=True, figsize=(4 * count, 3.6))
    axes = np.atleast_1d(axes)
    for parameter, panel in enumerate(axes):
        for label, scores in normalized_scores.items():
            panel.plot(offsets, np.asarray(scores)[parameter], linewidth=1.0, label=label)
        if marker is not None:
            panel.axvline(marker[parameter], color="black", linestyle=":", linewidth=1.0)
        panel.set_xlabel(f"{parameter_labels[parameter]} − center [{unit}]")
        panel.grid(alpha=0.3)
    axes[0].set_ylabel("normalised focus score")
    axes[0].set_ylim(-0.02, 1.02)
    if len(normalized_scores) <= 12:
        axes[-1].legend(fontsize=6, loc="lower right")
    figure.suptitle(title)
    figure.tight_layout()
    return _save(figure, path)


def plot_landscape_grid(offsets_a, offsets_b, normalized_scores, path, labels=("ω_x", "ω_y"), marker=None,
                        unit: str = "deg/s", columns: int = 5) -> Path:
    """Normalised score over 2-D grids, one panel per loss: normalized_scores: dict title -> (B, A)
    array over offsets_b (rows) x offsets_a (columns); marker: (a, b) of the true value."""
    count = len(normalized_scores)
    columns = max(1, min(columns, count))
    rows = int(np.ceil(count / columns))
    figure, axes = plt.subplots(rows, columns, figsize=(3.0 * columns, 2.8 * rows), squeeze=False)
    extent = (offsets_a[0], offsets_a[-1], offsets_b[0], offsets_b[-1])
    for panel, (name, scores) in zip(axes.ravel(), normalized_scores.items()):
        panel.imshow(np.asarray(scores), origin="lower", extent=extent, aspect="auto", cmap="viridis",
                     vmin=0.0, vmax=1.0)
        if marker is not None:
            panel.plot([marker[0]], [marker[1]], "r+", markersize=8)
        panel.set_title(name, fontsize=8)
        panel.tick_params(labelsize=6)
    for panel in axes.ravel()[count:]:
        panel.axis("off")
    for panel in axes[-1]:
        panel.set_xlabel(f"{labels[0]} − center [{unit}]", fontsize=7)
    for panel in axes[:, 0]:
        panel.set_ylabel(f"{labels[1]} − center [{unit}]", fontsize=7)
    figure.tight_layout()
    return _save(figure, path)
