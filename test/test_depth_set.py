"""The wide depth evaluation set (focus_ros.sources.depth_set) spans what issue 33 asks for, its
sequences simulate what they say, and `focus-ros evaluate-depth --set` runs a half of it with one
command: a row per sequence, the distribution, the same figures as evaluating one sequence alone."""

from __future__ import annotations

import csv

import numpy as np
import pytest

from focus_ros.cli import main
from focus_ros.sources.depth_set import DEPTH_SET, MOTIONS, depth_sequences, simulate


def test_the_set_spans_depths_motions_sensors_and_seeds_in_two_matching_halves():
    assert len(DEPTH_SET) >= 12
    assert len({s.name for s in DEPTH_SET}) == len(DEPTH_SET) and len({s.seed for s in DEPTH_SET}) == len(DEPTH_SET)
    tune, report = depth_sequences("tune"), depth_sequences("report")
    assert len(tune) == len(report) == len(DEPTH_SET) // 2
    kinds = {s.name.rsplit("_", 1)[0] for s in tune}
    assert kinds == {s.name.rsplit("_", 1)[0] for s in report}  # every kind in both halves
    assert {s.motion for s in tune} == {s.motion for s in report} == set(MOTIONS)
    assert min(s.near_m for s in DEPTH_SET) <= 0.4 and max(s.wall_m or s.far_m for s in DEPTH_SET) >= 6.0
    assert any(s.wall_m is None for s in DEPTH_SET)  # no background at all, as outdoors
    assert max(s.peak_deg_s for s in DEPTH_SET if s.motion == "handheld") >= 120.0
    assert {s.camera for s in DEPTH_SET} >= {"davis240c", "davis346"}
    with pytest.raises(ValueError, match="unknown half 'validation'"):
        depth_sequences("validation")


def test_a_sequence_sees_its_scene_through_its_own_lens():
    """near_lateral_b: a DAVIS346 (its lens' distortion) at 0.4-1.2 m with a wall at 1.6 m."""
    from focus_ros.camera import sensor_model

    sequence = next(s for s in DEPTH_SET if s.name == "near_lateral_b")
    recording = simulate(sequence, duration_s=0.2)
    assert recording.calibration == sensor_model("davis346").calibration()
    assert recording.depth_maps.shape[1:] == (260, 346)
    depths = recording.depth_maps[np.isfinite(recording.depth_maps)]
    assert depths.min() >= sequence.near_m * 0.9 and depths.max() <= 1.6 / np.cos(np.radians(50))
    assert np.mean(depths < sequence.far_m) > 0.2  # panels in view, not only the wall
    assert len(recording.events) > 50_000


def test_evaluate_depth_set_writes_a_row_per_sequence_and_the_distribution(tmp_path, capsys):
    """The report half, shortened to 0.6 s: one command, every sequence a row whose figures are
    those of evaluating that sequence alone, and the summary over the half."""
    from dataclasses import replace

    from focus_ros.evaluation.depth_set import cached_recording, evaluate_sequence

    assert main(["evaluate-depth", "--set", "report", "--duration", "0.6", "-o", str(tmp_path), "--quiet"]) == 0
    text = capsys.readouterr().out
    report = depth_sequences("report")
    with open(tmp_path / "depth_set.csv") as handle:
        rows = {row["name"]: row for row in csv.DictReader(handle)}
    assert sorted(rows) == sorted(s.name for s in report)
    for sequence in report:
        assert f"| {sequence.name} | report |" in text
    assert "| report | 7 |" in text and (tmp_path / "depth_set.png").stat().st_size > 10_000
    # one row checked against the sequence evaluated alone, from the recording the command simulated
    sequence = replace(next(s for s in report if s.motion == "lateral"), duration_s=0.6)
    alone = evaluate_sequence(sequence, cached_recording(sequence, tmp_path / "recordings"))
    row = rows[sequence.name]
    assert int(row["map_points"]) == alone.map_points > 1000
    assert float(row["map_median_error"]) == pytest.approx(alone.map_median_error, rel=1e-12)
    # a rerun resumes: nothing evaluated again
    assert main(["evaluate-depth", "--set", "report", "--duration", "0.6", "-o", str(tmp_path), "--quiet"]) == 0
    import json
    assert len(json.loads((tmp_path / "grid_run.json").read_text())["skipped"]) == len(report)


def test_the_sigma_scale_is_the_factor_that_puts_68_percent_within_1_sigma():
    """map_sigma_scale's rule: for errors drawn with a standard deviation twice the sigma given, it
    says 2 (a normal distribution's 68.27 % lie within 1 standard deviation); sigma times the scale
    it reports holds 68.3 % of the errors within 1 sigma; NaN ratios are left out."""
    from focus_ros.evaluation.depth_set import _one_sigma_scale

    rng = np.random.default_rng(5)
    errors = np.abs(rng.normal(0.0, 2.0, 200_000))
    sigma = np.ones_like(errors)
    assert _one_sigma_scale(errors / sigma) == pytest.approx(2.0, rel=0.01)
    scale = _one_sigma_scale(np.append(errors / sigma, [np.nan, np.inf]))
    assert np.mean(errors <= scale * sigma) == pytest.approx(0.6827, abs=0.002)
    assert np.isnan(_one_sigma_scale(np.array([np.nan])))
