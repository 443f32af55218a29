"""The covariance of a focus estimate (focus_ros.estimators.covariance): the scaled inverse of the
curvature at the optimum, by finite differences of the gradient.

Expected values come from the quadratic's own matrix (for which forward differences of the
gradient are exact), not from the implementation; the estimator's covariance is checked for the
properties a filter relies on, on real events.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from conftest import slice_events
from focus_ros.camera import Calibration
from focus_ros.estimators.covariance import (ANGULAR_VELOCITY_COVARIANCE_FACTOR, STEP_PX, angular_velocity_covariance,
                                             covariance_from_curvature, finite_difference_step_rad_s,
                                             hessian_from_gradients)

RNG = np.random.default_rng(7)
CURVATURE = np.array([[4.0, 1.0, 0.5], [1.0, 3.0, -0.4], [0.5, -0.4, 2.0]])  # positive definite
OPTIMUM = np.array([0.3, -1.2, 2.0])


def test_hessian_of_a_quadratic_from_its_gradient_is_its_matrix():
    def gradient(x):
        return CURVATURE @ (x - OPTIMUM) + 0.7

    x = OPTIMUM + RNG.normal(size=3)
    hessian, evaluations = hessian_from_gradients(gradient, x, 0.05)
    np.testing.assert_allclose(hessian, CURVATURE, rtol=1e-9, atol=1e-9)
    assert evaluations == 4
    hessian, evaluations = hessian_from_gradients(gradient, x, np.array([0.01, 0.1, 1.0]), gradient_at_x=gradient(x))
    np.testing.assert_allclose(hessian, CURVATURE, rtol=1e-9, atol=1e-9)
    assert evaluations == 3


def test_covariance_is_the_scaled_inverse_curvature():
    np.testing.assert_allclose(covariance_from_curvature(CURVATURE, 0.02, max_variance=1e6),
                               0.02 * np.linalg.inv(CURVATURE), rtol=1e-12)


def test_directions_without_curvature_get_the_largest_variance_and_stay_finite():
    """A saddle or a flat direction: variance max_variance along it, the others as before."""
    directions = np.linalg.qr(RNG.normal(size=(3, 3)))[0]
    for weakest in (-0.5, 0.0, np.nan):
        hessian = directions @ np.diag([weakest, 2.0, 5.0]) @ directions.T if np.isfinite(weakest) else \
            directions @ np.diag([0.0, 2.0, 5.0]) @ directions.T
        covariance = covariance_from_curvature(hessian, 0.1, max_variance=40.0)
        assert np.all(np.isfinite(covariance)) and np.all(np.linalg.eigvalsh(covariance) > 0)
        np.testing.assert_allclose(directions.T @ covariance @ directions, np.diag([40.0, 0.05, 0.02]),
                                   atol=1e-12)


def test_angular_velocity_covariance_of_a_quadratic_focus():
    """A focus score f = f0 - (w - w*)' A (w - w*) / 2 (sign +1, maximised) on a window of N events:
    the relative cost -f / |f0| has Hessian A / |f0|, summed over the N events N A / |f0|, so the
    covariance is factor |f0| A^-1 / N (the definition counts the window's events: the scatter of
    the optimum falls as 1/N; see the module's docstring); the step moves the window's outer events
    by STEP_PX pixels; three gradient evaluations when the optimum's gradient is known. The same
    for a loss minimised (sign -1, f = f0 + ...)."""
    for sign in (1.0, -1.0):
        f0 = 250.0 * sign
        gradients = []

        def evaluate(theta, with_gradient=True):
            gradients.append(theta.copy())
            return SimpleNamespace(gradient=-sign * CURVATURE @ (theta - OPTIMUM))

        objective = SimpleNamespace(evaluate=evaluate, calibration=Calibration.davis240c(), dt_bound=0.004,
                                    event_count=20000)
        covariance, evaluations = angular_velocity_covariance(objective, OPTIMUM, f0, sign, np.zeros(3), 100.0)
        np.testing.assert_allclose(covariance, ANGULAR_VELOCITY_COVARIANCE_FACTOR * abs(f0) * np.linalg.inv(CURVATURE)
                                   / 20000, rtol=1e-9)
        assert evaluations == 3 == len(gradients)
        step = STEP_PX / (Calibration.davis240c().fx * 0.004)
        assert finite_difference_step_rad_s(Calibration.davis240c().fx, 0.004) == pytest.approx(step)
        np.testing.assert_allclose(np.abs(np.array(gradients) - OPTIMUM), step * np.eye(3), rtol=1e-12)


def test_no_focus_means_no_information():
    objective = SimpleNamespace(evaluate=None, calibration=Calibration.davis240c(), dt_bound=0.004)
    for value in (0.0, np.nan):
        covariance, evaluations = angular_velocity_covariance(objective, OPTIMUM, value, 1.0, None, 9.0)
        np.testing.assert_array_equal(covariance, 9.0 * np.eye(3))
        assert evaluations == 0


def test_estimates_of_real_windows_carry_a_covariance_that_shrinks_with_the_window():
    """On real events (boxes_rotation): every published window has a finite, symmetric, positive
    definite covariance; a window of 30,000 events (the Event Camera Dataset's windows) pins omega down better
    than a third of it (1.5 ms: about one pixel of motion) — the largest variance is smaller."""
    from focus_ros.estimators.angular_velocity import AngularVelocityEstimator, real_time_settings
    events = slice_events("boxes_rotation")
    largest = {}
    for count in (10000, 30000):
        estimator = AngularVelocityEstimator(Calibration.davis240c(), real_time_settings())
        estimate = estimator.estimate(events[:count], covariance=True)
        assert not estimate.degenerate
        covariance = estimate.covariance
        assert covariance.shape == (3, 3) and np.all(np.isfinite(covariance))
        np.testing.assert_allclose(covariance, covariance.T, atol=1e-15)
        assert np.all(np.linalg.eigvalsh(covariance) > 0)
        largest[count] = np.linalg.eigvalsh(covariance).max()
    assert largest[30000] < largest[10000] / 10, largest


def test_the_covariance_is_skipped_when_not_wanted():
    """The node computes the covariance only while imu or twist has a subscriber (the job's extra
    says so): without it the same window gives the same omega, no covariance, and exactly the 3
    gradient evaluations of the finite differences fewer; a job without an extra (a caller that
    says nothing) gets it. The estimator itself computes it only when asked (``covariance=True``):
    its callers that publish none (focus-ros estimate, the evaluation) skip it, and get the same
    estimate as when it is asked for."""
    from focus_ros.estimators.angular_velocity import AngularVelocityEstimator, real_time_settings
    from focus_ros.runtime import InlineEstimator
    window = slice_events("boxes_rotation")[:30000]
    results = {}
    for wanted in (True, False, None):
        engine = InlineEstimator(Calibration.davis240c(), real_time_settings())
        results[wanted] = engine.estimate(window, extra=wanted).estimate
    results["default"] = AngularVelocityEstimator(Calibration.davis240c(), real_time_settings()).estimate(window)
    for estimate in results.values():
        assert not estimate.degenerate
    for skipped in (False, "default"):
        np.testing.assert_array_equal(results[skipped].angular_velocity, results[True].angular_velocity)
        assert results[skipped].covariance is None
        assert results[True].evaluations - results[skipped].evaluations == 3
    assert results[True].covariance is not None and results[None].covariance is not None
