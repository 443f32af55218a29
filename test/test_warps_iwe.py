"""Warps (values, Jacobians, exponential map) and the image of warped events."""

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from focus_ros.iwe import accumulate, bilinear_cells, gaussian_scratch_size, vote_bilinear_cells, vote_gaussian_points
from focus_ros.warps import (FLOW, ROTATION_EXACT, ROTATION_SMALL_ANGLE, rotate_bearings_by_angular_acceleration,
                             rotation_matrix, warp_events, warp_gradient, warp_points)

FX, FY, CX, CY = 199.09, 198.83, 132.19, 110.71


def _events(count=200, seed=0):
    rng = np.random.default_rng(seed)
    bearings = np.column_stack([rng.uniform(-0.7, 0.7, count), rng.uniform(-0.5, 0.5, count)])
    dt = rng.uniform(-0.01, 0.01, count)
    return bearings, dt


@pytest.mark.parametrize("rotation_vector", [[0.3, -0.2, 0.1], [1e-9, 2e-9, -1e-9], [0.4, 0.2, -0.3], [1.5, -2.0, 0.7]])
def test_exponential_map_matches_scipy(rotation_vector):
    expected = Rotation.from_rotvec(rotation_vector).as_matrix()
    assert np.allclose(rotation_matrix(rotation_vector), expected, atol=1e-14)


def test_angular_acceleration_turns_each_bearing_by_its_formula():
    """Reference formula: b_k -> exp([alpha dt^2 / 2 - (omega x alpha) dt^3 / 6]x) (x_k, y_k, 1),
    scaled back to z = 1."""
    bearings, dt = _events()
    dt = dt * 5  # up to 50 ms
    alpha, omega = np.array([30.0, -120.0, 60.0]), np.array([2.0, 5.0, -1.0])  # rad/s^2, rad/s
    bearing_x, bearing_y = bearings[:, 0].copy(), bearings[:, 1].copy()
    rotate_bearings_by_angular_acceleration(bearing_x, bearing_y, dt, *alpha, *omega)
    for k in range(len(dt)):
        phi = 0.5 * alpha * dt[k] ** 2 - np.cross(omega, alpha) * dt[k] ** 3 / 6
        turned = Rotation.from_rotvec(phi).as_matrix() @ np.array([*bearings[k], 1.0])
        np.testing.assert_allclose([bearing_x[k], bearing_y[k]], turned[:2] / turned[2], rtol=0, atol=1e-13)


def test_angular_acceleration_warp_matches_the_integrated_rotation():
    """With the bearings turned, the exact warp at omega follows omega(t) = omega + alpha t: its
    result matches the rotation integrated finely from t_k to t_ref = 0 within 0.3 px (the
    next terms of the expansion, about |omega dt|^2 |alpha dt^2| / 12 = 1e-3 rad), at 10 rad/s
    and 300 rad/s^2 over +-30 ms, also when the warp is evaluated 0.5 rad/s away from the
    omega the bearings were turned for; without the (omega x alpha) dt^3 term (omega passed
    as 0) it is off by more than a pixel."""
    bearings, dt = _events()
    dt = dt * 3  # up to 30 ms
    omega, alpha = np.array([4.0, -9.0, 3.0]), np.array([100.0, 250.0, -150.0])
    expected = []
    for k in range(len(dt)):
        steps = 200
        rotation = np.eye(3)
        for i in range(steps):  # R = product of exp([omega(s) ds]x) from t_k towards 0
            s = dt[k] * (1 - (i + 0.5) / steps)
            rotation = Rotation.from_rotvec((omega + alpha * s) * dt[k] / steps).as_matrix() @ rotation
        seen = rotation @ np.array([*bearings[k], 1.0])
        expected.append([FX * seen[0] / seen[2] + CX, FY * seen[1] / seen[2] + CY])
    for turned_for, tolerance in ((omega, 0.3), (omega + [0.3, -0.3, 0.2], 0.3), (np.zeros(3), None)):
        bearing_x, bearing_y = bearings[:, 0].copy(), bearings[:, 1].copy()
        rotate_bearings_by_angular_acceleration(bearing_x, bearing_y, dt, *alpha, *turned_for)
        points, _ = warp_events(ROTATION_EXACT, np.column_stack([bearing_x, bearing_y]), dt, omega, FX, FY, CX, CY)
        error_px = np.abs(points - np.array(expected)).max()
        assert error_px < tolerance if tolerance else error_px > 1.0, (turned_for, error_px)


def test_exact_warp_is_rotation_then_pinhole():
    bearings, dt = _events()
    omega = np.array([3.0, -4.0, 2.0])
    points, _ = warp_events(ROTATION_EXACT, bearings, dt, omega, FX, FY, CX, CY)
    rotations = Rotation.from_rotvec(dt[:, None] * omega).as_matrix()
    rotated = np.einsum("kij,kj->ki", rotations, np.column_stack([bearings, np.ones(len(dt))]))
    assert np.allclose(points[:, 0], FX * rotated[:, 0] / rotated[:, 2] + CX, atol=1e-9)
    assert np.allclose(points[:, 1], FY * rotated[:, 1] / rotated[:, 2] + CY, atol=1e-9)


@pytest.mark.parametrize("model, theta", [(ROTATION_EXACT, [3.0, -4.0, 2.0]), (ROTATION_EXACT, [40.0, 30.0, -50.0]),
                                          (ROTATION_SMALL_ANGLE, [3.0, -4.0, 2.0]), (FLOW, [150.0, -80.0])])
def test_warp_jacobian_matches_central_differences(model, theta):
    bearings, dt = _events()
    theta = np.array(theta)
    _, jacobians = warp_events(model, bearings, dt, theta, FX, FY, CX, CY)
    step = 1e-5
    for column in range(len(theta)):
        shift = np.zeros(len(theta))
        shift[column] = step
        plus, _ = warp_events(model, bearings, dt, theta + shift, FX, FY, CX, CY)
        minus, _ = warp_events(model, bearings, dt, theta - shift, FX, FY, CX, CY)
        numeric = (plus - minus) / (2 * step)
        # truncation error of a central difference ~ step^2 * third derivative: far below 1e-6 px per unit
        assert np.allclose(jacobians[:, :, column], numeric, atol=1e-6, rtol=1e-6)


def test_small_angle_agrees_with_exact_for_small_rotations():
    bearings, dt = _events()
    omega = np.array([0.5, -0.3, 0.2])  # |omega dt| <= 0.006 rad
    exact, _ = warp_events(ROTATION_EXACT, bearings, dt, omega, FX, FY, CX, CY)
    small, _ = warp_events(ROTATION_SMALL_ANGLE, bearings, dt, omega, FX, FY, CX, CY)
    # second-order term: about f |phi|^2 (1 + |b|^2) ~ 200 * 3.6e-5 * 2 ~ 0.015 px at most
    difference = np.abs(exact - small).max()
    assert difference < 0.02
    exact_large, _ = warp_events(ROTATION_EXACT, bearings, dt, omega * 50, FX, FY, CX, CY)
    small_large, _ = warp_events(ROTATION_SMALL_ANGLE, bearings, dt, omega * 50, FX, FY, CX, CY)
    assert np.abs(exact_large - small_large).max() > 100 * difference  # they differ at large angles


def test_bilinear_votes_sum_to_in_frame_events_and_count_dropped():
    rng = np.random.default_rng(3)
    points = np.column_stack([rng.uniform(-20, 260, 5000), rng.uniform(-20, 200, 5000)])
    inside = (points[:, 0] >= 0) & (points[:, 0] <= 239) & (points[:, 1] >= 0) & (points[:, 1] <= 179)
    result = accumulate(points, 240, 180, kernel="bilinear")
    assert result.dropped == int((~inside).sum())
    assert np.array_equal(result.kept, inside)
    assert result.image.sum() == pytest.approx(inside.sum(), rel=1e-12)


def test_bilinear_vote_splits_by_distance():
    result = accumulate(np.array([[10.25, 20.5]]), 240, 180)
    image = result.image
    assert image[20, 10] == pytest.approx(0.75 * 0.5)
    assert image[20, 11] == pytest.approx(0.25 * 0.5)
    assert image[21, 10] == pytest.approx(0.75 * 0.5)
    assert image[21, 11] == pytest.approx(0.25 * 0.5)
    edge = accumulate(np.array([[239.0, 179.0]]), 240, 180).image
    assert edge[179, 239] == pytest.approx(1.0) and edge.sum() == pytest.approx(1.0)


def test_gaussian_kernel_is_normalised_and_centred():
    rng = np.random.default_rng(4)
    points = np.column_stack([rng.uniform(10, 229, 300), rng.uniform(10, 169, 300)])
    for sigma in (0.7, 1.0, 2.0):
        result = accumulate(points, 240, 180, kernel="gaussian", sigma=sigma)
        assert result.image.sum() == pytest.approx(len(points), rel=1e-12)
    single = accumulate(np.array([[100.3, 50.6]]), 240, 180, kernel="gaussian", sigma=1.0).image
    rows, columns = np.mgrid[0:180, 0:240]
    assert (single * columns).sum() == pytest.approx(100.3, abs=1e-2)  # mean of the sampled kernel
    assert (single * rows).sum() == pytest.approx(50.6, abs=1e-2)
    assert single[50, 100] > single[50, 99] and single[51, 100] > single[49, 100]


def test_polarity_weights_and_timestamp_image():
    points = np.array([[5.0, 5.0], [5.0, 5.0], [7.0, 5.0]])
    polarity = np.array([1.0, -1.0, -1.0])
    signed = accumulate(points, 20, 10, weights=polarity).image
    assert signed[5, 5] == 0.0 and signed[5, 7] == -1.0
    counts = accumulate(points, 20, 10).image
    assert counts[5, 5] == 2.0 and counts[5, 7] == 1.0
    timed = accumulate(points, 20, 10, timestamps=np.array([0.001, 0.003, 0.002]))
    assert timed.timestamp_image[5, 5] == pytest.approx(0.004)
    assert timed.timestamp_image[5, 7] == pytest.approx(0.002)


# ---------------------------------------------------------------- window kernels of the engine


@pytest.mark.parametrize("model, theta", [
    (ROTATION_EXACT, [3.0, -4.0, 2.0]),        # every angle < 0.5 rad: branch-free series kernel
    (ROTATION_EXACT, [40.0, 30.0, -50.0]),     # angles up to 0.7 rad: per-event trigonometric path
    (ROTATION_SMALL_ANGLE, [3.0, -4.0, 2.0]), (FLOW, [150.0, -80.0, 0.0])])
def test_window_kernels_match_the_per_event_warp_and_jacobian(model, theta):
    bearings, dt = _events(count=500, seed=11)
    theta = np.array(theta, dtype=np.float64)
    count = 2 if model == FLOW else 3
    points, jacobians = warp_events(model, bearings, dt, theta[:count], FX, FY, CX, CY)
    bearing_x = np.ascontiguousarray(bearings[:, 0])
    bearing_y = np.ascontiguousarray(bearings[:, 1])
    warped_x, warped_y = np.empty(len(dt)), np.empty(len(dt))
    warp_points(model, bearing_x, bearing_y, dt, theta, FX, FY, CX, CY, warped_x, warped_y)
    assert np.allclose(warped_x, points[:, 0], rtol=0, atol=1e-9)
    assert np.allclose(warped_y, points[:, 1], rtol=0, atol=1e-9)
    # gradient pass: sum_k (d_x, d_y)_k . J_k over the kept events, J from the per-event
    # Jacobian (itself checked against central differences above)
    rng = np.random.default_rng(5)
    d_x, d_y = rng.normal(size=len(dt)), rng.normal(size=len(dt))
    kept = rng.uniform(size=len(dt)) < 0.8
    warped_x[~kept] = np.nan  # a dropped event's position must not leak into the sum
    gradient = np.full(3, np.nan)
    warp_gradient(model, bearing_x, bearing_y, dt, theta, FX, FY, CX, CY, warped_x, warped_y,
                  d_x, d_y, kept, gradient)
    expected = np.einsum("k,kp->p", d_x[kept], jacobians[kept, 0, :]) + \
        np.einsum("k,kp->p", d_y[kept], jacobians[kept, 1, :])
    assert np.allclose(gradient[:count], expected, rtol=1e-10, atol=1e-12 * np.abs(expected).max())
    if model == FLOW:
        assert gradient[2] == 0.0


@pytest.mark.parametrize("kernel", ["bilinear", "gaussian"])
def test_window_voting_matches_accumulate(kernel):
    rng = np.random.default_rng(8)
    count = 3000
    warped_x = np.concatenate([rng.uniform(-5, 245, count - 3), [239.0, 0.0, np.nan]])
    warped_y = np.concatenate([rng.uniform(-5, 185, count - 3), [179.0, 0.0, 50.0]])
    weights = rng.choice([-1.0, 1.0], count)
    reference = accumulate(np.column_stack([warped_x, warped_y]), 240, 180, weights=weights, kernel=kernel)
    image = np.zeros(180 * 240)
    kept = np.zeros(count, dtype=np.bool_)
    offsets = np.zeros(count, dtype=np.int64)
    if kernel == "bilinear":
        cell, fraction_x, fraction_y = np.empty(count, dtype=np.int64), np.empty(count), np.empty(count)
        kept_count = bilinear_cells(warped_x, warped_y, 240, 180, cell, fraction_x, fraction_y, kept)
        vote_bilinear_cells(cell, fraction_x, fraction_y, kept, weights, offsets, 240, image)
    else:
        scratch = np.empty((4, gaussian_scratch_size(1.0)))
        kept_count = vote_gaussian_points(warped_x, warped_y, weights, offsets, 240, 180, 1.0, image, kept, scratch)
    assert kept_count == count - reference.dropped
    assert np.array_equal(kept, reference.kept)
    assert np.allclose(image.reshape(180, 240), reference.image, rtol=0, atol=1e-12)
