"""Per-point depth uncertainty (issue 33, item 3): the peak width of the focus kernel against a
reference formula on synthetic focus curves, the sigma formula and its conversion to metres, the
fused map's sigma, the PointCloud2 field and the PLY property round trips, and the calibration on
simulated sequences that were not tuned on (the keyframes' points on a short slider, the map's on a
sequence of the depth set's report half)."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest

from focus_ros.depth.focus import (SIGMA_CURVE, SIGMA_FLOOR_PLANES, SIGMA_POSE_BATCH, focus_peaks,
                                   peak_sigma_planes)
from focus_ros.depth.fusion import MAP_SIGMA_FACTOR, FusedMap
from focus_ros.depth.ply import PlyAppender, read_ply, write_ply
from focus_ros.estimators.depth import DepthEstimator, FocusFeatures

PLANES = 41


def _hill(half_width_planes: float, peak_plane: float = 20.3, height: float = 50.0) -> np.ndarray:
    """A focus curve: a parabola hill height·(1 − ((i − peak)/half_width)²) over a floor of 0 (float32)."""
    index = np.arange(PLANES, dtype=np.float64)
    return np.maximum(0.0, height * (1.0 - ((index - peak_plane) / half_width_planes) ** 2)).astype(np.float32)


def _reference_width(curve: np.ndarray) -> float:
    """sqrt(contrast / −curvature), written out for one curve: the contrast is the best sample minus
    the median, the curvature left − 2·best + right of the samples around the best."""
    best = int(np.argmax(curve))
    values = curve.astype(np.float64)
    curvature = values[best - 1] - 2.0 * values[best] + values[best + 1]
    contrast = values[best] - np.median(values)
    return math.sqrt(contrast / -curvature)


def test_peak_width_equals_the_reference_formula_and_grows_as_the_hill_widens():
    half_widths = [2.0, 3.0, 5.0, 8.0]
    scores = np.stack([_hill(w) for w in half_widths]).reshape(1, len(half_widths), PLANES)
    inverse_depths = np.linspace(3.0, 0.1, PLANES)
    outputs = focus_peaks(scores, inverse_depths, with_width=True)
    assert len(outputs) == 4  # depth, confidence, plane, width: the existing three unchanged, one added
    width = outputs[3][0]
    for column, curve in enumerate(scores[0]):
        assert width[column] == pytest.approx(_reference_width(curve), rel=1e-5)
    assert np.all(np.diff(width) > 0)
    # for a parabola whose floor is below the median, -curvature = 2·height/w² exactly, so the
    # width is w·sqrt(contrast / (2·height)): proportional to the hill's half-width
    contrast = outputs[1][0]
    expected = np.array(half_widths) * np.sqrt(contrast / (2 * 50.0))
    np.testing.assert_allclose(width, expected, rtol=1e-4)
    # the rival ratio comes before the width when both are asked for; the other outputs are the same
    with_both = focus_peaks(scores, inverse_depths, with_rival=True, with_width=True)
    assert len(with_both) == 5
    np.testing.assert_array_equal(with_both[4], outputs[3])
    for before, after in zip(focus_peaks(scores, inverse_depths), outputs[:3]):
        np.testing.assert_array_equal(before, after)


def test_a_peak_without_a_parabola_gets_half_its_hill_as_width():
    """A peak at the DSI's last plane (no right neighbour): half the extent of its hill (the peak
    ±3 planes, then on while the curve keeps falling)."""
    curve = np.zeros(PLANES, np.float32)
    curve[-6:] = [1, 2, 3, 4, 5, 6]
    width = focus_peaks(curve.reshape(1, 1, PLANES), np.linspace(3.0, 0.1, PLANES), with_width=True)[3]
    # hill: from the peak (plane 40) back while falling: planes 35..40, then the flat zeros down to plane 0
    assert width[0, 0] == pytest.approx(0.5 * 40)


def test_peak_sigma_is_the_three_parts_in_quadrature():
    width = np.array([1.0, 2.0, 4.0])
    contrast = np.array([1.0, 4.0, 0.25])
    got = peak_sigma_planes(width, contrast, 0.5)
    expected = [math.sqrt((SIGMA_CURVE * w / math.sqrt(c)) ** 2 + (SIGMA_POSE_BATCH * 0.5) ** 2
                          + SIGMA_FLOOR_PLANES ** 2) for w, c in zip(width, contrast)]
    np.testing.assert_allclose(got, expected, rtol=1e-12)
    assert np.isnan(peak_sigma_planes(1.0, 0.0))  # no contrast: no sigma
    # a sharp, strong peak is bounded below by the floor
    assert peak_sigma_planes(1e-6, 1e6) == pytest.approx(SIGMA_FLOOR_PLANES, rel=1e-6)


def test_depth_sigma_in_metres_is_z_squared_times_the_inverse_depth_step():
    inverse_depths = 1.0 / np.linspace(0.5, 5.0, 11)[::-1]  # any planes: the step is their mean spacing
    step = abs(inverse_depths[-1] - inverse_depths[0]) / 10
    dsi = SimpleNamespace(inverse_depths=inverse_depths, parallax_px=lambda: 20.0, pose_batch_error_px=0.4)
    shape = (1, 2)
    features = FocusFeatures(depth_m=np.ones(shape, np.float32), confidence=np.array([[2.0, 8.0]], np.float32),
                             plane=np.zeros(shape, np.float32), rival=np.zeros(shape, np.float32),
                             observed=np.ones(shape, bool), width=np.array([[3.0, 3.0]], np.float32))
    depth = np.array([[1.5, 3.0]], np.float32)
    sigma = DepthEstimator.depth_sigma_m(features, depth, dsi)
    relative = np.array([2.0, 8.0]) / 5.0  # over the median of the observed pixels' contrast
    batch_planes = 0.4 / (20.0 / 10)       # px over px of parallax per plane
    expected = depth[0] ** 2 * step * peak_sigma_planes(3.0, relative, batch_planes)
    np.testing.assert_allclose(sigma[0], expected, rtol=1e-6)


def test_fused_map_sigma_of_two_agreeing_keyframes():
    """The same point from two keyframes: its sigma over sqrt(2 estimates), times the map's factor;
    points the map drops take their sigma with them; a cloud without sigmas gives NaN."""
    points = np.array([[0.0, 0.0, 2.0], [0.5, 0.2, 3.0], [np.nan, 0.0, 1.0]], np.float32)
    fused = FusedMap(min_keyframes=2)
    fused.add(points, np.eye(4), 1 / 200, np.array([0.02, 0.05, 0.07], np.float32))
    fused.add(points[:2], np.eye(4), 1 / 200, np.array([0.03, 0.04], np.float32))
    published, support, sigma = fused.points(with_sigma=True)
    assert len(published) == 4 and np.all(support == 2)
    np.testing.assert_allclose(sigma, MAP_SIGMA_FACTOR * np.array([0.02, 0.05, 0.03, 0.04]) / math.sqrt(2),
                               rtol=1e-6)
    assert len(fused.points()) == 2  # without with_sigma: (points, support) as before
    unknown = FusedMap(min_keyframes=1)
    unknown.add(points[:2], np.eye(4), 1 / 200)
    assert np.all(np.isnan(unknown.points(with_sigma=True)[2]))
    with pytest.raises(ValueError, match="sigmas"):
        unknown.add(points[:2], np.eye(4), 1 / 200, np.zeros(3))


def test_ply_depth_sigma_property_round_trips(tmp_path):
    generator = np.random.default_rng(7)
    points = generator.normal(size=(40, 3)).astype(np.float32)
    confidence = generator.random(40).astype(np.float32)
    sigma = generator.uniform(0.001, 0.1, 40).astype(np.float32)
    colors = generator.integers(0, 256, (40, 3)).astype(np.uint8)
    write_ply(tmp_path / "one.ply", points, confidence, colors, sigma)
    cloud = read_ply(tmp_path / "one.ply")
    np.testing.assert_array_equal(cloud["depth_sigma"], sigma)
    np.testing.assert_array_equal(cloud["confidence"], confidence)
    np.testing.assert_array_equal(np.stack([cloud["red"], cloud["green"], cloud["blue"]], 1), colors)
    with PlyAppender(tmp_path / "many.ply", with_colors=False, with_sigma=True) as merged:
        merged.append(points[:10], confidence[:10], sigma_m=sigma[:10])
        merged.append(points[10:], confidence[10:], sigma_m=sigma[10:])
        with pytest.raises(ValueError, match="sigmas"):
            merged.append(points[:1], confidence[:1])
    np.testing.assert_array_equal(read_ply(tmp_path / "many.ply")["depth_sigma"], sigma)
    write_ply(tmp_path / "old.ply", points, confidence)
    assert "depth_sigma" not in read_ply(tmp_path / "old.ply")  # without sigma: the file as before


def test_point_cloud_depth_sigma_field_round_trips():
    pytest.importorskip("rclpy")
    from rclpy.serialization import deserialize_message, serialize_message
    from sensor_msgs.msg import PointCloud2

    from focus_ros.ros import depth_messages
    from focus_ros.ros.messages import time_from_ns

    generator = np.random.default_rng(8)
    points = generator.uniform(-2, 2, (30, 3))
    sigma = generator.uniform(0.001, 0.2, 30)
    message = depth_messages.point_cloud(points, np.ones(30), np.full(30, 2.0), time_from_ns(5), "world", sigma)
    assert depth_messages.CLOUD_FIELDS[4:] == ("depth", "depth_sigma")
    fields = depth_messages.decode_point_cloud(deserialize_message(serialize_message(message), PointCloud2))
    np.testing.assert_array_equal(fields["depth_sigma"], sigma.astype(np.float32))
    np.testing.assert_array_equal(fields["depth"], np.full(30, 2.0, np.float32))
    with pytest.raises(ValueError, match="depth sigma"):
        depth_messages.point_cloud(points, np.ones(30), np.ones(30), time_from_ns(5), "world", sigma[:3])
    # an old cloud (no depth_sigma field) still decodes: its fields, nothing invented
    old = depth_messages.point_cloud(points, np.ones(30), np.ones(30), time_from_ns(5), "world")
    old.fields = old.fields[:5]
    assert "depth_sigma" not in depth_messages.decode_point_cloud(old)
    assert len(depth_messages.cloud_points(old)[0]) == 30


def test_sigma_is_calibrated_on_a_short_slider_sequence_not_tuned_on(monkeypatch):
    """The keyframes' published points on the slider, 1.2 s, seed 5 (their sigma was chosen on seed
    0, 3 s), through `focus-ros depth`'s loop (focus_ros.evaluation.depth_set): the share of the
    true depths within 1 sigma lies within 0.5-0.82. The band: the shares measured on the sequences
    not tuned on (docs/evaluation/depth_sigma.md) range over 0.50-0.77; sigma twice too large or half
    as large (every factor scaled) leaves it. (The fused map's sigma is chosen on the depth set, where
    its errors are larger: on this slider it is conservative, 0.86 within 1 sigma.)"""
    from focus_ros.depth import focus
    from focus_ros.evaluation.depth_set import evaluate_recording
    from focus_ros.sources.simulator import simulate_preset

    recording = simulate_preset("slider", 1.2, seed=5)
    result = evaluate_recording(recording, "slider:5")
    assert result.points > 5000 and result.map_points > 5000
    assert 0.5 <= result.points_within_1_sigma <= 0.82, result
    assert result.map_within_1_sigma >= 0.6827, result  # never overconfident where the errors are small
    for scale in (2.0, 0.5):  # the same sequence with every sigma scaled: out of the band
        for name in ("SIGMA_CURVE", "SIGMA_POSE_BATCH", "SIGMA_FLOOR_PLANES"):
            monkeypatch.setattr(focus, name, getattr(focus, name) * scale)
        scaled = evaluate_recording(recording, "slider:5")
        assert not 0.5 <= scaled.points_within_1_sigma <= 0.82, (scale, scaled)
        monkeypatch.undo()


def test_map_sigma_is_calibrated_on_a_depth_set_sequence_not_tuned_on(monkeypatch):
    """The fused map's sigma (MAP_SIGMA_FACTOR, chosen on the depth set's tune half) on the report
    half's handheld_near_b (hand-held 6-DoF, 3 s as in the set): 0.60-0.75 of the map's true depths
    within 1 sigma (issue 33's band). Half the factor (the bound on sigma halved with it, so that the
    same points are published) leaves it below the band, twice the factor above. Most of the set is
    not in the band yet (docs/evaluation/depth_set.md): this sequence guards the scale, not the
    spread."""
    from focus_ros.depth import fusion
    from focus_ros.evaluation.depth_set import evaluate_sequence
    from focus_ros.pipelines.depth import DepthPipelineSettings
    from focus_ros.sources.depth_set import depth_sequences, simulate

    sequence = next(s for s in depth_sequences("report") if s.name == "handheld_near_b")
    recording = simulate(sequence)
    results = {}
    for scale in (1.0, 0.5, 2.0):
        monkeypatch.setattr(fusion, "MAP_SIGMA_FACTOR", MAP_SIGMA_FACTOR * scale)
        settings = DepthPipelineSettings(map_max_points=100_000_000,
                                         map_max_relative_sigma=fusion.MAP_MAX_RELATIVE_SIGMA * scale)
        results[scale] = evaluate_sequence(sequence, recording, pipeline_settings=settings)
    assert results[1.0].map_points > 10_000 and results[0.5].map_points == results[1.0].map_points
    assert 0.60 <= results[1.0].map_within_1_sigma <= 0.75, results[1.0]
    assert results[0.5].map_within_1_sigma < 0.60 and results[2.0].map_within_1_sigma > 0.75, results
