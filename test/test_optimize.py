"""Optimizers and the angular-velocity estimator: known-motion recovery, degeneracy,
and the real boxes_rotation slice against its published reference estimate."""

import math

import numpy as np
import pytest

from focus_ros.camera import Calibration
from focus_ros.estimators.angular_velocity import AngularVelocityEstimator, AngularVelocitySettings
from focus_ros.events import Events
from focus_ros.losses import LOSSES, get_loss
from focus_ros.objective import Objective
from focus_ros.optimize import (REAL_TIME_SETTINGS, OptimizerSettings, conjugate_gradient, lbfgs, minimize,
                                shortest_in_hull)
from focus_ros.warps import rotation_matrix
from test_objective import load_slice

TRUE_OMEGA = np.array([2.0, -3.0, 1.5])  # rad/s
DURATION_S = 0.01


def _quadratic(x):
    matrix = np.array([[4.0, 1.0, 0.0], [1.0, 3.0, 0.5], [0.0, 0.5, 2.0]])
    target = np.array([1.0, -2.0, 0.5])
    difference = x - target
    return 0.5 * difference @ matrix @ difference, matrix @ difference


@pytest.mark.parametrize("method", ["cg", "bfgs", "lbfgs"])
def test_optimizers_find_the_minimum_of_a_quadratic(method):
    settings = OptimizerSettings(gradient_tolerance=1e-8, value_tolerance=0.0, step_tolerance=0.0)
    result = minimize(_quadratic, np.zeros(3), method, settings)
    assert np.allclose(result.x, [1.0, -2.0, 0.5], atol=1e-6)
    assert result.evaluations >= result.iterations >= 1
    assert result.converged


def test_bfgs_warm_started_with_the_exact_inverse_hessian_takes_the_newton_step():
    """On a quadratic, H = A^-1 makes the first step -H g land on the minimum: the unit
    step is accepted at once (2 evaluations: start and minimum)."""
    matrix = np.array([[4.0, 1.0, 0.0], [1.0, 3.0, 0.5], [0.0, 0.5, 2.0]])
    settings = OptimizerSettings(gradient_tolerance=1e-8, value_tolerance=0.0, step_tolerance=0.0)
    result = minimize(_quadratic, np.zeros(3), "bfgs", settings, inverse_hessian=np.linalg.inv(matrix))
    assert np.allclose(result.x, [1.0, -2.0, 0.5], atol=1e-10)
    assert result.evaluations == 2
    cold = minimize(_quadratic, np.zeros(3), "bfgs", settings)
    assert cold.evaluations > 2
    # the returned estimate, after the quasi-Newton updates, approximates A^-1 (exact on
    # a quadratic after P independent steps with exact line searches; here: close)
    assert cold.inverse_hessian.shape == (3, 3)
    assert np.allclose(cold.inverse_hessian @ matrix, np.eye(3), atol=0.2)


def test_conjugate_gradient_first_step_from_a_warm_start_matrix():
    """CG sizes its first trial step by g.Hg / g.g of the given matrix."""
    calls = []

    def recording(x):
        calls.append(x.copy())
        return _quadratic(x)

    settings = OptimizerSettings(gradient_tolerance=1e-8, value_tolerance=0.0, step_tolerance=0.0)
    conjugate_gradient(recording, np.zeros(3), settings, inverse_hessian=0.37 * np.eye(3))
    _, gradient = _quadratic(np.zeros(3))
    assert np.allclose(calls[1], -0.37 * gradient, rtol=1e-12)


def test_conjugate_gradient_on_rosenbrock_and_caps():
    def rosenbrock(x):
        value = (1 - x[0]) ** 2 + 100 * (x[1] - x[0] ** 2) ** 2
        gradient = np.array([-2 * (1 - x[0]) - 400 * x[0] * (x[1] - x[0] ** 2), 200 * (x[1] - x[0] ** 2)])
        return value, gradient

    settings = OptimizerSettings(gradient_tolerance=1e-6, value_tolerance=0.0, step_tolerance=0.0,
                                 max_iterations=1000, max_evaluations=5000)
    result = conjugate_gradient(rosenbrock, np.array([-1.2, 1.0]), settings)
    assert np.allclose(result.x, [1.0, 1.0], atol=1e-4)
    capped = conjugate_gradient(rosenbrock, np.array([-1.2, 1.0]), OptimizerSettings(max_iterations=3))
    assert capped.iterations == 3 and not capped.converged
    assert lbfgs(rosenbrock, np.array([-1.2, 1.0]), settings).value < 1e-8


def test_shortest_vector_in_a_convex_hull():
    assert np.allclose(shortest_in_hull([np.array([1.0, 1.0]), np.array([1.0, -1.0])]), [1.0, 0.0])
    assert np.allclose(shortest_in_hull([np.array([2.0, 0.0]), np.array([-1.0, 0.0])]), [0.0, 0.0])
    assert np.allclose(shortest_in_hull([np.array([3.0, 4.0])]), [3.0, 4.0])
    corners = [np.eye(3)[i] for i in range(3)] + [np.full(3, 2.0)]
    assert np.allclose(shortest_in_hull(corners), np.full(3, 1.0 / 3.0))
    rng = np.random.default_rng(3)
    for _ in range(200):
        vectors = rng.normal(size=(rng.integers(1, 12), 3)) + rng.normal(size=3)
        shortest = shortest_in_hull(list(vectors))
        # the shortest: every vector (hence the hull) lies beyond the plane through it normal to it
        assert np.all(vectors @ shortest >= shortest @ shortest - 1e-9 * np.max(np.sum(vectors ** 2, axis=1)))


def _kinked(x):
    """5 |x_1| + (x_0 - 3)^2 / 2: a kink along x_1 = 0, the minimum at (3, 0). On the kink the
    gradient is that of the side x_1 >= 0 (bilinear voting also gives one piece's gradient)."""
    side = 1.0 if x[1] >= 0.0 else -1.0
    return 5.0 * abs(x[1]) + 0.5 * (x[0] - 3.0) ** 2, np.array([x[0] - 3.0, 5.0 * side])


@pytest.mark.parametrize("method", ["cg", "bfgs"])
def test_optimizers_go_on_along_a_kink_the_steepest_descent_crosses(method):
    """From (0, 0), on the kink, the steepest descent (3, -5) crosses it at once: no step along
    it decreases the cost. The optimizers stopped there ("no decrease along the steepest
    descent"); they now descend along the shortest combination of the gradients sampled on
    both sides (focus_ros.optimize, "Kinks"): along the kink, to the minimum (BFGS to 0.03 of
    it, where its steps across the kink fall below the step tolerance)."""
    result = minimize(_kinked, np.zeros(2), method)
    assert result.value < 0.01 < _kinked(np.zeros(2))[0], (result.x, result.message)
    assert abs(result.x[0] - 3.0) < 0.05 and abs(result.x[1]) < 1e-3, (result.x, result.message)
    assert result.converged


def test_conjugate_gradient_goes_on_where_it_stalled_on_the_mean_absolute_deviation(synthetic):
    """The case that stalled: CG on the mean absolute deviation of the synthetic edges (no
    polarity, unblurred IWE, the cost scaled by the start's score: the estimator's
    configuration), from 0.7 x the truth. It stopped 0.35 rad/s off at a score below the
    truth's (0.76436 < 0.76469), "no decrease along the steepest descent", beside a kink of
    the loss; it now reaches the loss's peak, which lies near the truth."""
    calibration, events = synthetic
    objective = Objective(calibration, get_loss("mean_absolute_deviation"), use_polarity=False)
    objective.set_events(events, int(events.t[0]))
    start = TRUE_OMEGA * 0.7
    scale = objective.value(start)

    def cost(omega):
        evaluation = objective.evaluate(omega)
        return -evaluation.value / scale, -evaluation.gradient / scale

    result = conjugate_gradient(cost, start)
    assert -result.value * scale > objective.value(TRUE_OMEGA)
    assert np.linalg.norm(result.x - TRUE_OMEGA) < 0.3, (result.x, result.message)


def synthetic_rotation_events(calibration: Calibration, omega=TRUE_OMEGA, count=20_000, seed=7) -> Events:
    """Events of edges at infinity seen by a camera rotating at constant omega (rad/s).

    Scene: 25 random straight edges in the undistorted image at t = 0, each with its own
    polarity. An event at time t_k sees scene bearing b_ref at
    b_k = exp(-[omega]x t_k) b_ref (so that exp([omega]x t_k) b_k = b_ref, the warp's
    convention with t_ref = 0), projected WITH the lens distortion and rounded to the
    pixel, like a real sensor.
    """
    rng = np.random.default_rng(seed)
    edges = 25
    starts = np.column_stack([rng.uniform(-0.5, 0.5, edges), rng.uniform(-0.35, 0.35, edges)])
    directions = rng.normal(size=(edges, 2))
    directions /= np.linalg.norm(directions, axis=1, keepdims=True)
    lengths = rng.uniform(0.1, 0.3, edges)
    edge = rng.integers(0, edges, count)
    along = rng.uniform(0, 1, count) * lengths[edge]
    reference = starts[edge] + along[:, None] * directions[edge]
    times = np.sort(rng.uniform(0.0, DURATION_S, count))
    bearings = np.column_stack([reference, np.ones(count)])
    seen = np.array([rotation_matrix(-omega * t) @ b for t, b in zip(times, bearings)])
    pixels = np.rint(calibration.project(seen, distort=True))
    inside = ((pixels[:, 0] >= 0) & (pixels[:, 0] < calibration.width)
              & (pixels[:, 1] >= 0) & (pixels[:, 1] < calibration.height))
    polarity = np.where(edge % 2 == 0, 1, -1)
    t_ns = np.round(times * 1e9).astype(np.int64)
    return Events.from_arrays(pixels[inside, 0], pixels[inside, 1], t_ns[inside], polarity[inside])


@pytest.fixture(scope="module")
def synthetic():
    calibration = Calibration.davis240c()
    return calibration, synthetic_rotation_events(calibration)


#: known failures on the synthetic edges, measured and reported, not hidden by a looser
#: tolerance: losses whose own focus peak is off the truth in the configuration the test runs
#: (the statistical MAV and entropy on the unblurred IWE, the spatial local MAV with the 1-px
#: blur; docs/evaluation/angular_velocity.md, "Losses whose optimizer stalled", has the
#: measurements). Each fails the recovery's assertions (xfail with raises=AssertionError) after
#: the test has checked that it fails as documented here (:func:`_check_documented_failure`,
#: pytest.fail otherwise). (The mean absolute deviation was here: its optimizer stalled on a kink,
#: not its peak.) range_exponential fails only with the blur (peak 0.33 rad/s off), not by default.
WEAK_ON_SYNTHETIC = {
    "mean_absolute_value": "the loss's peak is 0.62-0.71 rad/s off (omega_z 0.80-0.91): the estimate, 0.63 "
                           "off, scores 0.42821 > 0.42795 at the truth",
    "entropy": "no motion scores 1.821 > 1.696 at the truth, which is no peak (the loss's peaks found lie "
               "5-6 rad/s off): the optimum found (7.4 rad/s off, 1.719) is withheld as a flat focus",
    "local_mean_absolute_value": "the loss's peak is 0.20-0.28 rad/s off (17575.3 > 17570.9 at the truth); the "
                                 "estimate stops at a local peak 0.57 off, 17572.7",
}


def _check_documented_failure(name, estimator, events, estimate):
    """The failure WEAK_ON_SYNTHETIC documents for this loss: the score at the estimate above
    the score at the truth, the estimate 0.3 rad/s off or more (entropy: no motion scores above
    the truth, the estimate is withheld as a flat focus). pytest.fail, not an AssertionError, when
    it has changed: the xfail expects AssertionError only."""
    estimator.objective.set_events(events, int(events.t[0]))

    def score(omega):
        return estimator.loss.sign * estimator.objective.value(np.asarray(omega, dtype=np.float64))

    at_truth = score(TRUE_OMEGA)
    if name == "entropy":
        documented = score(np.zeros(3)) > at_truth and estimate.withheld == "flat_focus"
    else:
        documented = (not estimate.degenerate and score(estimate.angular_velocity) > at_truth
                      and np.linalg.norm(estimate.angular_velocity - TRUE_OMEGA) >= 0.3)
    if not documented:
        pytest.fail(f"{name} no longer fails as documented ({WEAK_ON_SYNTHETIC[name]}): estimate "
                    f"{estimate.angular_velocity}, {estimate.withheld or 'published'}, score at the truth {at_truth}")


def _usable_cases():
    for name in LOSSES:
        loss = get_loss(name)
        polarity = "with" in loss.polarity_modes and not loss.uses_timestamps
        if "without" in loss.polarity_modes and not loss.degenerate_without_polarity:
            polarity = False
        marks = ()
        if name in WEAK_ON_SYNTHETIC:
            marks = pytest.mark.xfail(strict=True, raises=AssertionError, reason=WEAK_ON_SYNTHETIC[name])
        yield pytest.param(name, polarity, id=f"{name}-{'pol' if polarity else 'nopol'}", marks=marks)


@pytest.mark.parametrize("name, polarity", list(_usable_cases()))
def test_each_usable_loss_recovers_a_known_angular_velocity(synthetic, name, polarity):
    calibration, events = synthetic
    estimator = AngularVelocityEstimator(calibration, AngularVelocitySettings(
        loss=name, use_polarity=polarity, t_ref="start"))
    estimate = estimator.estimate(events, initial=TRUE_OMEGA * 0.7)
    if name in WEAK_ON_SYNTHETIC:
        _check_documented_failure(name, estimator, events, estimate)
    assert not estimate.degenerate, estimate.message
    # Tolerance: events are rounded to integer pixels (+-0.5 px). An error d omega moves
    # the window's last events by ~ f |d omega| T = 200 px * 0.3 rad/s * 10 ms = 0.6 px
    # relative to its first ones: below the pixel quantisation, the resolution limit of
    # the data, so 0.3 rad/s (about 8 % of |omega| = 3.9 rad/s).
    assert np.linalg.norm(estimate.angular_velocity - TRUE_OMEGA) < 0.3, estimate.angular_velocity
    assert estimate.score >= estimate.score_at_initial


@pytest.mark.parametrize("name", ["area_exponential", "area_gaussian", "area_lorentzian", "area_hyperbolic"])
def test_area_with_polarity_recovers_a_known_angular_velocity(synthetic, name):
    """The area "with polarity" (sum over the positive and the negative events' count
    images, paper footnote of Supp. Sec. B) is accepted and finds the motion; same
    tolerance and reasoning as the test above."""
    calibration, events = synthetic
    estimator = AngularVelocityEstimator(calibration, AngularVelocitySettings(
        loss=name, use_polarity=True, t_ref="start"))
    assert estimator.objective.split_polarity
    estimate = estimator.estimate(events, initial=TRUE_OMEGA * 0.7)
    assert not estimate.degenerate, estimate.message
    assert np.linalg.norm(estimate.angular_velocity - TRUE_OMEGA) < 0.3, estimate.angular_velocity
    assert estimate.score >= estimate.score_at_initial


@pytest.mark.parametrize("name", [n for n in LOSSES if get_loss(n).degenerate_without_polarity])
def test_degenerate_losses_are_reported_not_estimated(synthetic, name):
    calibration, events = synthetic
    estimator = AngularVelocityEstimator(calibration, AngularVelocitySettings(loss=name, use_polarity=False))
    estimate = estimator.estimate(events)
    assert estimate.degenerate
    assert "degenerate without polarity" in estimate.message
    assert np.all(np.isnan(estimate.angular_velocity))


def test_too_few_events_is_degenerate(synthetic):
    calibration, events = synthetic
    estimator = AngularVelocityEstimator(calibration)
    estimate = estimator.estimate(events[:10])
    assert estimate.degenerate and "fewer than the minimum" in estimate.message


def test_polarity_mode_the_loss_does_not_support_is_rejected():
    # the mean timestamp has no polarity version (paper Table 2 '-'); the area now has one
    with pytest.raises(ValueError, match="mean_timestamp' works only without polarity, not with"):
        AngularVelocityEstimator(Calibration.davis240c(),
                                 AngularVelocitySettings(loss="mean_timestamp", use_polarity=True))
    with pytest.raises(ValueError, match="unknown loss"):
        AngularVelocityEstimator(Calibration.davis240c(), AngularVelocitySettings(loss="sharpness"))


@pytest.mark.parametrize("name", ["variance", "gradient_magnitude", "area_hyperbolic"])
@pytest.mark.parametrize("settings", [OptimizerSettings(), REAL_TIME_SETTINGS], ids=["default", "real_time"])
def test_bfgs_recovers_a_known_angular_velocity(synthetic, name, settings):
    """The faster quasi-Newton option: same recovery tolerance as CG above."""
    calibration, events = synthetic
    estimator = AngularVelocityEstimator(calibration, AngularVelocitySettings(
        loss=name, use_polarity=False, t_ref="start", optimizer="bfgs", optimizer_settings=settings))
    estimate = estimator.estimate(events, initial=TRUE_OMEGA * 0.7)
    assert not estimate.degenerate, estimate.message
    assert np.linalg.norm(estimate.angular_velocity - TRUE_OMEGA) < 0.3, estimate.angular_velocity
    # warm start: the next window (here the same events) starts from the estimate
    again = estimator.estimate(events)
    assert np.array_equal(again.initial, estimate.angular_velocity)
    assert again.evaluations <= estimate.evaluations
    assert np.linalg.norm(again.angular_velocity - TRUE_OMEGA) < 0.3


def test_warm_start_reuses_the_previous_estimate(synthetic):
    calibration, events = synthetic
    estimator = AngularVelocityEstimator(calibration, AngularVelocitySettings(t_ref="start"))
    first = estimator.estimate(events)
    second = estimator.estimate(events)
    assert np.array_equal(second.initial, first.angular_velocity)
    assert second.evaluations <= first.evaluations
    estimator.reset()
    assert not estimator.estimate(events).initial.any()


@pytest.mark.parametrize("name, optimizer", [
    ("variance", "cg"), ("gradient_magnitude", "cg"), ("variance", "lbfgs"),
    ("variance", "bfgs"), ("gradient_magnitude", "bfgs"), ("variance", "bfgs_real_time"),
    ("gradient_magnitude", "lbfgs")])  # (without the IWE blur L-BFGS-B jumped to a lower peak here)
def test_real_slice_from_zero_reaches_the_reference_sharpness(name, optimizer):
    events, calibration = load_slice("boxes_rotation")
    real_time = optimizer.endswith("_real_time")
    estimator = AngularVelocityEstimator(calibration, AngularVelocitySettings(
        loss=name, t_ref="start", optimizer=optimizer.removesuffix("_real_time"),
        optimizer_settings=REAL_TIME_SETTINGS if real_time else OptimizerSettings()))
    estimate = estimator.estimate(events, initial=np.zeros(3))
    objective = estimator.objective
    reference = np.array([3.576, 3.945, -1.754])  # published estimate, same warp convention
    score_at_reference = estimator.loss.sign * objective.value(reference)
    assert estimate.score >= score_at_reference
    assert estimate.score > estimate.score_at_zero
    # and it is the same peak: within the README's +-0.5 rad/s of the published estimate
    assert np.all(np.abs(estimate.angular_velocity - reference) < 0.5)
    assert math.isfinite(estimate.score)


@pytest.mark.parametrize("name", ["variance", "gradient_magnitude", "area_lorentzian"])
def test_unblurred_iwe_still_recovers_a_known_angular_velocity(synthetic, name):
    """blur_sigma_px = 0 (bilinear voting only) stays available: same tolerance as above."""
    calibration, events = synthetic
    estimator = AngularVelocityEstimator(calibration, AngularVelocitySettings(
        loss=name, use_polarity=False, t_ref="start", blur_sigma_px=0.0))
    assert estimator.objective.blur_sigma_px == 0.0
    estimate = estimator.estimate(events, initial=TRUE_OMEGA * 0.7)
    assert np.linalg.norm(estimate.angular_velocity - TRUE_OMEGA) < 0.3, estimate.angular_velocity


#: losses that, on the real boxes_rotation slice from omega = 0, stayed near 0 (or ran away)
#: with the bilinear IWE alone and reach the motion with the default blur (measured)
RESCUED_BY_THE_BLUR = [("local_mean_absolute_deviation", False), ("morans_index", False),
                       ("morans_index", True), ("gearys_contiguity_ratio", False), ("laplacian_magnitude", False),
                       ("laplacian_magnitude", True), ("hessian_magnitude", True),
                       ("variance_of_laplacian", False), ("local_variance", False)]
# (entropy without polarity also leaves 0 now but ends 0.53 rad/s off in omega_z: not listed)


@pytest.mark.parametrize("name, polarity", RESCUED_BY_THE_BLUR,
                         ids=[f"{n}-{'pol' if p else 'nopol'}" for n, p in RESCUED_BY_THE_BLUR])
def test_blurred_iwe_lets_weak_losses_start_from_zero_on_a_real_slice(name, polarity):
    """The paper's smooth IWE (blur sigma 1 px, the default): from omega = 0 these losses reach
    the published estimate's peak, within the README's +-0.5 rad/s per axis."""
    events, calibration = load_slice("boxes_rotation")
    estimator = AngularVelocityEstimator(calibration, AngularVelocitySettings(
        loss=name, use_polarity=polarity, t_ref="start"))
    assert estimator.objective.blur_sigma_px == 1.0
    estimate = estimator.estimate(events, initial=np.zeros(3))
    assert not estimate.degenerate, estimate.message
    reference = np.array([3.576, 3.945, -1.754])
    assert np.all(np.abs(estimate.angular_velocity - reference) < 0.5), estimate.angular_velocity
    assert estimate.score > estimate.score_at_zero


def test_extrapolated_warm_start_follows_the_last_two_estimates(synthetic):
    """warm_start "extrapolate": window k starts on the line through the estimates of windows
    k-2 and k-1 (constant angular acceleration), evaluated at window k's t_ref; "previous"
    starts at window k-1's estimate; a gap longer than gap_reset_windows restarts from 0."""
    calibration, events = synthetic
    thirds = [events[i * len(events) // 3:(i + 1) * len(events) // 3] for i in range(3)]
    for warm_start in ("extrapolate", "previous"):
        estimator = AngularVelocityEstimator(calibration, AngularVelocitySettings(warm_start=warm_start))
        first, second = estimator.estimate(thirds[0]), estimator.estimate(thirds[1])
        third = estimator.estimate(thirds[2])
        if warm_start == "previous":
            np.testing.assert_array_equal(third.initial, second.angular_velocity)
        else:
            fraction = (third.t_ref_ns - second.t_ref_ns) / (second.t_ref_ns - first.t_ref_ns)
            expected = second.angular_velocity + fraction * (second.angular_velocity - first.angular_velocity)
            np.testing.assert_allclose(third.initial, expected, rtol=1e-12)
    late = thirds[2][:len(thirds[2]) // 2]
    shifted = Events(late.x, late.y, late.t + 10**9, late.p)  # a 1-s gap: hundreds of windows
    assert not estimator.estimate(shifted).initial.any()
    with pytest.raises(ValueError, match="warm start"):
        AngularVelocityEstimator(calibration, AngularVelocitySettings(warm_start="guess"))


def _simulated_windows(profile, seed=3, duration_s=0.5):
    """30,000-event windows of the simulator's textured panorama seen along ``profile``, and
    the ground-truth angular velocity (rad/s) as a function of time (ns)."""
    from focus_ros.evaluation.ground_truth import from_imu
    from focus_ros.sources.simulator import EventSimulator, PanoramaScene, Trajectory
    from focus_ros.windows import count_windows
    recording = EventSimulator(PanoramaScene.generate(seed), Trajectory(profile, duration_s),
                               Calibration.davis240c(), seed=seed).simulate()
    return recording.calibration, list(count_windows([recording.events], 30000)), from_imu(recording.imu, 0).at


def _window_errors(calibration, windows, truth_at, **changes):
    from focus_ros.estimators.angular_velocity import real_time_settings
    estimator = AngularVelocityEstimator(calibration, real_time_settings(**changes))
    estimates = [estimator.estimate(window) for window in windows]
    omega = np.array([estimate.angular_velocity for estimate in estimates])
    errors = np.linalg.norm(omega - truth_at(np.array([estimate.t_ref_ns for estimate in estimates])), axis=1)
    return estimates, errors


def test_constant_velocity_check_models_the_acceleration_where_omega_changes_fast():
    """omega_y ramps through zero at 40 rad/s^2 (2,300 deg/s^2): near the crossing the event rate
    drops, a 30,000-event window lasts 40-85 ms and omega changes by up to 3.4 rad/s within it,
    which the constant-velocity warp cannot fit. The check (max_change_in_window_rad_s = 1) solves
    those windows again with the warp of constant angular acceleration taken from the last
    estimates; without it their error is many times the median (the issue-13 criterion: no
    window above 5x the median error)."""
    def ramp(t_s):
        t_s = np.atleast_1d(np.asarray(t_s, np.float64))
        return np.column_stack([np.full_like(t_s, 1.0), 40.0 * (t_s - 0.25), np.full_like(t_s, 0.5)])

    calibration, windows, truth_at = _simulated_windows(ramp)
    durations_ms = np.array([(window.t[-1] - window.t[0]) * 1e-6 for window in windows])
    checked, errors = _window_errors(calibration, windows, truth_at)
    _, errors_unchecked = _window_errors(calibration, windows, truth_at, max_change_in_window_rad_s=0.0)
    accelerated = np.array([estimate.angular_acceleration is not None for estimate in checked])
    assert accelerated[durations_ms > 40].all() and not accelerated[durations_ms < 20].any()
    for estimate in np.array(checked)[accelerated]:  # the acceleration used is the true one
        np.testing.assert_allclose(estimate.angular_acceleration, [0.0, 40.0, 0.0], atol=8.0)
    # the failure the check is for: without it the long windows are far above 5x the median
    assert errors_unchecked[accelerated].max() > 5 * np.median(errors_unchecked)
    # with it they are not (the first windows, at 10 rad/s, keep their own 0.06 rad/s errors)
    assert errors[accelerated].max() < 5 * np.median(errors), np.round(errors, 3)
    assert np.all(errors[accelerated] < errors_unchecked[accelerated] + 0.01)


def test_a_cold_window_refines_the_acceleration_measured_on_its_halves():
    """omega_y oscillates at 12 rad/s, 1.5 Hz: at the zero crossing the longest window lasts
    about 65 ms and omega changes within it at about 113 rad/s^2, faster and faster away from
    t_ref. Started cold, the window's acceleration comes from its two halves, each solved
    with a constant omega, which misjudges it (155 rad/s^2 here); solving the halves again
    with the warp of that acceleration (``cold_acceleration_refinements``) brings it to the
    truth, and the estimate closer to it."""
    def oscillation(t_s):
        t_s = np.atleast_1d(np.asarray(t_s, np.float64))
        return np.column_stack([np.full_like(t_s, 1.0), 12.0 * np.sin(2 * np.pi * 1.5 * (t_s - 0.25)),
                                np.full_like(t_s, 0.5)])

    from focus_ros.estimators.angular_velocity import real_time_settings
    calibration, windows, truth_at = _simulated_windows(oscillation)
    window = max(windows, key=lambda events: int(events.t[-1] - events.t[0]))  # the crossing
    results = {}
    for refinements in (0, 3):
        estimate = AngularVelocityEstimator(
            calibration, real_time_settings(cold_acceleration_refinements=refinements)).estimate(window)
        assert estimate.angular_acceleration is not None
        t_ref = estimate.t_ref_ns
        true_acceleration = (truth_at(np.array([t_ref + 10**6]))[0] - truth_at(np.array([t_ref - 10**6]))[0]) / 2e-3
        results[refinements] = (np.linalg.norm(estimate.angular_acceleration - true_acceleration),
                                np.linalg.norm(estimate.angular_velocity - truth_at(np.array([t_ref]))[0]))
    (unrefined_alpha_error, unrefined_error), (refined_alpha_error, refined_error) = results[0], results[3]
    assert unrefined_alpha_error > 20.0, results    # the halves alone misjudge it (what this is for)
    assert refined_alpha_error < 8.0, results       # rad/s^2, against ~113
    assert refined_error < unrefined_error, results


def test_constant_velocity_check_leaves_constant_rotation_alone():
    """At constant omega the check finds no acceleration: no window is solved again, and the
    estimates are those of the estimator without the check."""
    from focus_ros.sources.simulator import ConstantAngularVelocity
    calibration, windows, truth_at = _simulated_windows(ConstantAngularVelocity((1.0, -3.0, 0.5)))
    checked, errors = _window_errors(calibration, windows, truth_at)
    _, errors_unchecked = _window_errors(calibration, windows, truth_at, max_change_in_window_rad_s=0.0)
    assert all(estimate.angular_acceleration is None for estimate in checked)
    np.testing.assert_array_equal(errors, errors_unchecked)
