"""Patch optical flow: the batched engine against the registry losses and finite differences, the
batched optimiser, the estimator on scenes of known flow, invalid patches, the rotation ground
truth, and ``focus-ros flow``."""

from __future__ import annotations

import csv

import numpy as np
import pytest

from flow_scenes import translating_dots, translating_edge
from focus_ros.camera import Calibration
from focus_ros.estimators.optical_flow import (APERTURE, FEW_EVENTS, VALID, OpticalFlowEstimator,
                                               OpticalFlowSettings, fill_affine, fill_from_neighbours)
from focus_ros.events import Events
from focus_ros.losses import LOSSES, LossOptions, get_loss
from focus_ros.optimize import OptimizerSettings
from focus_ros.flow.batched_bfgs import minimize_batched
from focus_ros.flow.patch_losses import BATCHED, GAP_ROWS, evaluate_stack
from focus_ros.flow.patches import PatchGrid, PatchObjective
from focus_ros.warps import rotation_matrix

WIDTH, HEIGHT = 90, 75  # a small sensor: 6 x 5 patches of 15 px keep the tests fast
TRUE_FLOW = np.array([120.0, -90.0])
#: the synthetic scenes below (e.g. 300 dots, 8000 events over the 30 patches: ~270 events per
#: patch, fewer where the dots are sparse) were sized for a threshold of 100 events per patch; the
#: estimator's default of 150 (chosen on the simulated DAVIS sequences: EVALUATION.md, Flow) would
#: leave a third of their patches without a flow, and these tests are about the solver; likewise the
#: area losses' event scale: the estimator's λ0 = 2 events (FLOW_LOSS_OPTIONS, chosen on the simulated
#: sequences) counts the dots' thinly hit pixels as half empty, the losses' own default λ0 = 1 does not
SCENE = {"min_events_per_patch": 100, "loss_options": LossOptions()}
#: each window as given, no motion bound (defaults since the windows sized by the motion): for the
#: tests of another option whose premise is the window as cut (test_flow_windows.py tests those)
AS_CUT = {"window_motion_px": 0.0, "min_motion_px": 0.0}


def _tile_stack(rng, count=5, tile=19, signed=False):
    stack = np.zeros((count, tile + GAP_ROWS, tile))
    values = rng.poisson(1.2, size=(count, tile, tile)).astype(np.float64)
    if signed:
        values -= rng.poisson(1.0, size=values.shape)
    stack[:, :tile, :] = values
    return stack


@pytest.mark.parametrize("name", sorted(BATCHED) + ["mean_absolute_deviation", "local_variance", "gearys_contiguity_ratio"])
def test_stack_losses_equal_the_registry_tile_by_tile(name):
    """Every tile's value and gradient image equal the registry loss on that tile alone (the
    batched forms and the fallback loop alike)."""
    rng = np.random.default_rng(7)
    loss = get_loss(name)
    stack = _tile_stack(rng, signed="with" in loss.polarity_modes)
    tile = stack.shape[2]
    values, gradient = evaluate_stack(loss, stack, tile, np.ones(len(stack), dtype=bool))
    assert np.all(gradient[:, tile:, :] == 0.0)
    for index in range(len(stack)):
        value, grad_image, _ = loss.evaluate(stack[index, :tile, :].copy())
        assert values[index] == pytest.approx(value, rel=1e-10, abs=1e-12)
        np.testing.assert_allclose(gradient[index, :tile, :], grad_image, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("name, blur", [("variance", 0.0), ("gradient_magnitude", 1.0),
                                        ("variance_of_laplacian", 1.0), ("laplacian_magnitude", 0.0),
                                        ("area_lorentzian", 0.0)])
def test_gradient_with_respect_to_flow_matches_finite_differences(name, blur):
    events = translating_dots(TRUE_FLOW, dots=300, events=6000, width=WIDTH, height=HEIGHT, seed=1)
    grid = PatchGrid(WIDTH, HEIGHT, 15)
    objective = PatchObjective(grid, name, blur_sigma_px=blur)
    objective.set_events(events, int(events.t[len(events) // 2]))
    rng = np.random.default_rng(3)
    flow = TRUE_FLOW + rng.normal(0.0, 40.0, (grid.count, 2))
    analytic = objective.evaluate(flow).gradients
    step = 1e-3  # px/s: moves events by < 1e-5 px, far below a bilinear cell
    for axis in range(2):
        plus, minus = flow.copy(), flow.copy()
        plus[:, axis] += step
        minus[:, axis] -= step
        numeric = (objective.evaluate(plus, with_gradient=False).values
                   - objective.evaluate(minus, with_gradient=False).values) / (2 * step)
        np.testing.assert_allclose(analytic[:, axis], numeric, rtol=1e-4, atol=1e-9 * np.abs(numeric).max())


def test_evaluating_a_few_patches_gives_their_values_of_the_whole_grid():
    """With few patches active the engine warps only their events: same values and gradients."""
    events = translating_dots(TRUE_FLOW, dots=300, events=6000, width=WIDTH, height=HEIGHT, seed=1)
    grid = PatchGrid(WIDTH, HEIGHT, 15)
    objective = PatchObjective(grid, "gradient_magnitude", blur_sigma_px=1.0)
    objective.set_events(events, int(events.t[len(events) // 2]))
    flow = TRUE_FLOW + np.random.default_rng(4).normal(0.0, 40.0, (grid.count, 2))
    everything = objective.evaluate(flow)
    active = np.zeros(grid.count, dtype=bool)
    active[[3, 7, 8, 20]] = True
    few = objective.evaluate(flow, active)
    np.testing.assert_allclose(few.values[active], everything.values[active], rtol=1e-12)
    np.testing.assert_allclose(few.gradients[active], everything.gradients[active], rtol=1e-12, atol=1e-15)
    np.testing.assert_array_equal(few.kept[active], everything.kept[active])


def test_batched_optimizer_solves_independent_quadratics():
    """Each problem of the batch reaches its own minimiser, whatever the others' scale."""
    rng = np.random.default_rng(0)
    batch = 40
    centers = rng.normal(0.0, 5.0, (batch, 2))
    matrices = []
    for _ in range(batch):
        rotation = np.linalg.qr(rng.normal(size=(2, 2)))[0]
        matrices.append(rotation @ np.diag(rng.uniform(0.05, 20.0, 2)) @ rotation.T)
    matrices = np.array(matrices)
    calls = []

    def cost(x, active):
        calls.append(active.copy())
        difference = x - centers
        gradient = np.einsum("bij,bj->bi", matrices, difference)
        return 0.5 * np.einsum("bi,bi->b", difference, gradient), gradient

    active = np.ones(batch, dtype=bool)
    active[5] = False
    result = minimize_batched(cost, np.zeros((batch, 2)), active,
                              OptimizerSettings(gradient_tolerance=1e-9, value_tolerance=0.0, step_tolerance=0.0,
                                                max_iterations=100, initial_step=1.0, max_line_search_evaluations=20))
    solved = np.flatnonzero(active)
    np.testing.assert_allclose(result.x[solved], centers[solved], atol=1e-6)
    assert result.converged[solved].all()
    assert np.all(result.x[5] == 0.0)  # an inactive problem is left alone
    assert result.evaluations == len(calls)


# the losses whose flow is checked on the translating dots: registry losses that run on a patch
# with that polarity, except those measured unreliable on 15x15 patches with ~250 events:
# entropy (the 200-bin histogram of a 19x19 tile is too coarse: 40-150 px/s off), Moran's
# index and the local mean absolute value (flat: patches reported invalid), MAD / MAV with
# polarity (half the patches flat), the range (median 20 px/s off, one patch 150 px/s)
UNRELIABLE = {("range_exponential", False), ("range_exponential", True), ("entropy", False), ("entropy", True), ("morans_index", False), ("morans_index", True),
              ("local_mean_absolute_value", True), ("mean_absolute_deviation", True),
              ("mean_absolute_value", True)}
USABLE = [(name, polarity) for name, loss in LOSSES.items() for polarity in (False, True)
          if not loss.uses_timestamps and ("with" if polarity else "without") in loss.polarity_modes
          and (name, polarity) not in UNRELIABLE]


@pytest.fixture(scope="module")
def dots():
    return translating_dots(TRUE_FLOW, dots=300, events=8000, duration_s=0.02, width=WIDTH, height=HEIGHT, seed=3)


@pytest.mark.parametrize("name, polarity", USABLE)
def test_every_usable_loss_recovers_a_known_translation(dots, name, polarity):
    """Tolerance: the scene's events are pixel-quantised with 0.2 px position noise, ~27 events
    per dot over 20 ms, so each dot's track is known to about 0.3 px: 20 px/s over the window
    (0.4 px) for the median patch, 70 px/s for any patch, and most patches valid."""
    estimator = OpticalFlowEstimator(WIDTH, HEIGHT, OpticalFlowSettings(**SCENE, loss=name, use_polarity=polarity))
    estimate = estimator.estimate(dots)
    valid = estimate.valid
    assert valid.sum() >= 0.6 * estimate.grid.count
    error = np.linalg.norm(estimate.flow[valid] - TRUE_FLOW, axis=1)
    assert np.median(error) < 20.0
    assert error.max() < 70.0
    assert np.all(np.isnan(estimate.flow[~valid]))


def test_warm_start_tracks_the_flow_of_the_next_window():
    estimator = OpticalFlowEstimator(WIDTH, HEIGHT, OpticalFlowSettings(**SCENE, pyramid_patch_sizes=()))
    first = translating_dots(TRUE_FLOW, dots=300, events=8000, width=WIDTH, height=HEIGHT, seed=4)
    estimator.estimate(first)  # from v = 0 without a pyramid: not every patch finds it
    later = translating_dots(TRUE_FLOW * 1.1, dots=300, events=8000, width=WIDTH, height=HEIGHT, seed=5)
    shifted = Events(later.x, later.y, later.t + (int(first.t[-1]) - int(later.t[0]) + 1000), later.p)
    estimate = estimator.estimate(shifted)
    error = np.linalg.norm(estimate.flow[estimate.valid] - TRUE_FLOW * 1.1, axis=1)
    assert estimate.valid.sum() >= 0.8 * estimate.grid.count
    assert np.median(error) < 20.0


def test_warm_start_holes_are_filled_ring_by_ring_from_the_nearest_flows():
    """A 5 x 4 grid with two known flows: their 8-neighbours get the mean of the known ones they
    touch, the next ring the mean of the first ring's, and so on; a grid without any flow stays
    unknown (no invented start)."""
    grid = PatchGrid(75, 60, 15)
    assert (grid.columns, grid.rows) == (5, 4)
    flows = np.full((grid.count, 2), np.nan)
    flows[0] = (10.0, 0.0)  # row 0, column 0
    flows[4] = (30.0, -6.0)  # row 0, column 4
    filled = fill_from_neighbours(flows, grid.neighbours())
    np.testing.assert_array_equal(filled[[0, 4]], flows[[0, 4]])
    assert np.all(np.isfinite(filled))
    np.testing.assert_allclose(filled[1], (10.0, 0.0))  # touches patch 0 only
    np.testing.assert_allclose(filled[3], (30.0, -6.0))  # touches patch 4 only
    np.testing.assert_allclose(filled[2], (20.0, -3.0))  # ring 2: the mean of its filled neighbours 1, 3, 6, 8
    np.testing.assert_allclose(filled[15], filled[10])  # column 0, row 3: only row 2's ring reaches it
    assert np.all(np.isnan(fill_from_neighbours(np.full((grid.count, 2), np.nan), grid.neighbours())))


def test_affine_warm_start_fill_extends_the_field_of_a_rotation_and_ignores_a_wrong_flow():
    """The flow field of a rotation about the optical axis plus a pan (v = (40 - 2 (y - 90),
    -30 + 2 (x - 120)) px/s on 240 x 180) known on 12 scattered patches, one of them 400 px/s
    off: every other patch gets the exact field (the wrong flow left out of the refit, and kept
    where it was); with fewer than 8 known flows the ring fill is used."""
    grid = PatchGrid(240, 180, 15)
    centers = grid.centers
    field = np.column_stack([40.0 - 2.0 * (centers[:, 1] - 90.0), -30.0 + 2.0 * (centers[:, 0] - 120.0)])
    known = np.random.default_rng(2).choice(grid.count, 12, replace=False)
    flows = np.full((grid.count, 2), np.nan)
    flows[known] = field[known]
    flows[known[0]] += (400.0, 0.0)
    filled = fill_affine(flows, centers, grid.neighbours())
    missing = np.setdiff1d(np.arange(grid.count), known)
    np.testing.assert_allclose(filled[missing], field[missing], atol=1e-6)
    np.testing.assert_array_equal(filled[known], flows[known])
    few = np.full((grid.count, 2), np.nan)
    few[known[:7]] = field[known[:7]]
    np.testing.assert_array_equal(fill_affine(few, centers, grid.neighbours()),
                                  fill_from_neighbours(few, grid.neighbours()))


def test_empty_window_and_too_few_events_are_invalid():
    estimator = OpticalFlowEstimator(WIDTH, HEIGHT)
    empty = estimator.estimate(Events.empty())
    assert np.all(empty.reason == FEW_EVENTS) and np.all(np.isnan(empty.flow))
    sparse = translating_dots(TRUE_FLOW, dots=300, events=500, width=WIDTH, height=HEIGHT)  # < min_window_events
    estimate = estimator.estimate(sparse)
    assert np.all(estimate.reason == FEW_EVENTS) and np.all(np.isnan(estimate.flow))


def test_empty_patches_are_invalid_and_others_are_not():
    """Dots only in the left half: the right half's patches have no events."""
    events = translating_dots(TRUE_FLOW, dots=400, events=9000, width=WIDTH, height=HEIGHT, seed=2)
    left = events.x < 40
    events = Events(events.x[left], events.y[left], events.t[left], events.p[left])
    estimate = OpticalFlowEstimator(WIDTH, HEIGHT, OpticalFlowSettings(**SCENE)).estimate(events)
    right = estimate.grid.origins[:, 0] >= 45
    assert np.all(estimate.reason[right] == FEW_EVENTS)
    assert np.all(np.isnan(estimate.flow[right]))
    assert np.any(estimate.reason[~right] == VALID)


@pytest.mark.parametrize("angle_deg", [0.0, 35.0, 90.0])
def test_one_edge_is_an_aperture_problem_not_a_flow(angle_deg):
    """A straight edge: no patch may claim a full flow vector (the component along the edge is
    unobservable); the patches it crosses say why."""
    angle = np.deg2rad(angle_deg)
    events = translating_edge(TRUE_FLOW, angle, center=(WIDTH / 2, HEIGHT / 2), events=8000, width=WIDTH,
                              height=HEIGHT)
    estimate = OpticalFlowEstimator(WIDTH, HEIGHT, OpticalFlowSettings(**SCENE)).estimate(events)
    assert not estimate.valid.any()
    crossed = estimate.event_counts >= estimate.grid.size * 4
    assert crossed.sum() >= 3
    assert np.all(estimate.reason[crossed] == APERTURE)
    # what they do give: the normal flow, the motion along the edge's normal (the only observable part)
    normal = np.array([-np.sin(angle), np.cos(angle)])
    assert np.all(estimate.normal[crossed])
    assert np.all(np.abs(estimate.normal_direction[crossed] @ normal) > 0.98)  # +- n
    true_normal_flow = (TRUE_FLOW @ normal) * normal
    error = np.linalg.norm(estimate.normal_flow[crossed] - true_normal_flow, axis=1)
    assert np.median(error) < 20.0  # px/s, the translation test's tolerance
    assert np.all(np.isnan(estimate.normal_flow[~estimate.normal]))


def test_patches_with_few_events_borrow_their_neighbours_flow():
    """Dots at a known flow, thinned to a quarter in a band of columns: there, patches hold 50-150
    events, under min_events_per_patch. Without borrowing they are invalid; with it they are solved
    with their neighbours' prediction as a prior, reported valid and flagged borrowed, as accurate
    as the translation test asks (its tolerances: 20 px/s median, 70 px/s any)."""
    events = translating_dots(TRUE_FLOW, dots=400, events=16000, width=WIDTH, height=HEIGHT, seed=6)
    band = (events.x >= 30) & (events.x < 60)
    keep = ~band | (np.arange(len(events)) % 4 == 0)
    events = Events(events.x[keep], events.y[keep], events.t[keep], events.p[keep])
    results = {borrowing: OpticalFlowEstimator(WIDTH, HEIGHT, OpticalFlowSettings(borrowing=borrowing)).estimate(
        events) for borrowing in (False, True)}
    without, with_prior = results[False], results[True]
    sparse = (without.event_counts >= 50) & (without.event_counts < 150)
    assert sparse.sum() >= 5
    assert not without.valid[sparse].any() and np.all(without.reason[sparse] == FEW_EVENTS)
    borrowed = with_prior.borrowed
    assert np.all(borrowed == (with_prior.valid & (with_prior.event_counts < 150)))
    assert borrowed[sparse].sum() >= 0.8 * sparse.sum()
    error = np.linalg.norm(with_prior.flow[borrowed] - TRUE_FLOW, axis=1)
    assert np.median(error) < 20.0 and error.max() < 70.0
    assert with_prior.valid.sum() > without.valid.sum()


def test_the_confidence_orders_the_errors():
    """On a simulated rotation in a textured room, the valid patches whose confidence is above the
    median have a lower median relative error than those below it (measured 3.5 % and 5.0 % on
    these 5 windows, 431 valid patches): the confidence is worth thresholding."""
    from focus_ros.evaluation.flow import run_flow_evaluation
    from focus_ros.evaluation.ground_truth import from_imu
    from focus_ros.evaluation.angular_velocity import build_windows
    from focus_ros.sources.scenes import PanoramaScene
    from focus_ros.sources.simulator import ConstantAngularVelocity, EventSimulator, Trajectory

    simulator = EventSimulator(PanoramaScene.generate(1, shapes_per_megapixel=600),
                               Trajectory(ConstantAngularVelocity((0.5, -1.0, 2.0)), 0.12),
                               Calibration.davis240c(), seed=1)
    recording = simulator.simulate()
    run = run_flow_evaluation(recording, from_imu(recording.imu, 0), build_windows(recording.events.t, 30_000),
                              OpticalFlowSettings())
    errors = run.errors
    assert errors.valid >= 200 and np.all(np.isfinite(errors.confidence)) and np.all(errors.confidence >= 0)
    middle = np.median(errors.confidence)
    top, bottom = errors.relative[errors.confidence > middle], errors.relative[errors.confidence <= middle]
    assert len(top) >= 0.3 * errors.valid and len(bottom) >= 0.3 * errors.valid
    assert np.median(top) < np.median(bottom)


def test_the_confidence_is_the_curvature_of_the_focus():
    """curvature_confidence against a quadratic focus score s(u) = c - u' A u / 2 sampled at the
    probes: it returns the smaller eigenvalue of A times p^2 / 2 / s(u*) (and 0 for a ridge)."""
    from focus_ros.estimators.optical_flow import curvature_confidence

    hessian = np.array([[3.0, 1.0], [1.0, 2.0]])
    peak, probe = 50.0, 1.0

    def score(offset):
        offset = np.asarray(offset, dtype=float)
        return np.array([peak - offset @ hessian @ offset / 2.0])

    along_x = score((probe, 0.0)), score((-probe, 0.0))
    along_y = score((0.0, probe)), score((0.0, -probe))
    confidence = curvature_confidence(np.array([peak]), along_x, along_y, score((probe, probe)))
    assert confidence[0] == pytest.approx(np.linalg.eigvalsh(hessian)[0] * probe ** 2 / 2.0 / peak, rel=1e-9)
    ridge = np.array([[2.0, 0.0], [0.0, 0.0]])  # flat along y: one edge
    hessian = ridge
    along_x = score((probe, 0.0)), score((-probe, 0.0))
    along_y = score((0.0, probe)), score((0.0, -probe))
    assert curvature_confidence(np.array([peak]), along_x, along_y, score((probe, probe)))[0] == pytest.approx(0.0)


def test_the_borrowing_prior_predicts_an_affine_field_from_one_side():
    """borrowing_prior: a local affine fit, exact for an affine flow field even where the known
    neighbours are all on one side (their mean would be off by the field's slope); NaN without
    neighbours."""
    from focus_ros.estimators.optical_flow import borrowing_prior

    rows, columns = 6, 8
    row, column = np.mgrid[0:rows, 0:columns]
    field = np.stack([3.0 + 2.0 * column - row, -1.0 + 0.5 * column + row], axis=-1).reshape(-1, 2)
    known = field.copy()
    known[column.ravel() >= 4] = np.nan  # right half unknown: the column-4 patches see only their left
    prior = borrowing_prior(known, rows, columns)
    edge = column.ravel() == 4
    np.testing.assert_allclose(prior[edge], field[edge], atol=1e-9)
    assert np.all(np.isnan(prior[column.ravel() == 7]))  # 3 columns from any known flow


def test_rotation_ground_truth_is_the_derivative_of_the_projection():
    """The per-pixel basis M (du/dt = M omega) against central differences of the distorted
    projection of the pixel's bearing rotated by exp(-[omega]x t)."""
    from focus_ros.evaluation.flow import pixel_flow_from_rotation

    calibration = Calibration.davis240c()
    rng = np.random.default_rng(0)
    x = rng.integers(0, 240, 50)
    y = rng.integers(0, 180, 50)
    omega = np.array([0.7, -1.3, 2.1])
    bearings = calibration.bearing_lut()[y, x]
    points = np.concatenate([bearings, np.ones((50, 1))], axis=1)
    step = 1e-6
    ahead = calibration.project(points @ rotation_matrix(-omega * step).T)
    behind = calibration.project(points @ rotation_matrix(omega * step).T)
    numeric = (ahead - behind) / (2 * step)
    np.testing.assert_allclose(pixel_flow_from_rotation(calibration, omega, x, y), numeric, rtol=1e-5, atol=1e-3)


def test_translation_ground_truth_is_the_derivative_of_the_projection():
    """T v / Z (camera translating at v m/s, point at depth Z m) against central differences of the
    distorted projection of the point moving by -v t in the camera frame."""
    from focus_ros.evaluation.flow import translation_flow_basis

    calibration = Calibration.davis240c()
    rng = np.random.default_rng(1)
    x = rng.integers(0, 240, 50)
    y = rng.integers(0, 180, 50)
    depth = rng.uniform(0.5, 4.0, 50)
    velocity = np.array([0.4, -0.2, 0.7])
    points = np.concatenate([calibration.bearing_lut()[y, x], np.ones((50, 1))], axis=1) * depth[:, None]
    step = 1e-6
    numeric = (calibration.project(points - velocity * step) - calibration.project(points + velocity * step)) / (2 * step)
    analytic = translation_flow_basis(calibration)[y, x] @ velocity / depth[:, None]
    np.testing.assert_allclose(analytic, numeric, rtol=1e-5, atol=1e-3)


def test_flow_of_a_simulated_rotation_agrees_with_the_ground_truth():
    """A DAVIS240C rotating at a constant 2.3 rad/s in a textured room (simulator), 30,000-event
    windows (20 ms, ~9 px of motion): the valid patches' average endpoint error stays under
    0.6 px over the window with under 1 % over 3 px (measured 0.28 px and 0 % on these 5 windows
    with the defaults; the first version, with the variance, 0.32 px: the flow of a rotation
    varies across a patch and the textures are partly edges); at least 40 % of the patches with
    events are valid (measured 53 % with the neighbours' prior, 19.5 % without: the others have
    fewer than 50 events)."""
    from focus_ros.evaluation.flow import run_flow_evaluation
    from focus_ros.evaluation.ground_truth import from_imu
    from focus_ros.evaluation.angular_velocity import build_windows
    from focus_ros.sources.scenes import PanoramaScene
    from focus_ros.sources.simulator import ConstantAngularVelocity, EventSimulator, Trajectory

    simulator = EventSimulator(PanoramaScene.generate(1, shapes_per_megapixel=600),
                               Trajectory(ConstantAngularVelocity((0.5, -1.0, 2.0)), 0.12),
                               Calibration.davis240c(), seed=1)
    recording = simulator.simulate()
    windows = build_windows(recording.events.t, 30_000)
    assert len(windows) >= 4
    run = run_flow_evaluation(recording, from_imu(recording.imu, 0), windows, OpticalFlowSettings())
    errors = run.errors
    assert errors.valid_share > 0.4
    assert errors.average_endpoint_px < 0.6
    assert errors.outlier_share < 0.01


def test_settings_that_make_no_sense_are_refused():
    with pytest.raises(ValueError, match="unknown loss"):
        OpticalFlowEstimator(WIDTH, HEIGHT, OpticalFlowSettings(loss="sharpness"))
    with pytest.raises(ValueError, match="timestamp"):
        OpticalFlowEstimator(WIDTH, HEIGHT, OpticalFlowSettings(loss="mean_timestamp"))
    with pytest.raises(ValueError, match="polarity"):
        OpticalFlowEstimator(WIDTH, HEIGHT, OpticalFlowSettings(loss="area_exponential", use_polarity=True))
    with pytest.raises(ValueError, match="exceeds"):
        OpticalFlowEstimator(WIDTH, HEIGHT, OpticalFlowSettings(patch_size_px=100))
    with pytest.raises(ValueError, match="pyramid"):
        OpticalFlowEstimator(WIDTH, HEIGHT, OpticalFlowSettings(pyramid_patch_sizes=(10,)))
    with pytest.raises(ValueError, match="warm_fill"):
        OpticalFlowEstimator(WIDTH, HEIGHT, OpticalFlowSettings(warm_fill="spline"))
    with pytest.raises(ValueError, match="prior_weight"):
        OpticalFlowEstimator(WIDTH, HEIGHT, OpticalFlowSettings(prior_weight=-0.1))
    with pytest.raises(ValueError, match="min_borrowing_events"):
        OpticalFlowEstimator(WIDTH, HEIGHT, OpticalFlowSettings(min_borrowing_events=0))
    with pytest.raises(ValueError, match="pixel_binning"):
        OpticalFlowEstimator(WIDTH, HEIGHT, OpticalFlowSettings(pixel_binning=-1))


def test_overlapping_patches_see_every_event_of_their_area():
    grid = PatchGrid(60, 45, size=15, stride=5, margin=0)
    x = np.array([0, 14, 15, 29, 59])
    y = np.array([0, 0, 7, 44, 44])
    events, patches = grid.memberships(x, y)
    origins = grid.origins
    for event, patch in zip(events, patches):
        assert origins[patch, 0] <= x[event] < origins[patch, 0] + 15
        assert origins[patch, 1] <= y[event] < origins[patch, 1] + 15
    expected = sum(int(((origins[:, 0] <= xe) & (xe < origins[:, 0] + 15)
                        & (origins[:, 1] <= ye) & (ye < origins[:, 1] + 15)).sum()) for xe, ye in zip(x, y))
    assert len(events) == expected


def test_per_patch_margins_gather_exactly_the_pixels_within_each_patchs_margin():
    """Memberships with a margin per patch: every pair (event, patch) with the event's pixel within
    that patch's own margin, and no other (brute force over all pixels of the sensor, overlapping
    patches included); margins beyond the grid's are clipped to it."""
    for stride in (15, 7):
        grid = PatchGrid(60, 45, size=15, stride=stride, margin=8)
        rng = np.random.default_rng(stride)
        margins = rng.integers(0, 12, grid.count)
        y, x = np.divmod(np.arange(60 * 45), 60)
        events, patches = grid.memberships(x, y, patch_margins=margins)
        pairs = set(zip(events.tolist(), patches.tolist()))
        assert len(pairs) == len(events)
        origins = grid.origins
        used = np.minimum(margins, 8)
        inside = ((origins[None, :, 0] - used <= x[:, None]) & (x[:, None] < origins[None, :, 0] + 15 + used)
                  & (origins[None, :, 1] - used <= y[:, None]) & (y[:, None] < origins[None, :, 1] + 15 + used))
        assert pairs == set(zip(*np.nonzero(inside)))
        assert np.all(np.diff(patches) >= 0)  # ordered by patch
    with pytest.raises(ValueError, match="one margin per patch"):
        grid.memberships(x, y, patch_margins=np.zeros(3))


def _two_windows(first_flow, second_flow):
    first = translating_dots(first_flow, dots=300, events=8000, width=WIDTH, height=HEIGHT, seed=4)
    later = translating_dots(second_flow, dots=300, events=8000, width=WIDTH, height=HEIGHT, seed=5)
    return first, Events(later.x, later.y, later.t + (int(first.t[-1]) - int(later.t[0]) + 1000), later.p)


def test_warm_start_narrows_the_margins_and_keeps_the_flow():
    """Second window at a known flow: each patch gathers only within the margin its warm flow
    needs (150 px/s over 20 ms: 1.5 px of motion from the window's middle, x 1.25 + 2 px -> 4 px,
    5 where the first window's flow is up to 25 % off, instead of 8); the events left out could
    not have reached the patch's tile at that flow, so the flows are those of the full margin
    (and as accurate as the translation test asks). Without the borrowing pass: it solves again
    with a prior, where a narrowed margin may rightly refuse a flow the full one accepts."""
    first, later = _two_windows(TRUE_FLOW, TRUE_FLOW)
    results = {}
    for adaptive in (True, False):
        estimator = OpticalFlowEstimator(WIDTH, HEIGHT, OpticalFlowSettings(**SCENE, **AS_CUT,
                                                                            adaptive_margin=adaptive, borrowing=False))
        estimator.estimate(first)
        results[adaptive] = estimator.estimate(later), estimator.objective.patch_margins.copy()
    (narrow, margins), (full, full_margins) = results[True], results[False]
    assert np.all(full_margins == OpticalFlowSettings().margin_px)
    assert np.all((margins[narrow.valid] >= 4) & (margins[narrow.valid] <= 5))
    assert narrow.valid.sum() >= 0.8 * narrow.grid.count
    np.testing.assert_array_equal(narrow.reason, full.reason)
    np.testing.assert_allclose(narrow.flow, full.flow, atol=1.0)  # px/s; NaN where invalid in both
    error = np.linalg.norm(narrow.flow[narrow.valid] - TRUE_FLOW, axis=1)
    assert np.median(error) < 20.0 and error.max() < 70.0


def test_a_flow_that_outgrows_its_narrowed_margin_is_solved_again_with_the_full_margin():
    """Window 1 at 50 px/s (margins of 3 px), window 2 at 375 px/s (3.75 px of motion each side of
    t_ref): the patches whose flow leaves their margin are solved again with the full margin, and
    the window's result is that of the estimator without narrowed margins (without the borrowing
    pass, as above)."""
    first, later = _two_windows(TRUE_FLOW / 3, TRUE_FLOW * 2.5)
    estimates = {}
    for adaptive in (True, False):
        estimator = OpticalFlowEstimator(WIDTH, HEIGHT, OpticalFlowSettings(**SCENE, **AS_CUT,
                                                                            adaptive_margin=adaptive, borrowing=False))
        estimator.estimate(first)
        estimates[adaptive] = estimator.estimate(later)
        assert estimator.margin_retries == int(adaptive)
    narrow, full = estimates[True], estimates[False]
    assert narrow.valid.sum() >= 0.8 * narrow.grid.count
    np.testing.assert_array_equal(narrow.reason, full.reason)
    np.testing.assert_allclose(narrow.flow, full.flow, atol=1.0)  # px/s; NaN where invalid in both


def test_flow_command_writes_csv_and_pictures(tmp_path):
    from focus_ros.cli import main

    events = translating_dots(TRUE_FLOW, dots=1500, events=75_000, duration_s=0.04, width=240, height=180)
    folder = tmp_path / "sequence"
    folder.mkdir()
    np.savetxt(folder / "events.txt", np.column_stack([events.t / 1e9, events.x, events.y, (events.p > 0)]),
               fmt=["%.9f", "%d", "%d", "%d"])
    (folder / "calib.txt").write_text(Calibration.davis240c().to_ecd_line() + "\n")
    output = tmp_path / "flow"
    assert main([ "flow", str(folder), "-o", str(output), "--window-events", "30000", "--picture-every", "1",
                 "--quiet"]) == 0
    with open(output / "flow.csv") as handle:
        rows = list(csv.DictReader(handle))
    grid = PatchGrid(240, 180)
    assert len(rows) == 2 * grid.count
    valid = [row for row in rows if row["valid"] == "1"]
    assert len(valid) > grid.count
    flows = np.array([[float(row["vx"]), float(row["vy"])] for row in valid])
    assert np.median(np.linalg.norm(flows - TRUE_FLOW, axis=1)) < 20.0
    assert all(row["vx"] == "nan" for row in rows if row["valid"] == "0")
    for name in ("arrows_000000.png", "colors_000000.png", "arrows_000001.png"):
        assert (output / name).stat().st_size > 1000


def test_flow_command_reports_bad_input_in_one_line(tmp_path, capsys):
    from focus_ros.cli import main

    assert main(["flow", str(tmp_path / "missing"), "-o", str(tmp_path / "out")]) == 1
    assert main(["flow", str(tmp_path), "-o", str(tmp_path / "out"), "--loss", "sharpness"]) == 1
    lines = [line for line in capsys.readouterr().err.splitlines() if line]
    assert len(lines) == 2 and all(line.startswith("focus-ros flow: error:") for line in lines)


def test_real_rotation_patch_flows_agree_with_the_full_frame_rotation(tmp_path):
    """boxes_rotation (real DAVIS, ~9 px of motion in the window): the patch flows agree with the
    flow field of the full-frame angular velocity estimate (the paper's method) within 1 px on
    average over the window (measured 0.43 px; the full-frame estimate has its own error)."""
    from conftest import slice_folder
    from focus_ros.cli import main

    folder = slice_folder("boxes_rotation")
    output = tmp_path / "evaluation"
    assert main(["evaluate-flow", str(folder), "--ground-truth", "estimate", "--losses", "variance",
                 "-o", str(output), "--quiet"]) == 0
    with open(output / "flow_table.csv") as handle:
        row = next(csv.DictReader(handle))
    assert float(row["aee_px"]) < 1.0
    assert float(row["outlier_share"]) < 0.02
    assert float(row["valid_share"]) > 0.5


def _three_patch_estimate():
    """A FlowEstimate on a 45 x 15 sensor: patch 0 valid at zero flow, patch 1 with events but
    invalid, patch 2 without events."""
    from focus_ros.estimators.optical_flow import FLAT, FlowEstimate

    grid = PatchGrid(45, 15)
    flow = np.array([[0.0, 0.0], [np.nan, np.nan], [np.nan, np.nan]])
    return FlowEstimate(0, 0.01, grid.centers, flow, np.array([200, 200, 0]), np.array([1.0, 0.0, np.nan]),
                        np.array([VALID, FLAT, FEW_EVENTS]), np.zeros(3, dtype=np.int64), 1, grid)


def test_the_colour_picture_tells_invalid_from_zero_flow():
    """Zero flow is white (saturation = speed), an invalid patch with events grey with dark
    hatching, a patch without events black: three different looks, and a legend strip below."""
    from focus_ros.flow.pictures import LEGEND_ROWS, flow_color_image

    image = flow_color_image(_three_patch_estimate(), scale=2)
    assert image.shape == (15 * 2 + LEGEND_ROWS, 45 * 2, 3)
    zero, invalid, empty = (image[:30, 30 * k:30 * k + 30].reshape(-1, 3) for k in range(3))
    assert np.all(zero == 255)
    colours = {tuple(c) for c in invalid}
    assert len(colours) == 2 and (255, 255, 255) not in colours and (0, 0, 0) not in colours  # fill and hatch
    assert np.all(empty == 0)
    assert image[30:].any()  # the legend is drawn


def test_the_arrow_picture_marks_zero_flow_and_invalid_patches_apart_and_has_a_scale():
    """A valid zero flow gets a dot in the arrow colour, an invalid patch with events a grey cross;
    the strip below holds the scale arrow (arrow colour) of a round speed."""
    from focus_ros.flow.pictures import INVALID_MARK, LEGEND_ROWS, VALID_ARROW, flow_arrows_image, round_speed

    estimate = _three_patch_estimate()
    image = flow_arrows_image(np.zeros((15, 45)), estimate, scale=3)
    assert image.shape == (15 * 3 + LEGEND_ROWS, 45 * 3, 3)
    patches = [image[:45, 45 * k:45 * k + 45].reshape(-1, 3) for k in range(3)]
    has = lambda pixels, colour: bool(np.all(pixels == colour, axis=1).any())  # noqa: E731
    assert has(patches[0], VALID_ARROW) and not has(patches[0], INVALID_MARK)
    assert has(patches[1], INVALID_MARK) and not has(patches[1], VALID_ARROW)
    assert not has(patches[2], VALID_ARROW) and not has(patches[2], INVALID_MARK)
    assert has(image[45:].reshape(-1, 3), VALID_ARROW)
    assert [round_speed(s) for s in (0.0, 7.0, 10.0, 19.9, 240.0)] == [1.0, 5.0, 10.0, 10.0, 200.0]


def test_binned_pixels_give_the_flow_in_raw_pixels():
    """Dots at a known flow on a 240 x 180 sensor estimated with 2 x 2 pixel binning: a 120 x 90
    grid of 15-px (binned) patches whose centres and flows come back in raw pixels, as accurate as
    the translation test asks (its tolerances: 20 px/s median, 70 px/s any, here in raw px/s)."""
    events = translating_dots(TRUE_FLOW, dots=1500, events=30_000, duration_s=0.02, seed=7)
    estimator = OpticalFlowEstimator(240, 180, OpticalFlowSettings(**SCENE, pixel_binning=2))
    estimate = estimator.estimate(events)
    assert (estimator.grid.width, estimator.grid.height, estimate.binning) == (120, 90, 2)
    np.testing.assert_allclose(estimate.centers[0], (14.5, 14.5))  # binned pixels 0..14: raw 0..29
    valid = estimate.valid
    assert valid.sum() >= 0.6 * estimate.grid.count
    error = np.linalg.norm(estimate.flow[valid] - TRUE_FLOW, axis=1)
    assert np.median(error) < 20.0 and error.max() < 70.0


def test_a_window_beyond_the_event_bound_is_thinned_deterministically():
    """max_window_events: the window's estimate is that of the uniformly thinned window
    (``thin_events``), the same every time."""
    from focus_ros.windows import thin_events

    events = translating_dots(TRUE_FLOW, dots=300, events=16000, width=WIDTH, height=HEIGHT, seed=8)
    bounded = [OpticalFlowEstimator(WIDTH, HEIGHT, OpticalFlowSettings(max_window_events=9000)).estimate(events)
               for _ in range(2)]
    thinned = OpticalFlowEstimator(WIDTH, HEIGHT, OpticalFlowSettings(max_window_events=0)).estimate(
        thin_events(events, 9000))
    for estimate in bounded:
        np.testing.assert_array_equal(estimate.flow, thinned.flow)
        np.testing.assert_array_equal(estimate.event_counts, thinned.event_counts)
    assert thinned.event_counts.sum() <= 9000 and thinned.valid.any()


def test_default_binning_makes_every_sensor_move_like_a_davis240c():
    """default_pixel_binning: on each sensor of focus_ros.camera.SENSORS, with its typical lens, the
    binned image's focal length is within 30 % of the DAVIS240C's (a rotation moves the binned
    image as it moves a DAVIS240C's, for which the patch size, margins and windows were chosen)."""
    from focus_ros.camera import SENSORS
    from focus_ros.estimators.optical_flow import default_pixel_binning

    reference = SENSORS["davis240c"].calibration().fx
    for name, sensor in SENSORS.items():
        calibration = sensor.calibration()
        binning = default_pixel_binning(calibration.width, calibration.height)
        assert 0.7 < calibration.fx / binning / reference < 1.3, (name, binning, calibration.fx)


def test_slow_patches_are_solved_again_on_a_longer_span():
    """Dots at 47 px/s: ~1.25 px of motion per 27-ms window, too little for a 10 % flow. With
    slow_motion_px 4 the first window (no past) is as without; the next ones solve every patch
    again over 2 and then 3 windows' span (the previous events prepended, same reference time):
    their median endpoint error falls below 0.8 times that of the single windows and the share
    of patches over 10 % of the speed halves (measured 3.7 -> 2.6 and 4.1 -> 1.7 px/s, 34 -> 14 %
    and 40 -> 2 %); after a gap in time the past is forgotten (as an estimator without it)."""
    true_flow = np.array([40.0, -25.0])
    events = translating_dots(true_flow, dots=1500, events=120_000, duration_s=0.08, seed=3)
    size = len(events) // 3
    windows = [events[k * size:(k + 1) * size] for k in range(3)]
    results = {}
    for slow in (0.0, 4.0):
        estimator = OpticalFlowEstimator(240, 180, OpticalFlowSettings(**AS_CUT, slow_motion_px=slow))
        results[slow] = [estimator.estimate(window) for window in windows]
    speed = np.linalg.norm(true_flow)
    for k, (single, longer) in enumerate(zip(results[0.0], results[4.0])):
        assert longer.valid.sum() >= 0.9 * single.valid.sum() >= 100
        error_single = np.linalg.norm(single.flow[single.valid] - true_flow, axis=1)
        error_longer = np.linalg.norm(longer.flow[longer.valid] - true_flow, axis=1)
        if k == 0:
            np.testing.assert_array_equal(longer.flow, single.flow)
            continue
        assert np.median(error_longer) < 0.8 * np.median(error_single)
        assert np.mean(error_longer > 0.1 * speed) < 0.5 * np.mean(error_single > 0.1 * speed)
    estimator = OpticalFlowEstimator(240, 180, OpticalFlowSettings(**AS_CUT, slow_motion_px=4.0))
    first = estimator.estimate(windows[0])
    late = windows[2]
    late = Events(late.x, late.y, late.t + 10 * (int(late.t[-1]) - int(late.t[0])), late.p)  # after a gap
    fresh = OpticalFlowEstimator(240, 180, OpticalFlowSettings(**AS_CUT, slow_motion_px=4.0))
    fresh.previous = estimator.previous.copy()
    fresh._previous_end_ns, fresh._previous_duration_ns = estimator._previous_end_ns, estimator._previous_duration_ns
    assert np.isfinite(first.flow).any()
    np.testing.assert_array_equal(estimator.estimate(late).flow, fresh.estimate(late).flow)


def test_patches_too_slow_for_their_precision_are_reported_imprecise():
    """min_motion_confidence: on a simulated rotation in a textured room whose fixed point is in
    view, the valid patches whose confidence times motion over the window (px) is below 1 are
    reported IMPRECISE (NaN flow); the others keep exactly the flows they have without the option
    (the warm start is the same); the imprecise ones are slower, and the kept ones' share over
    10 % of their speed is under 0.6 times all's (measured on these 5 windows: 13.5 % of the 431
    valid patches, 6.2 % of the 177 kept; median true speed 235 px/s imprecise, 315 px/s kept)."""
    from focus_ros.estimators.optical_flow import IMPRECISE, motion_confidence
    from focus_ros.evaluation.flow import patch_flow_from_rotation
    from focus_ros.evaluation.ground_truth import from_imu
    from focus_ros.evaluation.angular_velocity import build_windows
    from focus_ros.sources.scenes import PanoramaScene
    from focus_ros.sources.simulator import ConstantAngularVelocity, EventSimulator, Trajectory

    recording = EventSimulator(PanoramaScene.generate(1, shapes_per_megapixel=600),
                               Trajectory(ConstantAngularVelocity((0.5, -1.0, 2.0)), 0.12),
                               Calibration.davis240c(), seed=1).simulate()
    ground_truth = from_imu(recording.imu, 0)
    plain = OpticalFlowEstimator(240, 180, OpticalFlowSettings(**AS_CUT))
    strict = OpticalFlowEstimator(240, 180, OpticalFlowSettings(**AS_CUT, min_motion_confidence=1.0))
    all_relative, kept_relative, imprecise_speeds, kept_speeds = [], [], [], []
    events = recording.events
    for start, end in build_windows(events.t, 30_000):
        window = events[int(start):int(end)]
        everything, kept = plain.estimate(window), strict.estimate(window)
        imprecise = kept.reason == IMPRECISE
        assert np.array_equal(imprecise, everything.valid & (motion_confidence(everything) < 1.0))
        assert np.all(np.isnan(kept.flow[imprecise]))
        np.testing.assert_array_equal(kept.flow[kept.valid], everything.flow[kept.valid])
        assert np.array_equal(kept.valid | imprecise, everything.valid)
        truth = patch_flow_from_rotation(recording.calibration, plain.grid, window,
                                         ground_truth.at([everything.t_ref_ns])[0])
        speed = np.linalg.norm(truth, axis=1)
        relative = np.linalg.norm(everything.flow - truth, axis=1) / speed
        all_relative.append(relative[everything.valid])
        kept_relative.append(relative[kept.valid])
        imprecise_speeds.append(speed[imprecise])
        kept_speeds.append(speed[kept.valid])
    all_relative, kept_relative = np.concatenate(all_relative), np.concatenate(kept_relative)
    assert len(kept_relative) >= 0.25 * len(all_relative) and len(kept_relative) < len(all_relative)
    assert np.median(np.concatenate(imprecise_speeds)) < np.median(np.concatenate(kept_speeds))
    assert np.mean(kept_relative > 0.1) < 0.6 * np.mean(all_relative > 0.1)
