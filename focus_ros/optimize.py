"""Optimizers for the focus objective: minimise a cost c(theta) given value and gradient.

- ``conjugate_gradient``: non-linear conjugate gradient, Fletcher-Reeves (the paper's
  choice; a public C++ rotational system uses FR with initial step 0.1, line-search
  tolerance 0.05, gradient tolerance 1e-3, at most 50 line searches). The line search
  evaluates value and gradient together at every trial point, brackets a minimum along
  the direction and interpolates (cubic, safeguarded); its last point's gradient is
  reused by the next iteration, so an iteration costs about 1-3 evaluations.
- ``bfgs``: quasi-Newton with the full inverse-Hessian update (P = 2 or 3 parameters),
  the same line search with the curvature tolerance ``quasi_newton_line_search_tolerance``
  (0.9, as usual for quasi-Newton: the unit step is accepted when it decreases the cost
  enough), updates skipped when s.y <= 0 (gradient noise). Fewer evaluations than CG
  (BENCHMARKS.md, "Engine: warp + IWE + loss + gradient"), but not the default: on the
  synthetic known-rotation test it misses the motion with the range loss where CG finds it.
- ``lbfgs``: quasi-Newton alternative, scipy's L-BFGS-B (no warm-start matrix).

All stop on: gradient norm <= gradient_tolerance, relative cost change over an
iteration <= value_tolerance, step length <= step_tolerance (units of theta), or the
iteration / evaluation caps. Costs are minimised: to maximise a score pass its negative.
The line search does not resolve a step finer than step_tolerance (in theta units): on
a focus landscape made of bilinear-voting kinks, finer steps only chase that noise.

Kinks: the cost is piecewise smooth (bilinear voting; the losses' own kinks, e.g. the mean
absolute deviation's |I - mean|), so its gradient jumps across ridges where the pieces meet.
At a point beside such a ridge the gradient is that of one piece only, and no step along it
need decrease the cost although the cost still decreases nearby. CG and BFGS do not stop
there: when a line search along the steepest descent finds no decrease, they descend along
the shortest vector in the convex hull of the gradients at the point and at that search's
trial points (gradient sampling, Burke, Lewis & Overton, SIAM J. Optim. 15(3), 2005: a
descent direction of every piece sampled), adding each failed search's gradients to the
sample, for at most P more line searches. They stop where that shortest vector is below
gradient_tolerance (a stationary point of the non-smooth cost to that precision) or no
sampled direction decreases the cost. On the synthetic known-rotation test this took the
mean absolute deviation from a stop 0.35 rad/s short of its optimum to 0.05 rad/s from the
truth (docs/evaluation/angular_velocity.md, "Losses whose optimizer stalled").

Warm starts (a sequence of similar problems, e.g. consecutive event windows): the result
carries ``inverse_hessian``, an estimate of the cost's inverse Hessian at the minimiser
(BFGS: its matrix; CG: a Barzilai-Borwein s.y / y.y times the identity); passing it as
``inverse_hessian`` of the next problem gives BFGS its starting matrix (first step: the
quasi-Newton step) and CG the length of its first step (the Rayleigh quotient
g.Hg / g.g along -g) instead of a fixed length ``initial_step``. With bilinear voting the
matrix at the end of a solve reflects the gradient's voting noise more than the curvature:
on the real slices, carried to the next problem it made BFGS slower and CG no faster, so
the angular-velocity estimator does not carry it.

Stopping in the noise: with bilinear voting the gradient has a noise floor near the
optimum, so the default value_tolerance (1e-7) lets the optimizers wander there.
``REAL_TIME_SETTINGS`` stops at a relative cost change of 1e-5 instead: that moves the
estimate by a small fraction of the paper's RMS errors, and with "bfgs" a window started
0.3 rad/s off converges in about a third of CG's evaluations at the defaults (BENCHMARKS.md,
"Engine: warp + IWE + loss + gradient").
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

#: fun(theta) -> (cost, gradient (P,))
CostFunction = Callable[[np.ndarray], "tuple[float, np.ndarray]"]


@dataclass(frozen=True)
class OptimizerSettings:
    """Stopping rules and line-search parameters (theta in its own units, e.g. rad/s).

    The defaults of the CG ones are those of a public C++ rotational CMax system (module
    docstring): gradient tolerance 1e-3, initial step 0.1, line-search tolerance 0.05, at
    most 50 line searches.

    gradient_tolerance: stop when the cost's gradient norm is at most this (cost per unit
    of theta); value_tolerance: stop when the relative cost change over an iteration is at
    most this (1e-7; module docstring, "Stopping in the noise"); step_tolerance: stop when a
    step is at most this long, and resolve no finer step in the line search (units of
    theta); max_iterations: cap on line searches (iterations); max_evaluations: cap on
    value+gradient evaluations; initial_step: length of the first trial step along the
    first direction (units of theta); line_search_tolerance: accept a step when
    |c'(alpha)| <= tol |c'(0)| (strong Wolfe curvature; CG); sufficient_decrease: Armijo
    constant (1e-4, the textbook value); max_line_search_evaluations: cap on trial points
    per line search; quasi_newton_line_search_tolerance: the curvature tolerance of BFGS
    (0.9, as usual for quasi-Newton: the unit step is accepted when it decreases the cost
    enough).
    """

    gradient_tolerance: float = 1e-3
    value_tolerance: float = 1e-7
    step_tolerance: float = 1e-3
    max_iterations: int = 50
    max_evaluations: int = 200
    initial_step: float = 0.1
    line_search_tolerance: float = 0.05
    sufficient_decrease: float = 1e-4
    max_line_search_evaluations: int = 10
    quasi_newton_line_search_tolerance: float = 0.9


#: stopping rules for real-time use with "bfgs" (module docstring): relative cost change 1e-5
REAL_TIME_SETTINGS = OptimizerSettings(value_tolerance=1e-5)


@dataclass
class OptimizeResult:
    """Result of a minimisation: the minimiser x, its cost, gradient norm, iterations
    (line searches / quasi-Newton steps), evaluations (calls of value+gradient), whether a
    stopping rule (not a cap) ended it, and which."""

    x: np.ndarray
    value: float
    gradient_norm: float
    iterations: int
    evaluations: int
    converged: bool
    message: str
    #: estimate of the inverse Hessian (P, P) at x for a warm start, or None (module docstring)
    inverse_hessian: np.ndarray | None = None


class _CountingFunction:
    """Wraps the cost function: counts evaluations and remembers the best point seen."""

    def __init__(self, function: CostFunction):
        self.function = function
        self.evaluations = 0
        self.best_x = None
        self.best_value = math.inf
        self.best_gradient = None

    def __call__(self, x: np.ndarray):
        value, gradient = self.function(x)
        self.evaluations += 1
        value = float(value)
        gradient = np.asarray(gradient, dtype=np.float64)
        if value < self.best_value:
            self.best_x, self.best_value, self.best_gradient = x.copy(), value, gradient.copy()
        return value, gradient


def _dot(a: np.ndarray, b: np.ndarray) -> float:
    """Inner product of two short vectors in Python floats (no BLAS call: its threads
    stalled calls for milliseconds on a busy machine)."""
    return float(sum(float(u) * float(v) for u, v in zip(a, b)))


def _cubic_minimiser(a, fa, da, b, fb, db) -> float:
    """Minimiser of the cubic through (a, fa, slope da) and (b, fb, slope db), or the
    bisection point when the cubic has none (Nocedal & Wright eq. 3.59)."""
    d1 = da + db - 3.0 * (fa - fb) / (a - b)
    radicand = d1 * d1 - da * db
    if radicand < 0.0:
        return 0.5 * (a + b)
    d2 = math.copysign(math.sqrt(radicand), b - a)
    denominator = db - da + 2.0 * d2
    if denominator == 0.0:
        return 0.5 * (a + b)
    return b - (b - a) * (db + d2 - d1) / denominator


def line_search(function: _CountingFunction, x, value, gradient, direction, step,
                settings: OptimizerSettings, curvature_tolerance: float | None = None,
                trials: list | None = None):
    """Find alpha > 0 with sufficient decrease and |c'(alpha)| <= tol |c'(0)| along direction
    (tol = curvature_tolerance, default settings.line_search_tolerance), starting at ``step``.

    Returns (alpha, value, gradient) of the accepted point, or of the best point seen when
    the budget runs out or the bracket is narrower than settings.step_tolerance (alpha = 0
    if nothing decreased the cost). ``trials``: a list the gradient at every trial point is
    appended to (the gradients sampled around x when the search fails: module docstring, "Kinks").
    """
    tolerance = settings.line_search_tolerance if curvature_tolerance is None else curvature_tolerance
    slope0 = _dot(gradient, direction)
    direction_norm = math.sqrt(_dot(direction, direction))
    low, low_value, low_slope = 0.0, value, slope0
    high = None
    high_value = high_slope = 0.0
    best = (0.0, value, gradient)
    alpha = step
    for _ in range(settings.max_line_search_evaluations):
        if function.evaluations >= settings.max_evaluations:
            break
        trial_value, trial_gradient = function(x + alpha * direction)
        trial_slope = _dot(trial_gradient, direction)
        if trials is not None:
            trials.append(trial_gradient)
        if trial_value < best[1]:
            best = (alpha, trial_value, trial_gradient)
        previous_low, previous_slope = low, low_slope
        if trial_value > value + settings.sufficient_decrease * alpha * slope0 or trial_value >= low_value:
            high, high_value, high_slope = alpha, trial_value, trial_slope
        elif abs(trial_slope) <= tolerance * abs(slope0):
            return alpha, trial_value, trial_gradient
        else:
            if (high is None and trial_slope > 0.0) or (high is not None and trial_slope * (high - low) >= 0.0):
                high, high_value, high_slope = low, low_value, low_slope
            low, low_value, low_slope = alpha, trial_value, trial_slope
        if high is None:
            # still descending: extrapolate where the slope reaches 0 (secant), 1.5x to 4x
            if previous_slope < trial_slope < 0.0:
                secant = alpha + (alpha - previous_low) * trial_slope / (previous_slope - trial_slope)
                alpha = min(max(secant, 1.5 * alpha), 4.0 * alpha)
            else:
                alpha = 4.0 * alpha
            continue
        candidate = _cubic_minimiser(low, low_value, low_slope, high, high_value, high_slope)
        lower, upper = min(low, high), max(low, high)
        if upper - lower <= 1e-12 * max(1.0, upper) or (upper - lower) * direction_norm <= settings.step_tolerance:
            break  # bracket narrower than the step resolution: take the best point seen
        margin = 0.1 * (upper - lower)
        alpha = min(max(candidate, lower + margin), upper - margin)
    return best


def shortest_in_hull(vectors) -> np.ndarray:
    """The shortest vector in the convex hull of ``vectors`` (each (P,)): Wolfe's
    minimum-norm-point algorithm (Math. Programming 11, 1976), exact up to rounding. Keeps a
    corral of affinely independent vectors with positive weights; adds the vector most
    opposed to the current point until none is (x.v >= x.x for every v: x is the shortest)."""
    points = [np.asarray(vector, dtype=np.float64) for vector in vectors]
    squares = [_dot(point, point) for point in points]
    tolerance = 1e-12 * max(squares)
    corral = [int(np.argmin(squares))]
    weights = np.ones(1)
    x = points[corral[0]]
    for _ in range(10 * len(points)):  # each added vector lowers |x|: far fewer rounds suffice
        index = min(range(len(points)), key=lambda i: _dot(x, points[i]))
        if index in corral or _dot(x, points[index]) >= _dot(x, x) - tolerance:
            break
        corral.append(index)
        weights = np.append(weights, 0.0)
        while True:  # the affine hull's nearest point to 0, kept inside the convex hull
            matrix = np.array([points[i] for i in corral])
            size = len(corral)
            system = np.ones((size + 1, size + 1))
            system[:size, :size] = matrix @ matrix.T
            system[size, size] = 0.0
            right = np.zeros(size + 1)
            right[size] = 1.0
            affine = np.linalg.lstsq(system, right, rcond=None)[0][:size]
            if np.all(affine > 1e-12):
                weights = affine
                break
            leaving = affine <= 1e-12  # move from weights towards affine until a weight reaches 0
            share = min(1.0, float(np.min(weights[leaving] / (weights[leaving] - affine[leaving]))))
            weights = share * affine + (1.0 - share) * weights
            kept = weights > 1e-12
            corral = [i for i, keep in zip(corral, kept) if keep]
            weights = weights[kept]
        x = sum(weight * points[i] for weight, i in zip(weights, corral))
    return np.array(x, dtype=np.float64)


def _descent_step(function: _CountingFunction, x, value, gradient, direction, step, settings: OptimizerSettings,
                  steepest: bool, curvature_tolerance: float | None = None):
    """The line search of CG and BFGS along ``direction`` from x, and when it finds no decrease
    although ``direction`` is the steepest descent (``steepest``), the sampled descent: along
    minus the shortest vector in the convex hull of the gradients at x and at the failed
    searches' trial points, each failed search adding its own, for at most len(x) more line
    searches (module docstring, "Kinks").

    Returns (alpha, direction, value, gradient, stop): the step taken is alpha * direction
    (alpha = 0: none; past a kink, direction is the sampled one), value and gradient are those
    at its end, and stop is (message, converged) when the optimizer ends here, else None.
    """
    samples = []
    alpha, new_value, new_gradient = line_search(function, x, value, gradient, direction, step, settings,
                                                 curvature_tolerance, samples)
    if alpha > 0.0 or not steepest:
        return alpha, direction, new_value, new_gradient, None
    for _ in range(len(x)):
        shortest = shortest_in_hull([gradient] + samples)
        norm = math.sqrt(_dot(shortest, shortest))
        if norm <= settings.gradient_tolerance:
            return 0.0, direction, value, gradient, ("sampled gradient norm below tolerance (a kink of the cost)", True)
        if function.evaluations >= settings.max_evaluations:
            return 0.0, direction, value, gradient, ("evaluation cap reached", False)
        sampled = -shortest  # a descent direction: gradient.shortest >= |shortest|^2 > 0
        alpha, new_value, new_gradient = line_search(function, x, value, gradient, sampled,
                                                     settings.initial_step / norm, settings, trials=samples)
        if alpha > 0.0:
            return alpha, sampled, new_value, new_gradient, None
    return 0.0, direction, value, gradient, (
        "no decrease along the steepest descent nor the sampled gradients' (at a minimum to precision)", True)


def _rayleigh_step(inverse_hessian, gradient) -> float | None:
    """g.Hg / g.g: the step length along -g that a quadratic model with inverse Hessian H
    suggests (None without a usable H)."""
    if inverse_hessian is None:
        return None
    matrix = np.asarray(inverse_hessian, dtype=np.float64)
    if matrix.shape != (len(gradient), len(gradient)) or not np.all(np.isfinite(matrix)):
        return None
    norm_sq = _dot(gradient, gradient)
    if norm_sq == 0.0:
        return None
    quotient = _dot(gradient, _matrix_vector(matrix, gradient)) / norm_sq
    return quotient if quotient > 0.0 else None


def _matrix_vector(matrix: np.ndarray, vector: np.ndarray) -> np.ndarray:
    """matrix @ vector for a small matrix, without BLAS."""
    return np.array([_dot(row, vector) for row in matrix])


def _stopping_rule(gradient_norm_sq: float, iterations: int, evaluations: int, settings: OptimizerSettings):
    """(message, converged) when an iteration loop must stop before its next step, else None."""
    if math.sqrt(gradient_norm_sq) <= settings.gradient_tolerance:
        return "gradient norm below tolerance", True
    if iterations >= settings.max_iterations:
        return "iteration cap reached", False
    if evaluations >= settings.max_evaluations:
        return "evaluation cap reached", False
    return None


def conjugate_gradient(function: CostFunction, x0, settings: OptimizerSettings = OptimizerSettings(),
                       inverse_hessian=None) -> OptimizeResult:
    """Minimise with Fletcher-Reeves non-linear CG, restarting along the steepest descent
    every len(x0) iterations or when the direction stops descending. inverse_hessian:
    a warm-start estimate sizing the first step (module docstring), or None for a first
    step of length initial_step."""
    counted = _CountingFunction(function)
    x = np.array(x0, dtype=np.float64).ravel()
    value, gradient = counted(x)
    direction = -gradient
    gradient_norm_sq = _dot(gradient, gradient)
    step = _rayleigh_step(inverse_hessian, gradient)
    if step is None:
        step = settings.initial_step / max(math.sqrt(gradient_norm_sq), 1e-300)
    inverse_curvature = math.nan
    iterations = 0
    message = "iteration cap reached"
    converged = False
    since_restart = 0
    while True:
        stop = _stopping_rule(gradient_norm_sq, iterations, counted.evaluations, settings)
        if stop:
            message, converged = stop
            break
        slope = _dot(gradient, direction)
        if slope >= 0.0:  # not a descent direction: restart
            direction = -gradient
            slope = -gradient_norm_sq
            since_restart = 0
        alpha, taken, new_value, new_gradient, stop = _descent_step(counted, x, value, gradient, direction, step,
                                                                    settings, since_restart == 0)
        iterations += 1
        if stop:
            message, converged = stop
            break
        if alpha == 0.0:
            direction = -gradient  # retry along steepest descent
            since_restart = 0
            step = settings.initial_step / max(math.sqrt(gradient_norm_sq), 1e-300)
            continue
        if taken is not direction:  # past a kink along the sampled descent: restart after it
            direction, slope = taken, _dot(gradient, taken)
            since_restart = len(x) - 1
        step_vector = alpha * direction
        x = x + step_vector
        value_change = value - new_value
        gradient_change = new_gradient - gradient
        curvature = _dot(step_vector, gradient_change)
        if curvature > 0.0:
            inverse_curvature = curvature / _dot(gradient_change, gradient_change)
        value, gradient = new_value, new_gradient
        new_norm_sq = _dot(gradient, gradient)
        if math.sqrt(_dot(step_vector, step_vector)) <= settings.step_tolerance:
            message, converged = "step below tolerance", True
            gradient_norm_sq = new_norm_sq
            break
        if value_change <= settings.value_tolerance * max(abs(value), 1e-300):
            message, converged = "relative cost change below tolerance", True
            gradient_norm_sq = new_norm_sq
            break
        since_restart += 1
        if since_restart >= len(x):
            new_direction = -gradient
            since_restart = 0
        else:
            beta = new_norm_sq / gradient_norm_sq  # Fletcher-Reeves
            new_direction = -gradient + beta * direction
        # next initial step: same first-order decrease as the last accepted step
        new_slope = _dot(gradient, new_direction)
        step = alpha * slope / new_slope if new_slope < 0.0 else settings.initial_step / math.sqrt(new_norm_sq)
        direction = new_direction
        gradient_norm_sq = new_norm_sq
    if counted.best_value < value:  # a line search may have ended on a worse point
        x, value, gradient = counted.best_x, counted.best_value, counted.best_gradient
        gradient_norm_sq = _dot(gradient, gradient)
    estimate = inverse_curvature * np.eye(len(x)) if math.isfinite(inverse_curvature) else None
    return OptimizeResult(x, value, math.sqrt(gradient_norm_sq), iterations, counted.evaluations,
                          converged, message, estimate)


def bfgs(function: CostFunction, x0, settings: OptimizerSettings = OptimizerSettings(),
         inverse_hessian=None) -> OptimizeResult:
    """Minimise with BFGS (module docstring), starting from the inverse-Hessian estimate
    ``inverse_hessian`` (P, P) when given and usable, else (initial_step / |g|) I."""
    counted = _CountingFunction(function)
    x = np.array(x0, dtype=np.float64).ravel()
    size = len(x)
    value, gradient = counted(x)
    gradient_norm_sq = _dot(gradient, gradient)
    identity_scale = settings.initial_step / max(math.sqrt(gradient_norm_sq), 1e-300)
    matrix = None
    if _rayleigh_step(inverse_hessian, gradient) is not None:
        matrix = np.array(inverse_hessian, dtype=np.float64)
    if matrix is None:
        matrix = identity_scale * np.eye(size)
    steepest = inverse_hessian is None or _rayleigh_step(inverse_hessian, gradient) is None  # H = scaled I
    iterations = 0
    message = "iteration cap reached"
    converged = False
    while True:
        stop = _stopping_rule(gradient_norm_sq, iterations, counted.evaluations, settings)
        if stop:
            message, converged = stop
            break
        direction = -_matrix_vector(matrix, gradient)
        if _dot(gradient, direction) >= 0.0:  # H lost positive definiteness: steepest descent
            matrix = settings.initial_step / math.sqrt(gradient_norm_sq) * np.eye(size)
            direction = -_matrix_vector(matrix, gradient)
            steepest = True
        alpha, direction, new_value, new_gradient, stop = _descent_step(
            counted, x, value, gradient, direction, 1.0, settings, steepest,
            settings.quasi_newton_line_search_tolerance)
        iterations += 1
        if stop:
            message, converged = stop
            break
        if alpha == 0.0:
            matrix = settings.initial_step / math.sqrt(gradient_norm_sq) * np.eye(size)  # retry: steepest descent
            steepest = True
            continue
        step_vector = alpha * direction
        gradient_change = new_gradient - gradient
        x = x + step_vector
        value_change = value - new_value
        value, gradient = new_value, new_gradient
        gradient_norm_sq = _dot(gradient, gradient)
        curvature = _dot(step_vector, gradient_change)
        step_length = math.sqrt(_dot(step_vector, step_vector))
        if curvature > 0.0:
            if steepest:
                # first update from the identity: scale it first (Nocedal & Wright eq. 6.20)
                matrix = (curvature / _dot(gradient_change, gradient_change)) * np.eye(size)
            rho = 1.0 / curvature
            left = np.eye(size) - rho * np.outer(step_vector, gradient_change)
            matrix = left @ matrix @ left.T + rho * np.outer(step_vector, step_vector)
            steepest = False
        if step_length <= settings.step_tolerance:
            message, converged = "step below tolerance", True
            break
        if value_change <= settings.value_tolerance * max(abs(value), 1e-300):
            message, converged = "relative cost change below tolerance", True
            break
    if counted.best_value < value:
        x, value, gradient = counted.best_x, counted.best_value, counted.best_gradient
        gradient_norm_sq = _dot(gradient, gradient)
    return OptimizeResult(x, value, math.sqrt(gradient_norm_sq), iterations, counted.evaluations,
                          converged, message, matrix)


def lbfgs(function: CostFunction, x0, settings: OptimizerSettings = OptimizerSettings(),
          inverse_hessian=None) -> OptimizeResult:
    """Minimise with scipy's L-BFGS-B (no bounds), same stopping settings where they map:
    gtol = gradient_tolerance (max norm), ftol = value_tolerance, maxiter, maxfun.
    (scipy starts from its own scaled identity: inverse_hessian is accepted and ignored.)"""
    from scipy.optimize import minimize

    counted = _CountingFunction(function)
    result = minimize(counted, np.array(x0, dtype=np.float64).ravel(), jac=True, method="L-BFGS-B",
                      options=dict(gtol=settings.gradient_tolerance, ftol=settings.value_tolerance,
                                   maxiter=settings.max_iterations, maxfun=settings.max_evaluations))
    x, value, gradient = result.x, float(result.fun), np.asarray(result.jac, dtype=np.float64)
    if counted.best_value < value:
        x, value, gradient = counted.best_x, counted.best_value, counted.best_gradient
    message = result.message if isinstance(result.message, str) else result.message.decode()
    return OptimizeResult(np.asarray(x, dtype=np.float64), value, float(np.linalg.norm(gradient)),
                          int(result.nit), counted.evaluations, bool(result.success), message)


#: optimizer name (settings, command line) -> function
OPTIMIZERS = {"cg": conjugate_gradient, "bfgs": bfgs, "lbfgs": lbfgs}


def minimize(function: CostFunction, x0, method: str = "cg",
             settings: OptimizerSettings = OptimizerSettings(),
             inverse_hessian=None) -> OptimizeResult:
    """Minimise ``function`` from x0 with the named method ("cg", "bfgs" or "lbfgs");
    inverse_hessian: warm-start estimate (P, P) or None, see the module docstring."""
    if method not in OPTIMIZERS:
        raise ValueError(f"unknown optimizer '{method}': choose one of {', '.join(OPTIMIZERS)}")
    return OPTIMIZERS[method](function, x0, settings, inverse_hessian)
