"""Plots (issue 6): every figure is a non-empty PNG whose content follows its input, and the
loss landscape of a simulated window peaks at the true angular velocity."""

from __future__ import annotations

import csv

import matplotlib.colors
import matplotlib.image
import numpy as np
import pytest

from focus_ros.cli import main
from focus_ros.evaluation import landscape, plots

SIMULATION = ["--simulate", "rotation_short", "--sim-end", "0.12", "--seed", "0"]


def _pixels(path) -> np.ndarray:
    assert path.stat().st_size > 2000
    return matplotlib.image.imread(str(path))


@pytest.fixture
def drawn(monkeypatch):
    """The figures the plot functions save, in order, as they were when saved (each written to
    its PNG as usual): what a plot shows is checked on its axes, artists and data."""
    figures = []
    save = plots._save

    def keeping(figure, path):
        figures.append(figure)
        return save(figure, path)

    monkeypatch.setattr(plots, "_save", keeping)
    return figures


def _png_of(figure, path) -> np.ndarray:
    """The PNG ``path``, checked to be ``figure`` at the plots' 100 dpi."""
    pixels = _pixels(path)
    width, height = figure.get_size_inches() * 100
    assert pixels.shape[:2] == (round(height), round(width))
    return pixels


def _line(panel, label):
    (line,) = [line for line in panel.get_lines() if line.get_label() == label]
    return line


def test_estimate_vs_truth_plot_draws_both_in_deg_s_per_axis(tmp_path, drawn):
    """One panel per axis, sharing the time axis; in each the ground truth (solid black) and the
    estimate (dashed red), both converted from rad/s to deg/s; the legend names them."""
    t_s = np.linspace(0, 2, 50)
    truth = np.stack([np.sin(t_s), np.cos(t_s), 0.5 * t_s], axis=1)
    estimate = truth + np.array([0.01, -0.5, 0.2])
    plots.plot_estimate_vs_truth(t_s, estimate, truth, tmp_path / "a.png")
    (figure,) = drawn
    _png_of(figure, tmp_path / "a.png")
    panels = figure.axes
    assert len(panels) == 3
    for axis, (panel, name) in enumerate(zip(panels, "xyz")):
        assert panel.get_ylabel() == f"ω_{name} [deg/s]"
        truth_line, estimate_line = _line(panel, "ground truth"), _line(panel, "estimate")
        np.testing.assert_allclose(truth_line.get_xdata(), t_s)
        np.testing.assert_allclose(truth_line.get_ydata(), truth[:, axis] * 180 / np.pi)
        np.testing.assert_allclose(estimate_line.get_xdata(), t_s)
        np.testing.assert_allclose(estimate_line.get_ydata(), estimate[:, axis] * 180 / np.pi)
        assert matplotlib.colors.same_color(truth_line.get_color(), "black") and truth_line.get_linestyle() == "-"
        assert matplotlib.colors.same_color(estimate_line.get_color(), "tab:red")
        assert estimate_line.get_linestyle() == "--"
    assert panels[-1].get_xlabel() == "time [s]"
    assert [text.get_text() for text in panels[0].get_legend().get_texts()] == ["ground truth", "estimate"]


def test_error_boxplots_group_by_interval_and_draw_each_groups_median(tmp_path, drawn):
    """A panel per axis, a box per interval labelled with it, each box's median line at the
    median of that interval's errors on that axis, and the zero line."""
    t_s = np.arange(0, 60, 0.5)
    errors = np.random.default_rng(0).normal(size=(len(t_s), 3)) + np.array([0.0, 2.0, -3.0])
    labels, groups = plots.interval_groups(t_s, errors, 15.0)
    assert labels == ["0-15 s", "15-30 s", "30-45 s", "45-60 s"]
    assert [len(g) for g in groups] == [30, 30, 30, 30]
    for group, start in zip(groups, range(0, 60, 15)):
        np.testing.assert_array_equal(group, errors[(t_s >= start) & (t_s < start + 15)])
    plots.plot_error_boxplots(t_s, errors, tmp_path / "a.png", 15.0)
    (figure,) = drawn
    _png_of(figure, tmp_path / "a.png")
    assert len(figure.axes) == 3
    for axis, panel in enumerate(figure.axes):
        assert panel.get_title() == f"error ω_{'xyz'[axis]}"
        assert [tick.get_text() for tick in panel.get_xticklabels()] == labels
        horizontal = {}  # box position -> y of its horizontal segments (caps, median)
        for line in panel.get_lines():
            x, y = np.asarray(line.get_xdata(), float), np.asarray(line.get_ydata(), float)
            if len(x) == 2 and y[0] == y[1] and x[0] != x[1]:
                horizontal.setdefault(round(float(x.mean()), 6), []).append(float(y[0]))
        zero = [line for line in panel.get_lines() if np.all(np.asarray(line.get_ydata(), float) == 0.0)
                and tuple(line.get_xdata()) == (0, 1)]  # axhline: axes coordinates along x
        assert len(zero) == 1
        for position, group in enumerate(groups, start=1):
            assert any(y == pytest.approx(np.median(group[:, axis])) for y in horizontal[float(position)]), \
                (axis, position, horizontal[float(position)])
    with pytest.raises(ValueError, match="nothing to plot"):
        plots.plot_error_boxplots(t_s, np.full_like(errors, np.nan), tmp_path / "c.png")


def test_iwe_pair_plot_shows_both_images_on_one_scale(tmp_path, drawn):
    """Before on the left, after on the right, each the image given, on a common scale: counts
    in grey from 0, a signed IWE (polarity) in a diverging map symmetric about 0; the scale's
    end is the larger 99.5th percentile of the two (|values|), so a few bright pixels (the
    sharp line) saturate instead of darkening everything else."""
    rng = np.random.default_rng(2)
    sharp, blurred = np.zeros((180, 240)), rng.poisson(0.5, size=(180, 240)).astype(float)
    sharp[60:120, 100] = 30.0
    plots.plot_iwe_pair(blurred, sharp, tmp_path / "a.png")
    signed = np.where(rng.random((180, 240)) < 0.5, -1.0, 1.0) * blurred
    plots.plot_iwe_pair(signed, 2 * signed, tmp_path / "b.png")
    counts, polarity = drawn
    _png_of(counts, tmp_path / "a.png")
    _png_of(polarity, tmp_path / "b.png")
    images = [image for panel in counts.axes for image in panel.get_images()]
    assert len(images) == 2
    np.testing.assert_array_equal(images[0].get_array(), blurred)
    np.testing.assert_array_equal(images[1].get_array(), sharp)
    assert images[0].get_clim() == images[1].get_clim() and images[0].get_clim()[0] == 0
    assert images[0].get_cmap().name == "gray"
    assert images[0].get_clim()[1] == max(np.percentile(blurred, 99.5), np.percentile(sharp, 99.5))
    (first, second) = [image for panel in polarity.axes for image in panel.get_images()]
    np.testing.assert_array_equal(first.get_array(), signed)
    np.testing.assert_array_equal(second.get_array(), 2 * signed)
    limit = np.percentile(2 * blurred, 99.5)  # |2 signed| = 2 blurred: the larger of the two
    assert first.get_clim() == second.get_clim() == (-limit, limit)
    assert first.get_cmap().name == "seismic"
    assert [panel.get_title() for panel in counts.axes if panel.get_images()] == ["ω = 0 (before)",
                                                                                  "estimated ω (after)"]


def test_landscape_plots_draw_each_slice_and_grid(tmp_path, drawn):
    """Slices: a panel per parameter, a curve per loss over the offsets, the true value marked.
    Grids: a panel per loss titled with it, its scores over the offsets' extent on [0, 1]."""
    offsets = np.linspace(-1, 1, 21)
    peaked = {"a": np.stack([landscape.normalize(-(offsets - c) ** 2) for c in (0.0, 0.2, -0.3)]),
              "b": np.stack([landscape.normalize(-np.abs(offsets - c)) for c in (0.1, 0.0, 0.4)])}
    plots.plot_landscape_slices(offsets, peaked, tmp_path / "a.png", marker=(0.0, 0.2, -0.3))
    grid = landscape.normalize(-np.add.outer(offsets ** 2, offsets ** 2))
    plots.plot_landscape_grid(offsets, offsets, {"a": grid, "b": grid.T ** 2}, tmp_path / "c.png")
    slices, grids = drawn
    _png_of(slices, tmp_path / "a.png")
    _png_of(grids, tmp_path / "c.png")
    assert len(slices.axes) == 3
    for parameter, panel in enumerate(slices.axes):
        for label, scores in peaked.items():
            curve = _line(panel, label)
            np.testing.assert_allclose(curve.get_xdata(), offsets)
            np.testing.assert_allclose(curve.get_ydata(), scores[parameter])
        (marker,) = [line for line in panel.get_lines() if line.get_linestyle() == ":"]
        assert tuple(marker.get_xdata()) == ((0.0, 0.2, -0.3)[parameter],) * 2
        assert panel.get_xlabel() == f"{('ω_x', 'ω_y', 'ω_z')[parameter]} − center [deg/s]"
    shown = [panel for panel in grids.axes if panel.get_images()]
    assert [panel.get_title() for panel in shown] == ["a", "b"]
    for panel, scores in zip(shown, (grid, grid.T ** 2)):
        (image,) = panel.get_images()
        np.testing.assert_array_equal(image.get_array(), scores)
        assert image.get_extent() == [-1.0, 1.0, -1.0, 1.0] and image.get_clim() == (0.0, 1.0)


def test_normalize_maps_to_unit_interval():
    assert landscape.normalize([2.0, 4.0, 3.0]).tolist() == [0.0, 1.0, 0.5]
    assert landscape.normalize([5.0, 5.0]).tolist() == [0.0, 0.0]


def _peaks(folder):
    with open(folder / "landscape.csv", newline="") as handle:
        return {(row["loss"], row["polarity"]): np.array([float(row[f"peak_offset_{a}"]) for a in "xyz"])
                for row in csv.DictReader(handle)}


def test_landscape_command_peaks_at_the_true_angular_velocity(tmp_path):
    """Centred on the simulator's ground truth, every slice peaks within one step of it; centred
    20 deg/s away on x, the x slice peaks 20 deg/s back."""
    common = [*SIMULATION, "--losses", "variance,gradient_magnitude", "--span", "40", "--steps", "41",
              "--grid-steps", "9"]
    assert main(["landscape", *common, "-o", str(tmp_path / "true")]) == 0
    for peak in _peaks(tmp_path / "true").values():
        assert np.abs(peak).max() <= 2.0  # one step = 2 deg/s
    first = _pixels(tmp_path / "true" / "slices_without.png")
    assert _pixels(tmp_path / "true" / "grid_xy_without.png").size > 0

    from focus_ros.estimators.angular_velocity import reference_time_ns
    from focus_ros.evaluation.sequence import simulate_sequence
    recording = simulate_sequence("rotation_short", None, 0, end_s=0.12)
    windows = len(recording.events) // 30_000
    middle = recording.events[(windows // 2) * 30_000:(windows // 2 + 1) * 30_000]
    truth = recording.imu.angular_velocity
    t_ref = reference_time_ns(middle, "middle")
    omega = np.array([np.interp(t_ref, recording.imu.t, truth[:, a]) for a in range(3)])
    moved = omega + np.deg2rad([20.0, 0.0, 0.0])
    assert main(["landscape", *common, "--omega", *map(str, moved), "-o", str(tmp_path / "moved")]) == 0
    for peak in _peaks(tmp_path / "moved").values():
        assert peak[0] == pytest.approx(-20.0, abs=2.0)
    assert not np.array_equal(first, _pixels(tmp_path / "moved" / "slices_without.png"))


def test_interval_groups_close_the_last_interval_with_the_last_window():
    from focus_ros.evaluation.plots import interval_groups

    t_s = np.linspace(0.0, 10.0, 41)
    labels, groups = interval_groups(t_s, np.zeros((41, 3)), 2.5)
    assert [len(group) for group in groups] == [10, 10, 10, 11]
    assert labels[-1] == "7.5-10 s"
