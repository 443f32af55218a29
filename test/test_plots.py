"""Plots (issue 6): every figure is a non-empty PNG whose content follows its input, and the
loss landscape of a simulated window peaks at the true angular velocity."""

from __future__ import annotations

import csv

import matplotlib.image
import numpy as np
import pytest

from focus_ros.cli import main
from focus_ros.evaluation import landscape, plots

SIMULATION = ["--simulate", "rotation_short", "--sim-end", "0.12", "--seed", "0"]


def _pixels(path) -> np.ndarray:
    assert path.stat().st_size > 2000
    return matplotlib.image.imread(str(path))


def _differs(first, second) -> bool:
    a, b = _pixels(first), _pixels(second)
    return a.shape != b.shape or not np.array_equal(a, b)


def test_estimate_vs_truth_plot_follows_its_input(tmp_path):
    t_s = np.linspace(0, 2, 50)
    truth = np.stack([np.sin(t_s), np.cos(t_s), 0.5 * t_s], axis=1)
    plots.plot_estimate_vs_truth(t_s, truth + 0.01, truth, tmp_path / "a.png")
    plots.plot_estimate_vs_truth(t_s, truth + 0.5, truth, tmp_path / "b.png")
    assert _differs(tmp_path / "a.png", tmp_path / "b.png")


def test_error_boxplots_group_by_interval_and_follow_their_input(tmp_path):
    t_s = np.arange(0, 60, 0.5)
    errors = np.random.default_rng(0).normal(size=(len(t_s), 3))
    labels, groups = plots.interval_groups(t_s, errors, 15.0)
    assert labels == ["0-15 s", "15-30 s", "30-45 s", "45-60 s"]
    assert [len(g) for g in groups] == [30, 30, 30, 30]
    plots.plot_error_boxplots(t_s, errors, tmp_path / "a.png", 15.0)
    plots.plot_error_boxplots(t_s, 3 * errors + 2, tmp_path / "b.png", 15.0)
    assert _differs(tmp_path / "a.png", tmp_path / "b.png")
    with pytest.raises(ValueError, match="nothing to plot"):
        plots.plot_error_boxplots(t_s, np.full_like(errors, np.nan), tmp_path / "c.png")


def test_iwe_pair_plot_follows_its_input(tmp_path):
    rng = np.random.default_rng(2)
    sharp, blurred = np.zeros((180, 240)), rng.poisson(0.5, size=(180, 240)).astype(float)
    sharp[60:120, 100] = 30.0
    plots.plot_iwe_pair(blurred, sharp, tmp_path / "a.png")
    plots.plot_iwe_pair(blurred, blurred, tmp_path / "b.png")
    assert _differs(tmp_path / "a.png", tmp_path / "b.png")


def test_landscape_plots_follow_their_input(tmp_path):
    offsets = np.linspace(-1, 1, 21)
    peaked = {"a": np.stack([landscape.normalize(-(offsets - c) ** 2) for c in (0.0, 0.2, -0.3)])}
    flat = {"a": np.stack([landscape.normalize(-(offsets - c) ** 2) for c in (0.5, 0.5, 0.5)])}
    plots.plot_landscape_slices(offsets, peaked, tmp_path / "a.png")
    plots.plot_landscape_slices(offsets, flat, tmp_path / "b.png")
    assert _differs(tmp_path / "a.png", tmp_path / "b.png")
    grid = landscape.normalize(-np.add.outer(offsets ** 2, offsets ** 2))
    plots.plot_landscape_grid(offsets, offsets, {"a": grid, "b": grid.T ** 2}, tmp_path / "c.png")
    plots.plot_landscape_grid(offsets, offsets, {"a": grid[::-1], "b": grid}, tmp_path / "d.png")
    assert _differs(tmp_path / "c.png", tmp_path / "d.png")


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
