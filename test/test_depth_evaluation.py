"""Depth evaluation: ground truth on the engine's grid, error statistics against reference
formulas, keyframe choice, accuracy of every focus loss and of the max-vote baseline on a
simulated slider sequence, and `focus-ros evaluate-depth` end to end."""

from __future__ import annotations

import csv
from dataclasses import replace

import numpy as np
import pytest

from focus_ros.camera import Calibration
from focus_ros.cli import main
from focus_ros.depth.focus import PATCH_LOSSES
from focus_ros.estimators.depth import DepthSettings
from focus_ros.evaluation.depth import (MAX_VOTE, DepthErrors, evaluate_depth, ground_truth_on_reference_grid,
                                        keyframe_windows, relative_errors)
from focus_ros.sources.ecd import write_ecd_folder
from focus_ros.sources.simulator import make_preset

CALIBRATION = Calibration.davis240c()
#: the losses of the paper's slider_depth figure (supplementary, "Semi-dense 3D Reconstruction")
PAPER_FIGURE_LOSSES = ("local_variance", "local_mean_square", "local_mean_absolute_deviation", "gradient_magnitude",
                       "laplacian_of_gaussian", "difference_of_gaussians", "laplacian_magnitude", "area_exponential")
#: the protocol of EVALUATION.md's loss tables (issue 9): 100 planes over a fixed 0.45-2.4 m and the
#: fixed share of the observed pixels (the 20 % most confident), so that the losses are compared at
#: one density; the selection rules of issue 25 (tuned on the default loss) are tested in
#: test/test_depth_selection.py
SETTINGS = DepthSettings(z_min_m=0.45, z_max_m=2.4, auto_depth_range=False, min_confidence_rank=0.8,
                         min_contrast=0.0, max_rival_ratio=1.0, border_planes=0, support_neighbours=0)
#: spacing of the DSI planes in inverse depth (1/m): 100 planes uniform in 1/Z over 0.45-2.4 m
PLANE_SPACING = (1 / SETTINGS.z_min_m - 1 / SETTINGS.z_max_m) / (SETTINGS.planes - 1)
#: the slider scene's farthest surface (m): relative error of one plane step is largest there
FARTHEST_M = 2.3
#: relative depth error of one plane step at the farthest depth, Z · Δ(1/Z) ≈ 4.2 %
ONE_PLANE = FARTHEST_M * PLANE_SPACING


@pytest.fixture(scope="module")
def slider_recording():
    """1.2 s of the slider preset (0.3 m of travel, about 0.45 M events), depth maps at 50 Hz."""
    return make_preset("slider", duration_s=1.2, seed=0).simulate()


@pytest.fixture(scope="module")
def slider_evaluation(slider_recording):
    """The losses of the paper's figure, the best ones of EVALUATION.md and max vote, without
    polarity, one keyframe of 400,000 events."""
    methods = list(PAPER_FIGURE_LOSSES) + ["variance", "mean_absolute_deviation", "variance_of_laplacian", MAX_VOTE]
    assert set(methods) - {MAX_VOTE} <= set(PATCH_LOSSES)
    return evaluate_depth(slider_recording, methods, ("without",), keyframes=1, events_per_keyframe=400_000,
                          settings=SETTINGS)


def rows_by_method(evaluation):
    return {row.method: row for row in evaluation.rows}


# ---------------------------------------------------------------------------------------- ground truth


def test_ground_truth_on_the_pinhole_grid_matches_a_slanted_plane_analytically():
    # a plane n·X = d seen from the camera: depth at bearing (x, y, 1) is d / (n·(x, y, 1))
    normal, offset = np.array([0.3, -0.1, 1.0]), 1.5
    bearings = np.concatenate([CALIBRATION.bearing_lut(), np.ones((180, 240, 1))], axis=2)  # sensor pixels
    sensor_depth = (offset / (bearings @ normal)).astype(np.float32)
    truth = ground_truth_on_reference_grid(sensor_depth, CALIBRATION)
    rows, columns = np.mgrid[0:180, 0:240]
    pinhole = np.stack([(columns - CALIBRATION.cx) / CALIBRATION.fx, (rows - CALIBRATION.cy) / CALIBRATION.fy,
                        np.ones(rows.shape)], axis=-1)
    expected = offset / (pinhole @ normal)
    known = np.isfinite(truth.depth_m)
    assert known.mean() > 0.95  # the barrel-distorted sensor covers almost the whole pinhole grid
    assert np.allclose(truth.depth_m[known], expected[known], rtol=2e-4)
    assert not truth.at_edge.any()


def test_a_depth_step_is_flagged_and_compared_with_the_nearer_side():
    sensor_depth = np.full((180, 240), 2.0, np.float32)
    sensor_depth[:, :120] = 1.0  # a vertical occlusion boundary on the sensor
    truth = ground_truth_on_reference_grid(sensor_depth, CALIBRATION)
    row = 90
    edge_columns = np.flatnonzero(truth.at_edge[row])
    assert 1 <= len(edge_columns) <= 2  # only the pixels whose 2x2 sensor neighbours straddle it
    column = int(edge_columns[0])
    assert truth.edge_distance_px[row, column] == 0 and truth.edge_distance_px[row, column + 5] >= 4
    pixels = np.array([[column, row], [column, row], [column, row], [column - 10, row], [column + 10, row]])
    errors, distance = relative_errors(np.array([1.02, 1.9, 1.5, 1.1, 2.0]), pixels, truth)
    # on the edge: the nearer of 1 m and 2 m; off it: the plain relative error
    assert errors == pytest.approx([0.02, 0.05, 0.25, 0.1, 0.0])
    assert np.array_equal(distance[:3] == 0, [True, True, True])


def test_a_map_point_is_judged_in_its_own_keyframes_view_not_where_a_nearer_surface_hides_it():
    """A panel at z = 1 m (world x <= 0.1 m) before a wall at z = 4 m; keyframe 0 at x = 0 sees the
    wall point (0.2, 0, 4) behind the panel (its pixel 130 is the panel's), keyframe 1 at x = 0.5 m
    sees it (pixel 105, the wall). Judged in the first view that sees it the exact point is 300 %
    off (the panel's depth); in its own keyframe's view, 0. A point 2 % too far stays 2 % off."""
    from focus_ros.evaluation.depth import map_relative_errors
    from focus_ros.poses import Trajectory
    from focus_ros.sources.depth_maps import DepthGroundTruth
    from focus_ros.sources.recording import Poses

    calibration = Calibration(240, 180, 200.0, 200.0, 120.0, 90.0)
    camera_x_m = (0.0, 0.5)
    columns = np.arange(240)
    maps = []
    for x_m in camera_x_m:  # depth along the optical axis per pixel of a camera at (x_m, 0, 0)
        on_panel = x_m + (columns - calibration.cx) / calibration.fx * 1.0 <= 0.1
        maps.append(np.tile(np.where(on_panel, 1.0, 4.0), (180, 1)).astype(np.float32))
    stamps = [0, 1_000_000_000]
    truth = DepthGroundTruth(np.array(stamps), np.stack(maps))
    trajectory = Trajectory.from_poses(Poses(np.array(stamps), np.array([[x, 0.0, 0.0] for x in camera_x_m]),
                                             np.tile([0.0, 0.0, 0.0, 1.0], (2, 1))))
    points = np.array([[0.2, 0.0, 4.0], [0.2, 0.0, 4.08]])
    first_view = map_relative_errors(points, stamps, truth, trajectory, calibration)
    own_view = map_relative_errors(points, stamps, truth, trajectory, calibration, point_views=np.array([1, 1]))
    assert first_view == pytest.approx([3.0, 3.08])
    assert own_view == pytest.approx([0.0, 0.02])
    with pytest.raises(ValueError, match="point views"):
        map_relative_errors(points, stamps, truth, trajectory, calibration, point_views=np.array([1]))


def test_error_statistics_follow_their_definitions():
    errors = np.array([0.001, 0.01, 0.04, 0.05, 0.07, 0.2, np.nan])
    distance = np.array([0.0, 5.0, 1.0, 9.0, 4.0, 2.0, 3.0])
    statistics = DepthErrors.from_errors(errors, distance, known_pixels=60)
    assert statistics.points == 6 and statistics.without_truth == 1
    assert statistics.median == pytest.approx((0.04 + 0.05) / 2)
    assert statistics.mean == pytest.approx(0.371 / 6)
    assert statistics.within_5 == pytest.approx(4 / 6) and statistics.within_10 == pytest.approx(5 / 6)
    assert statistics.density == pytest.approx(6 / 60)
    assert statistics.edge_share == pytest.approx(1 / 6) and statistics.near_edge_share == pytest.approx(3 / 6)
    assert statistics.within_5_away_from_edges == pytest.approx(2 / 3)  # 0.01, 0.05 of 0.01, 0.05, 0.07


def test_keyframes_sit_on_ground_truth_times_and_hold_the_requested_events():
    event_t = np.sort(np.random.default_rng(0).integers(0, 3_000_000_000, 1_000_000))
    truth_t = np.arange(0, 3_000_000_001, 20_000_000)
    windows = keyframe_windows(event_t, truth_t, 3, 200_000)
    assert len(windows) == 3
    for window in windows:
        assert window.t_ref_ns in truth_t and truth_t[window.truth_index] == window.t_ref_ns
        assert window.stop - window.start == 200_000
        assert event_t[window.start] <= window.t_ref_ns <= event_t[window.stop - 1]
    assert [w.t_ref_ns for w in windows] == sorted({w.t_ref_ns for w in windows})  # distinct, in order
    # centres: the middles of 3 equal parts of events 100k..900k (where a whole keyframe fits)
    assert [w.t_ref_ns for w in windows] == pytest.approx([0.7e9, 1.5e9, 2.3e9], abs=0.03e9)
    with pytest.raises(ValueError, match="no ground-truth depth map inside"):
        keyframe_windows(event_t, truth_t + 4_000_000_000, 1, 1000)


# ---------------------------------------------------------------------------------------- accuracy


def test_every_loss_of_the_papers_figure_yields_depth_within_one_plane_step(slider_evaluation):
    """Each loss the paper shows reconstructing slider_depth publishes points, and their median
    relative error is below one DSI plane step at the farthest depth (a loss whose peak is
    on the right plane or its neighbour); max vote too."""
    rows = rows_by_method(slider_evaluation)
    for method in PAPER_FIGURE_LOSSES + (MAX_VOTE,):
        row = rows[method]
        assert row.status == "ok", (method, row.status)
        assert row.errors.density > 0.05, method
        assert row.errors.median < ONE_PLANE, (method, row.errors.median)
        assert row.errors.within_10 > 0.6, (method, row.errors.within_10)


def test_median_error_beats_the_plane_quantization(slider_evaluation):
    """Reading depth at the nearest plane would err by up to half a plane step (2.1 % at
    2.3 m); with the peak refinement the default loss and the best loss must do better, and
    the best focus loss must be at least as accurate as max vote at the same density."""
    rows = rows_by_method(slider_evaluation)
    focus_rows = [row for row in rows.values() if row.method != MAX_VOTE and row.status == "ok"]
    best = min(focus_rows, key=lambda row: row.errors.median)
    for row in (rows[SETTINGS.loss], best):
        assert row.errors.median < ONE_PLANE / 2, (row.method, row.errors.median)
    assert best.at_equal_density.points == best.baseline_at_equal_density.points > 1000
    assert best.at_equal_density.median <= best.baseline_at_equal_density.median
    assert best.at_equal_density.within_5 >= best.baseline_at_equal_density.within_5


def test_losses_without_a_patch_version_or_refused_with_signed_votes_are_reported(slider_recording):
    evaluation = evaluate_depth(slider_recording, ["area_exponential", "variance", MAX_VOTE], ("with",),
                                keyframes=1, events_per_keyframe=100_000)
    rows = rows_by_method(evaluation)
    assert rows["area_exponential"].status.startswith("unsupported: ")
    assert rows["variance"].status == "ok" and rows[MAX_VOTE].status == "ok"


def test_max_vote_and_the_losses_read_the_same_dsi(slider_recording):
    """Without median filter the published depth is the refined peak of the scores; the
    max-vote depth must lie between the neighbours of the vote maximum of the DSI the
    evaluation kept, and the focus loss's between those of its scores on that same DSI."""
    settings = replace(SETTINGS, median_filter_px=1)
    evaluation = evaluate_depth(slider_recording, ["local_variance", MAX_VOTE], ("without",), keyframes=1,
                                events_per_keyframe=200_000, settings=settings)
    votes = evaluation.dsi_votes["without"]
    depths = evaluation.depths_m
    scores = {MAX_VOTE: votes, "local_variance": evaluation.patch_focus("local_variance").scores(votes)}
    for method, score in scores.items():
        keyframe = evaluation.first_outcomes[(method, "without")].keyframe
        x, y = keyframe.pixels[:, 0], keyframe.pixels[:, 1]
        peak = np.argmax(score[y, x], axis=1)
        nearer = depths[np.maximum(peak - 1, 0)]
        farther = depths[np.minimum(peak + 1, len(depths) - 1)]
        published = keyframe.depth_m[y, x]
        assert len(published) > 1000
        assert np.all((published >= np.minimum(nearer, farther) - 1e-4)
                      & (published <= np.maximum(nearer, farther) + 1e-4)), method


# ---------------------------------------------------------------------------------------- command line


def test_evaluate_depth_command_writes_the_table_and_pictures(slider_recording, tmp_path, capsys):
    sequence = tmp_path / "slider"
    write_ecd_folder(sequence, slider_recording)
    output = tmp_path / "eval"
    assert main(["evaluate-depth", str(sequence), "-o", str(output), "--losses", "local_variance",
                 "--polarity", "without", "--keyframes", "1", "--keyframe-events", "150000", "--quiet"]) == 0
    printed = capsys.readouterr().out
    assert "| Local Variance |" in printed and "| Max vote (EMVS baseline) |" in printed
    assert (output / "depth_table.md").read_text().count("| Local Variance |") == 1
    with open(output / "depth_table.csv") as handle:
        records = {record["method"]: record for record in csv.DictReader(handle)}
    assert set(records) == {"local_variance", MAX_VOTE}
    assert 0 < float(records["local_variance"]["median_rel_error"]) < ONE_PLANE
    assert int(records[MAX_VOTE]["points"]) > 1000
    for name in ("depth_maps.png", "depth_focus_curves.png", "depth_accuracy_density.png"):
        assert (output / name).stat().st_size > 10_000, name


def test_evaluate_depth_reports_bad_input_in_one_line(tmp_path, capsys):
    rotation = tmp_path / "rotation"
    write_ecd_folder(rotation, make_preset("rotation_short", duration_s=0.05).simulate())
    assert main(["evaluate-depth", str(rotation), "-o", str(tmp_path / "out"), "--quiet"]) == 1
    error = capsys.readouterr().err.strip()
    assert len(error.splitlines()) == 1 and "no depth ground truth" in error
    assert main(["evaluate-depth", str(rotation), "-o", str(tmp_path / "out"), "--losses", "entropy"]) == 1
    assert "entropy has no patch version" in capsys.readouterr().err
    assert main(["evaluate-depth", str(rotation), "-o", str(tmp_path / "out"), "--z-min", "3", "--z-max", "1"]) == 1
    assert "z_min" in capsys.readouterr().err


def test_keyframes_by_baseline_hold_the_events_while_the_camera_stays_near_its_reference():
    event_t = np.arange(0, 3_000_000_000, 1000, dtype=np.int64)  # 1 event per µs for 3 s
    truth_t = np.arange(0, 3_000_000_001, 20_000_000)

    def positions_at(t_ns):  # 0.25 m/s along x
        return np.stack([0.25 * np.asarray(t_ns) / 1e9, np.zeros(len(t_ns)), np.zeros(len(t_ns))], axis=1)

    windows = keyframe_windows(event_t, truth_t, 2, 1, baseline_m=0.2, positions_at=positions_at)
    # the middles of two halves of the span, 0.75 s and 2.25 s, snapped to map times (20 ms apart)
    assert [w.t_ref_ns for w in windows] == pytest.approx([0.75e9, 2.25e9], abs=10_000_000)
    assert all(w.t_ref_ns in truth_t for w in windows)
    for window in windows:
        first, last = event_t[window.start], event_t[window.stop - 1]
        # 0.1 m on either side at 0.25 m/s: 0.4 s before and after (camera positions every 1 ms)
        assert first == pytest.approx(window.t_ref_ns - 0.4e9, abs=1.1e6)
        assert last == pytest.approx(window.t_ref_ns + 0.4e9, abs=1.1e6)
