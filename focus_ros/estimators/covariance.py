"""How sure a focus estimate is: its covariance from the focus's curvature at the optimum.

An estimate maximises a focus score of the window's events. Near the optimum the score is a
bowl; the sharper the bowl (the larger its curvature, the Hessian H of the loss w.r.t. the
motion parameters at the optimum), the less the optimum moves when the events are drawn
again. Modelled as for a maximum-likelihood estimate, the covariance is the inverse of the
curvature of a cost that sums over the N events the window holds:

    covariance = factor * inverse(N * H_rel),   H_rel = Hessian of  -sign * f / |f(optimum)|

Why N * H_rel. The loss f taken relative to its value at the optimum drops the loss's own
scale (which grows with the event count and the texture; the optimizer sees the same scaled
cost), so H_rel measures only the width of the bowl (set by the focal length, the window's
duration and the texture): it hardly changes with the number of events. The scatter of the
optimum does: the gradient of the relative cost at the true motion is a sum over the events,
each with a zero-mean part, so its variance falls as 1/N, and the optimum's covariance,
H_rel^-1 Var(gradient) H_rel^-1, with Var(gradient) proportional to H_rel / N (as the
information identity has it for a likelihood), is proportional to (N H_rel)^-1 — the inverse
Hessian of the relative cost summed over the events. Without N (the covariance of a fixed
number of events) one factor could not serve windows that hold 10,000 events and windows
thinned to 150,000 (the node's auto windows, every sensor). ``factor`` (dimensionless) is not a
property of the mathematics: the errors are heavier-tailed than the model (the motion changes
within a window; the first window starts cold); it is calibrated on simulated rotations with
known ground truth so that the reported 95 % ellipsoid holds about 95 % of the errors
(benchmarks/eval_covariance.py; the table in EVALUATION.md, "Angular velocity covariance").

H comes from forward differences of the analytic gradient (the optimizer evaluated the
gradient at the optimum already: three more evaluations for three parameters), with a step that
moves the window's outermost events by about ``STEP_PX`` pixels: smaller steps would measure the
kinks of bilinear voting rather than the bowl. Directions without positive curvature (a flat or
saddle-shaped focus) get the largest variance the caller allows, not an infinite one: ROS
covariance fields must be finite.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

#: finite-difference step of the curvature, in pixels of motion of the window's outermost events
STEP_PX = 1.0
#: the angular velocity's covariance = ANGULAR_VELOCITY_COVARIANCE_FACTOR * inverse(N * H_rel), (rad/s)^2
#: for H_rel in 1 / (rad/s)^2 and N the window's events (dimensionless); calibrated with the node's auto
#: windows on the simulator's rotation presets and every sensor (benchmarks/eval_covariance.py, table and
#: limits in EVALUATION.md)
ANGULAR_VELOCITY_COVARIANCE_FACTOR = 3.3


def hessian_from_gradients(gradient: Callable[[np.ndarray], np.ndarray], x: np.ndarray, steps,
                           gradient_at_x: np.ndarray | None = None) -> tuple[np.ndarray, int]:
    """Hessian (P, P) of a function at ``x`` (P,) by forward differences of its gradient:
    column i = (gradient(x + steps[i] e_i) - gradient(x)) / steps[i], symmetrised. ``steps``:
    (P,) or a scalar, in x's units; ``gradient_at_x``: when already known (it saves one
    evaluation). Returns (Hessian, gradient evaluations made)."""
    x = np.asarray(x, dtype=np.float64)
    steps = np.broadcast_to(np.asarray(steps, dtype=np.float64), x.shape)
    evaluations = 0
    if gradient_at_x is None:
        gradient_at_x = np.asarray(gradient(x), dtype=np.float64)
        evaluations += 1
    columns = []
    for index in range(x.size):
        shifted = x.copy()
        shifted[index] += steps[index]
        columns.append((np.asarray(gradient(shifted), dtype=np.float64) - gradient_at_x) / steps[index])
        evaluations += 1
    hessian = np.column_stack(columns)
    return 0.5 * (hessian + hessian.T), evaluations


def covariance_from_curvature(hessian: np.ndarray, factor: float, max_variance: float) -> np.ndarray:
    """``factor * inverse(hessian)`` for the Hessian of a cost at its minimum (symmetric,
    positive definite there); along eigen-directions whose curvature is not positive, or so
    small that the variance would exceed ``max_variance``, the variance is ``max_variance``
    (units: those of x squared). Always symmetric positive definite and finite."""
    curvature, directions = np.linalg.eigh(0.5 * (hessian + hessian.T))
    smallest = factor / max_variance
    variances = factor / np.where(np.isfinite(curvature) & (curvature > smallest), curvature, smallest)
    return (directions * variances) @ directions.T


def finite_difference_step_rad_s(focal_px: float, half_span_s: float) -> float:
    """The angular-velocity step (rad/s) that moves an event ``half_span_s`` (s) from the
    reference time by STEP_PX pixels at focal length ``focal_px`` (px)."""
    return STEP_PX / (max(focal_px, 1e-9) * max(half_span_s, 1e-6))


def angular_velocity_covariance(objective, omega: np.ndarray, loss_value: float, sign: float,
                                gradient_at_omega: np.ndarray | None, max_variance: float,
                                factor: float = ANGULAR_VELOCITY_COVARIANCE_FACTOR) -> tuple[np.ndarray, int]:
    """Covariance (3, 3), (rad/s)^2, of the angular velocity ``omega`` (rad/s) that maximises
    ``sign * f`` on the window ``objective`` holds (:class:`~focus_ros.objective.Objective`,
    rotational warp; its ``event_count`` events are the N of the module docstring; ``loss_value``:
    f at omega; ``gradient_at_omega``: df/domega there, or None): ``factor * inverse(N * H_rel)``.
    Returns (covariance, objective evaluations spent: 3, or 4 without the gradient).
    A loss value of 0 or not finite (no focus to speak of) gives ``max_variance`` on every axis."""
    if not (np.isfinite(loss_value) and loss_value != 0.0):
        return np.eye(3) * max_variance, 0
    scale = -float(sign) * max(int(objective.event_count), 1) / abs(loss_value)
    step = finite_difference_step_rad_s(objective.calibration.fx, float(objective.dt_bound))
    hessian, evaluations = hessian_from_gradients(
        lambda theta: scale * objective.evaluate(theta).gradient, omega, step,
        None if gradient_at_omega is None else scale * np.asarray(gradient_at_omega, dtype=np.float64))
    return covariance_from_curvature(hessian, factor, max_variance), evaluations
