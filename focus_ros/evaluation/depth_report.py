"""The depth evaluation as tables (Markdown, CSV) and pictures (PNG), from a
:class:`~focus_ros.evaluation.depth.DepthEvaluation`.

- :func:`depth_markdown`: one table per polarity mode, one row per method (focus losses, then
  the max-vote baseline): median / mean relative error, share within 5 % and 10 %, density,
  time per keyframe, and median / within-5 % at the baseline's density;
- :func:`write_depth_csv`: the same numbers, one record per (method, polarity);
- :func:`plot_depth_panels`: depth maps (near red, far blue, over the event image), confidence
  maps and rendered point clouds of a few methods side by side, ground truth first (the
  paper's slider_depth figure);
- :func:`plot_focus_curves`: focus score versus depth of one patch for every loss, normalised
  to [0, 1], with the true depth marked (the paper's Fig. 7);
- :func:`plot_accuracy_versus_density`: median error and share within 5 % against density, for
  the most confident points of each method (accuracy at equal density, at every density).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from focus_ros.evaluation.depth import MAX_VOTE, DepthResult, percent
from focus_ros.evaluation.plots import _save, plt
from focus_ros.evaluation.tables import POLARITY_HEADINGS, _cell, _number, markdown_table, write_csv

CSV_COLUMNS = ("method", "title", "polarity", "status", "keyframes", "keyframes_with_depth", "points",
               "median_rel_error", "mean_rel_error", "within_5", "within_10", "density", "edge_share",
               "near_edge_share", "within_5_away_from_edges",
               "ms_per_keyframe", "equal_density_points", "median_rel_error_at_equal_density",
               "within_5_at_equal_density", "baseline_median_rel_error_at_equal_density",
               "baseline_within_5_at_equal_density")


def method_title(method: str) -> str:
    """The row label: the loss's Table-1 title, or "Max vote (EMVS)"."""
    if method == MAX_VOTE:
        return "Max vote (EMVS baseline)"
    from focus_ros.losses import LOSSES
    return LOSSES[method].title if method in LOSSES else method


def _csv_record(row: DepthResult) -> dict:
    record = {"method": row.method, "title": method_title(row.method), "polarity": row.polarity,
              "status": row.status, "keyframes": row.keyframes, "keyframes_with_depth": row.keyframes_with_depth,
              "ms_per_keyframe": _number(row.ms_per_keyframe)}
    if row.errors is not None:
        e = row.errors
        record.update(points=e.points, median_rel_error=_number(e.median), mean_rel_error=_number(e.mean),
                      within_5=_number(e.within_5), within_10=_number(e.within_10), density=_number(e.density),
                      edge_share=_number(e.edge_share), near_edge_share=_number(e.near_edge_share),
                      within_5_away_from_edges=_number(e.within_5_away_from_edges))
    if row.at_equal_density is not None:
        mine, baseline = row.at_equal_density, row.baseline_at_equal_density
        record.update(equal_density_points=mine.points, median_rel_error_at_equal_density=_number(mine.median),
                      within_5_at_equal_density=_number(mine.within_5),
                      baseline_median_rel_error_at_equal_density=_number(baseline.median),
                      baseline_within_5_at_equal_density=_number(baseline.within_5))
    return record


class _CsvRow:
    def __init__(self, row: DepthResult):
        self.row = row

    def csv_record(self) -> dict:
        return _csv_record(self.row)


def write_depth_csv(rows: list[DepthResult], path) -> None:
    """One CSV record per (method, polarity); fractions (not %), errors relative, NaN empty."""
    write_csv([_CsvRow(row) for row in rows], Path(path), CSV_COLUMNS)


def depth_markdown(rows: list[DepthResult], polarity_modes=("without", "with")) -> str:
    """One Markdown table per polarity mode (module docstring); the best median error in bold.
    The last two columns compare with the max-vote baseline at equal density: this method /
    max vote, each on its most confident points, as many as the sparser of the two has."""
    header = ["Method", "median err [%]", "mean err [%]", "≤ 5 % [%]", "≤ 10 % [%]", "density [%]", "points",
              "≤ 5 % away from depth edges [%]", "ms/keyframe", "median err, equal density: this / max vote [%]",
              "≤ 5 %, equal density: this / max vote [%]"]
    sections = []
    for mode in polarity_modes:
        mode_rows = [row for row in rows if row.polarity == mode]
        if not mode_rows:
            continue
        medians = [row.errors.median for row in mode_rows if row.status == "ok" and row.errors is not None
                   and np.isfinite(row.errors.median)]
        best = min(medians) if medians else None
        cells = []
        for row in mode_rows:
            if row.status != "ok" or row.errors is None:
                cells.append([method_title(row.method)] + ["-"] * (len(header) - 1))
                continue
            e = row.errors
            median = _cell(percent(e.median))
            if best is not None and _cell(percent(best)) == median:
                median = f"**{median}**"
            equal_median = equal_within = "-"
            if row.at_equal_density is not None and row.method != MAX_VOTE:
                mine, baseline = row.at_equal_density, row.baseline_at_equal_density
                equal_median = f"{_cell(percent(mine.median))} / {_cell(percent(baseline.median))}"
                equal_within = f"{_cell(percent(mine.within_5), 1)} / {_cell(percent(baseline.within_5), 1)}"
            cells.append([method_title(row.method), median, _cell(percent(e.mean)), _cell(percent(e.within_5), 1),
                          _cell(percent(e.within_10), 1), _cell(percent(e.density)), str(e.points),
                          _cell(percent(e.within_5_away_from_edges), 1), _cell(row.ms_per_keyframe, 0),
                          equal_median, equal_within])
        sections.append(f"Polarity {POLARITY_HEADINGS[mode]} ({mode} polarity):\n\n" + markdown_table(header, cells))
    return "\n".join(sections)


# ---------------------------------------------------------------------------------------- pictures


def _depth_ticks(z_min_m: float, z_max_m: float, count: int = 6) -> np.ndarray:
    """Depths (m) for colour-bar ticks, evenly spaced in inverse depth like the colours."""
    return 1.0 / np.linspace(1.0 / z_min_m, 1.0 / z_max_m, count)


def _depth_image(panel, depth_m: np.ndarray, z_min_m: float, z_max_m: float, background=None):
    """Depth (m) as colours (jet on inverse depth: red near, blue far) over an optional grey
    event image, with a colour bar whose ticks are in metres. Returns the colour bar."""
    if background is not None:
        panel.imshow(np.abs(background), cmap="gray_r", vmax=np.percentile(np.abs(background), 99.5) + 1e-9)
    with np.errstate(divide="ignore", invalid="ignore"):
        inverse = np.where(np.isfinite(depth_m) & (depth_m > 0), 1.0 / depth_m, np.nan)
    shown = panel.imshow(np.ma.masked_invalid(inverse), cmap="jet", vmin=1.0 / z_max_m, vmax=1.0 / z_min_m,
                         interpolation="nearest")
    bar = panel.figure.colorbar(shown, ax=panel, fraction=0.046, pad=0.02)
    ticks = _depth_ticks(z_min_m, z_max_m)
    bar.set_ticks(1.0 / ticks)
    bar.set_ticklabels([f"{t:.2f}" for t in ticks])
    bar.set_label("depth (m)", fontsize=7)
    bar.ax.tick_params(labelsize=6)
    return bar


def _confidence_image(panel, confidence: np.ndarray):
    """The confidence map (dark = high focus, as the paper) with its scale in the loss's units."""
    known = confidence[np.isfinite(confidence)]
    high = float(np.percentile(known, 99.0)) if known.size else 1.0
    shown = panel.imshow(np.ma.masked_invalid(confidence), cmap="gray_r", vmin=0.0, vmax=max(high, 1e-12))
    bar = panel.figure.colorbar(shown, ax=panel, fraction=0.046, pad=0.02)
    bar.set_label("focus contrast (loss units)", fontsize=7)
    bar.ax.tick_params(labelsize=6)


def _cloud_top_view(panel, points_world: np.ndarray, depths_m: np.ndarray, world_from_reference: np.ndarray,
                    z_min_m: float, z_max_m: float, max_points: int = 20000, seed: int = 0):
    """A point cloud seen from above in the reference camera's frame: x (m, right) against z
    (m, along the optical axis), coloured by depth like the depth maps, axes in metres."""
    rotation, position = world_from_reference[:3, :3], world_from_reference[:3, 3]
    camera = (np.asarray(points_world, np.float64) - position) @ rotation
    pick = np.random.default_rng(seed).permutation(len(camera))[:max_points]
    panel.scatter(camera[pick, 0], camera[pick, 2], c=1.0 / np.asarray(depths_m)[pick], cmap="jet", s=0.5,
                  vmin=1.0 / z_max_m, vmax=1.0 / z_min_m, linewidths=0)
    panel.set_xlabel("x (m, right)", fontsize=7)
    panel.set_ylabel("z (m, depth)", fontsize=7)
    panel.tick_params(labelsize=6)
    if len(pick):  # the bulk of the points, not the odd far one
        low, high = np.percentile(camera[pick, 0], [1, 99])
        panel.set_xlim(low - 0.1 * (high - low), high + 0.1 * (high - low))
        panel.set_ylim(0.0, 1.1 * float(np.percentile(camera[pick, 2], 99)))
    panel.grid(True, linewidth=0.3)


def plot_depth_panels(evaluation, methods, path, polarity: str = "without", max_points: int = 20000,
                      title: str = "") -> Path:
    """Columns: ground truth, then each method of ``methods`` (first keyframe, one polarity
    mode); rows: depth map over the event image (colour bar in metres), confidence map (dark =
    high focus, its scale in the loss's units), point cloud seen from above in the reference
    camera's frame (axes in metres). Colours: near red, far blue, over the settings' depth range."""
    from focus_ros.depth.pictures import event_image
    from focus_ros.depth.semidense import back_project

    settings = evaluation.settings
    z_range = (settings.z_min_m, settings.z_max_m)
    outcomes = [(m, evaluation.first_outcomes.get((m, polarity))) for m in methods]
    outcomes = [(m, o) for m, o in outcomes if o is not None]
    if outcomes:  # the planes the keyframes were computed with (auto_depth_range: the scene's)
        z_range = outcomes[0][1].keyframe.z_range_m
    votes = evaluation.dsi_votes[polarity]
    background = event_image(votes)
    truth = evaluation.first_truth
    columns = 1 + len(outcomes)
    figure, panels = plt.subplots(3, columns, figsize=(3.4 * columns, 7.5), squeeze=False)

    def image_axes(panel, label):
        panel.set_title(label, fontsize=8)
        panel.set_xticks([])
        panel.set_yticks([])

    _depth_image(panels[0, 0], truth.depth_m, *z_range, background)
    image_axes(panels[0, 0], "ground truth depth")
    panels[1, 0].imshow(background, cmap="gray_r")
    image_axes(panels[1, 0], "event image (max |votes|)")
    if outcomes:
        pose = outcomes[0][1].keyframe.world_from_camera
        points, pixels = back_project(truth.depth_m, evaluation.calibration, pose)
        _cloud_top_view(panels[2, 0], points, truth.depth_m[pixels[:, 1], pixels[:, 0]], pose, *z_range, max_points)
        panels[2, 0].set_title("ground truth cloud (top view)", fontsize=8)
    for column, (method, outcome) in enumerate(outcomes, start=1):
        keyframe = outcome.keyframe
        _depth_image(panels[0, column], keyframe.depth_m, *z_range, background)
        image_axes(panels[0, column], method_title(method))
        _confidence_image(panels[1, column], keyframe.confidence)
        image_axes(panels[1, column], "confidence (dark = high)")
        depths = keyframe.depth_m[keyframe.pixels[:, 1], keyframe.pixels[:, 0]]
        _cloud_top_view(panels[2, column], keyframe.points_world, depths, keyframe.world_from_camera, *z_range,
                        max_points)
        panels[2, column].set_title(f"point cloud, {len(depths)} points (top view)", fontsize=8)
    figure.suptitle(title, fontsize=9)
    figure.tight_layout()
    return _save(figure, path)


def plot_focus_curves(depths_m: np.ndarray, curves: dict, true_depth_m: float, path, pixel=None,
                      columns: int = 5, title: str = "") -> Path:
    """One small panel per loss: its focus score along depth (m) for one patch, normalised
    to [0, 1] (sign applied: 1 = sharpest), the true depth as a dotted line."""
    count = len(curves)
    columns = max(1, min(columns, count))
    rows = int(np.ceil(count / columns))
    figure, axes = plt.subplots(rows, columns, figsize=(2.6 * columns, 2.0 * rows), squeeze=False,
                                sharex=True, sharey=True)
    for panel, (name, scores) in zip(axes.ravel(), curves.items()):
        scores = np.asarray(scores, np.float64)
        span = np.nanmax(scores) - np.nanmin(scores)
        normalized = (scores - np.nanmin(scores)) / span if span > 0 else np.zeros_like(scores)
        panel.plot(depths_m, normalized, linewidth=1.0, color="tab:blue")
        panel.axvline(true_depth_m, color="black", linestyle=":", linewidth=1.0)
        panel.axvline(depths_m[int(np.nanargmax(scores))], color="tab:red", linewidth=0.8, alpha=0.6)
        panel.set_title(method_title(name), fontsize=7)
        panel.tick_params(labelsize=6)
        panel.grid(alpha=0.3)
    for panel in axes.ravel()[count:]:
        panel.axis("off")
    for panel in axes[-1]:
        panel.set_xlabel("depth Z [m]", fontsize=7)
    for panel in axes[:, 0]:
        panel.set_ylabel("normalised focus", fontsize=7)
    where = f" at pixel {pixel}" if pixel is not None else ""
    figure.suptitle(title or f"Focus versus depth of one 3×3 patch{where}: dotted = true depth "
                             f"({true_depth_m:.3f} m), red = peak", fontsize=9)
    figure.tight_layout()
    return _save(figure, path)


def plot_accuracy_versus_density(rows: list[DepthResult], path, polarity_modes=("without", "with"),
                                 title: str = "") -> Path:
    """Per polarity mode (one row of panels each) against density (% of reference pixels):
    median relative error (%) and share of points within 5 % (%), one line per method (its
    most confident points first); the max-vote baseline dashed black."""
    modes = [mode for mode in polarity_modes if any(row.polarity == mode and row.density_curve is not None
                                                    for row in rows)]
    figure, axes = plt.subplots(len(modes), 2, figsize=(12, 3.6 * len(modes)), squeeze=False)
    methods = list(dict.fromkeys(row.method for row in rows))  # one colour per method in every row
    handles = {}
    for panels, mode in zip(axes, modes):
        for row in rows:
            if row.polarity != mode or row.density_curve is None or row.status != "ok":
                continue
            index = methods.index(row.method)
            curve = row.density_curve
            style = (dict(color="black", linewidth=2.0, linestyle="--") if row.method == MAX_VOTE else
                     dict(color=plt.cm.tab20(index % 20), linewidth=1.0, linestyle=("-", ":")[index // 20 % 2]))
            line, = panels[0].plot(100 * curve[:, 0], 100 * curve[:, 1], **style)
            panels[1].plot(100 * curve[:, 0], 100 * curve[:, 2], **style)
            handles.setdefault(row.method, line)
        panels[0].set_ylabel(f"median rel. error [%], {mode} polarity", fontsize=8)
        panels[0].set_yscale("log")
        panels[1].set_ylabel(f"points within 5 % [%], {mode} polarity", fontsize=8)
    for panel in axes.ravel():
        panel.grid(alpha=0.3, which="both")
    for panel in axes[-1]:
        panel.set_xlabel("density [% of reference pixels]")
    figure.suptitle(title or "Accuracy versus density: the most confident points of each method first", fontsize=9)
    figure.tight_layout(rect=(0, 0, 0.8, 1))
    figure.legend(list(handles.values()), [method_title(m) for m in handles], loc="center right", fontsize=7)
    return _save(figure, path)


def plot_cloud(points: np.ndarray, depth_m: np.ndarray, world_from_reference: np.ndarray, path, z_min_m: float,
               z_max_m: float, title: str) -> Path:
    """All clouds (world frame, m) in the middle keyframe's camera frame, seen from above (x
    against depth z) and from the front (x against y), axes in metres, coloured by depth (near
    red, far blue) with the colour bar in metres."""
    rotation, position = world_from_reference[:3, :3], world_from_reference[:3, 3]
    camera = (np.asarray(points, np.float64) - position) @ rotation
    figure, (top, front) = plt.subplots(1, 2, figsize=(11, 5))
    _cloud_top_view(top, points, depth_m, world_from_reference, z_min_m, z_max_m, max_points=100_000)
    top.set_title("top view", fontsize=9)
    pick = np.random.default_rng(0).permutation(len(camera))[:100_000]
    shown = front.scatter(camera[pick, 0], camera[pick, 1], c=1.0 / np.asarray(depth_m)[pick], cmap="jet", s=0.5,
                          vmin=1.0 / z_max_m, vmax=1.0 / z_min_m, linewidths=0)
    front.invert_yaxis()  # camera y points down
    front.set_xlabel("x (m, right)", fontsize=7)
    front.set_ylabel("y (m, down)", fontsize=7)
    front.set_aspect("equal", adjustable="datalim")
    front.grid(True, linewidth=0.3)
    front.set_title("front view (from the middle keyframe's camera)", fontsize=9)
    bar = figure.colorbar(shown, ax=[top, front], fraction=0.03, pad=0.02)
    ticks = _depth_ticks(z_min_m, z_max_m)
    bar.set_ticks(1.0 / ticks)
    bar.set_ticklabels([f"{t:.2f}" for t in ticks])
    bar.set_label("depth (m)")
    figure.suptitle(f"{title} ({len(points):,} points)", fontsize=10)
    return _save(figure, path)
