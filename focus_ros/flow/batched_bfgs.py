"""Many small independent minimisations at once: BFGS over a batch (the patches of a flow grid).

``minimize_batched(function, x0, active, settings)`` minimises B independent costs
c_b(x_b), x_b in R^n (n = 2 for patch flow), where one call of ``function(x (B, n), active (B,))``
returns every problem's cost (B,) and gradient (B, n). Each problem keeps its own
quasi-Newton inverse Hessian (B, n, n), line search and stopping state; the arithmetic is
vectorised over the batch, and every trial point of every problem costs one shared call.

Per iteration and problem: direction d = -H g (steepest descent when it is not a descent
direction); backtracking line search from the unit step, safeguarded quadratic interpolation
(step shrunk to [0.1, 0.5] of the last one), Armijo condition with
``settings.sufficient_decrease``, at most ``settings.max_line_search_evaluations`` trials;
BFGS update when s.y > 0 (skipped otherwise: gradient noise of bilinear voting), the first
matrix scaled by s.y / y.y (Nocedal & Wright, eq. 6.20). The first step has length
``settings.initial_step`` along -g.

A problem stops when its gradient norm <= ``gradient_tolerance``, its relative cost change
<= ``value_tolerance``, its step <= ``step_tolerance``, its line search fails to decrease the
cost (noise floor: it keeps its best point) or after ``max_iterations`` iterations. The
stopping rules are those of ``focus_ros.optimize.OptimizerSettings`` (same fields, same units:
those of x).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from focus_ros.optimize import OptimizerSettings

#: function(x (B, n), active (B,) bool) -> (cost (B,), gradient (B, n)); rows not active may be anything
BatchedCost = Callable[[np.ndarray, np.ndarray], "tuple[np.ndarray, np.ndarray]"]


@dataclass
class BatchedResult:
    """Per problem: minimiser x (B, n), cost (B,), gradient (B, n), iterations (B,), whether a
    stopping rule (not the iteration cap) ended it (B,); evaluations: calls of ``function``."""

    x: np.ndarray
    value: np.ndarray
    gradient: np.ndarray
    iterations: np.ndarray
    converged: np.ndarray
    evaluations: int


def _rows_dot(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.einsum("bi,bi->b", a, b)


def minimize_batched(function: BatchedCost, x0, active=None,
                     settings: OptimizerSettings = OptimizerSettings(), max_step: float = np.inf,
                     straggler_share: float = 0.0) -> BatchedResult:
    """Minimise every active problem of the batch from x0 (B, n) (module docstring); no step
    longer than ``max_step`` (units of x) is tried (a quasi-Newton step on a nearly linear
    stretch of the cost can be arbitrarily long). When no more than ``straggler_share`` of the
    active problems are still running, the batch stops: every call evaluates the whole batch, so
    a few slow problems would otherwise set the cost of all; they keep their best point so far
    (reported not converged)."""
    x = np.array(x0, dtype=np.float64, copy=True)
    batch, dimension = x.shape
    running = np.ones(batch, dtype=bool) if active is None else np.array(active, dtype=bool, copy=True)
    iterations = np.zeros(batch, dtype=np.int64)
    converged = ~running
    value, gradient = function(x, running)
    value = np.array(value, dtype=np.float64)
    gradient = np.array(gradient, dtype=np.float64)
    evaluations = 1
    identity = np.eye(dimension)
    inverse_hessian = np.zeros((batch, dimension, dimension))
    first = np.ones(batch, dtype=bool)  # no quasi-Newton update yet: the matrix is the initial scaling

    def reset(rows):
        norm = np.sqrt(_rows_dot(gradient[rows], gradient[rows]))
        scale = settings.initial_step / np.maximum(norm, 1e-300)
        inverse_hessian[rows] = scale[:, None, None] * identity
        first[rows] = True

    reset(np.arange(batch))
    small_gradient = np.sqrt(_rows_dot(gradient, gradient)) <= settings.gradient_tolerance
    converged |= running & small_gradient
    running &= ~small_gradient
    active_count = max(int(running.sum()), 1)
    for _ in range(settings.max_iterations):
        if not running.any() or running.sum() <= straggler_share * active_count:
            break
        direction = -np.einsum("bij,bj->bi", inverse_hessian, gradient)
        slope = _rows_dot(gradient, direction)
        uphill = running & ~(slope < 0)
        if uphill.any():
            reset(np.flatnonzero(uphill))
            direction[uphill] = -np.einsum("bij,bj->bi", inverse_hessian[uphill], gradient[uphill])
            slope = _rows_dot(gradient, direction)
        length = np.sqrt(_rows_dot(direction, direction))
        too_long = length > max_step
        if too_long.any():
            direction[too_long] *= (max_step / length[too_long])[:, None]
            slope = _rows_dot(gradient, direction)
        step = np.ones(batch)
        pending = running.copy()
        accepted = np.zeros(batch, dtype=bool)
        new_x = x.copy()
        new_value = value.copy()
        new_gradient = gradient.copy()
        for _ in range(settings.max_line_search_evaluations):
            trial = x + step[:, None] * direction
            trial_value, trial_gradient = function(trial, pending)
            evaluations += 1
            trial_value = np.asarray(trial_value, dtype=np.float64)
            good = pending & np.isfinite(trial_value) & (
                trial_value <= value + settings.sufficient_decrease * step * slope)
            new_x[good] = trial[good]
            new_value[good] = trial_value[good]
            new_gradient[good] = trial_gradient[good]
            accepted |= good
            pending &= ~good
            if not pending.any():
                break
            # safeguarded quadratic interpolation of the cost along the direction
            with np.errstate(divide="ignore", invalid="ignore"):
                curvature = trial_value - value - step * slope
                shrink = np.where(np.isfinite(curvature) & (curvature > 0),
                                  -slope * step / (2.0 * curvature), 0.5)
            step = np.where(pending, step * np.clip(shrink, 0.1, 0.5), step)
        failed = running & ~accepted  # no decrease found: at the noise floor, keep the point
        converged |= failed
        running &= ~failed
        rows = np.flatnonzero(accepted)
        if rows.size:
            s = new_x[rows] - x[rows]
            y = new_gradient[rows] - gradient[rows]
            change = np.abs(new_value[rows] - value[rows])
            sy = _rows_dot(s, y)
            update = sy > 1e-300
            # first update: scale the initial matrix to the observed curvature
            scaled = update & first[rows]
            if scaled.any():
                yy = _rows_dot(y[scaled], y[scaled])
                inverse_hessian[rows[scaled]] = (sy[scaled] / yy)[:, None, None] * identity
            if update.any():
                u = rows[update]
                rho = 1.0 / sy[update]
                left = identity - rho[:, None, None] * np.einsum("bi,bj->bij", s[update], y[update])
                inverse_hessian[u] = (np.einsum("bij,bjk,blk->bil", left, inverse_hessian[u], left)
                                      + rho[:, None, None] * np.einsum("bi,bj->bij", s[update], s[update]))
                first[u] = False
            x[rows] = new_x[rows]
            gradient[rows] = new_gradient[rows]
            relative = change / np.maximum(np.abs(value[rows]), 1e-300)
            value[rows] = new_value[rows]
            iterations[rows] += 1
            stop = ((np.sqrt(_rows_dot(gradient[rows], gradient[rows])) <= settings.gradient_tolerance)
                    | (relative <= settings.value_tolerance)
                    | (np.sqrt(_rows_dot(s, s)) <= settings.step_tolerance))
            converged[rows[stop]] = True
            running[rows[stop]] = False
    return BatchedResult(x, value, gradient, iterations, converged, evaluations)
