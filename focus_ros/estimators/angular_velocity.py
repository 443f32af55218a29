"""Angular velocity of a rotating event camera by focus maximisation, window by window.

For each window of events the estimator maximises the focus score
``sign * loss(IWE(omega))`` over the angular velocity omega (rad/s), with the exact
rotational warp ``bearing_ref = exp([omega]x (t_k - t_ref)) bearing_k`` (paper eq. (2)
for the rotation model), warm-started from the previous window's estimate.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field, replace

import numpy as np

from focus_ros.camera import Calibration
from focus_ros.estimators.covariance import angular_velocity_covariance
from focus_ros.events import Events
from focus_ros.iwe import KERNELS, coarse_grid_calibration, coarse_grid_factor, events_on_coarse_grid
from focus_ros.losses import LOSSES, get_loss
from focus_ros.objective import Objective, supported_polarity_modes
from focus_ros.optimize import OPTIMIZERS, REAL_TIME_SETTINGS, OptimizerSettings, minimize
from focus_ros.settings import setting

#: standard deviation (px) of the IWE blur for the spatial losses (Table 1 "Spatial? yes"): the
#: paper's epsilon = 1 px Gaussian Dirac, built as bilinear voting then a blur (two image filters
#: per value+gradient). Without it the neighbourhood losses (local MAD, Moran's I and Geary's C
#: without polarity, the Laplacian and Hessian magnitudes, the variance of the Laplacian) lose
#: track of fast rotations and cannot start from omega = 0 on real data. The statistical
#: (non-spatial) losses are better without it: their value does not look at neighbourhoods, so
#: the blur only lowers their contrast, and it would cost the variance its time budget.
#: Measurements: EVALUATION.md, "Where this implementation differs, and why" (accuracy) and
#: BENCHMARKS.md, "Engine: warp + IWE + loss + gradient" (cost). See :func:`default_blur_sigma_px`.
SPATIAL_LOSS_BLUR_SIGMA_PX = 1.0

#: reference-time choices: the window's first event, the middle of its span, its last event
T_REF_CHOICES = ("start", "middle", "end")
#: where each window's search starts (see AngularVelocitySettings.warm_start)
WARM_STARTS = ("extrapolate", "previous")
ROTATION_WARPS = ("exact", "small_angle")
#: why an estimate is withheld (``WindowEstimate.withheld``): a degenerate loss, too few events,
#: no finite optimum, beyond the sensor (or max_angular_velocity), every event outside the
#: image, a doubtful optimum (recovery), too little image motion, a flat focus landscape; and
#: the pipeline's (focus_ros.pipelines.angular_velocity.RunawayWatch): estimates running away
#: from the speed their auto windows were planned for
WITHHELD_REASONS = ("degenerate_loss", "few_events", "non_finite", "beyond_sensor", "outside_image",
                    "doubtful_optimum", "little_motion", "flat_focus", "runaway")


@dataclass(frozen=True)
class AngularVelocitySettings:
    """How to estimate one window's angular velocity: the loss, the IWE, the optimizer, and the
    checks that recover or withhold doubtful estimates.

    The defaults are the paper's choices where it makes one (``focus-ros evaluate`` uses them);
    :func:`real_time_settings` gives the node's and ``focus-ros estimate``'s. Each field's
    declaration says its meaning, unit and range; why each default is what it is (and what the
    recovery and the constant-velocity check do) is in docs/design.md, section 6. The settings
    without a command-line option or ROS parameter are tuned internals.
    """

    loss: str = setting("variance", "focus loss (focus_ros.losses)", choices=tuple(LOSSES))
    use_polarity: bool = setting(False, "image of warped events with polarity (b_k = p_k) or of counts (b_k = 1)",
                                 option="--polarity")
    kernel: str = setting("bilinear", "event voting kernel of the IWE", choices=tuple(KERNELS))
    sigma: float = setting(1.0, "Gaussian voting kernel's standard deviation", unit="px", minimum=0.1, maximum=10.0,
                           parameter="kernel_sigma_px")
    t_ref: str = setting("middle", "window reference time, the estimate's stamp: its first event, the middle of "
                         "its span, its last event", choices=T_REF_CHOICES, option="--t-ref",
                         parameter="reference_time")
    warp: str = setting("exact", "rotation warp: exact (exponential map) or small_angle (a speed option)",
                        choices=ROTATION_WARPS)
    optimizer: str = setting("cg", "cg (Fletcher-Reeves, the paper's), bfgs (fewest evaluations) or lbfgs",
                             choices=tuple(OPTIMIZERS))
    #: the optimizer's stopping rules and line search (rad/s); the three settings below override theirs
    optimizer_settings: OptimizerSettings = field(default_factory=OptimizerSettings)
    max_iterations: int | None = setting(None, "optimizer iteration cap per window; unset = optimizer_settings' own",
                                         unit="iterations", minimum=1, maximum=1000, option=None)
    gradient_tolerance: float | None = setting(None, "the optimizer stops when the gradient norm falls below this; "
                                               "unset = optimizer_settings' own", minimum=0.0, maximum=1.0, option=None)
    value_tolerance: float | None = setting(None, "the optimizer stops when the loss changes by less than this, "
                                            "relatively; unset = optimizer_settings' own", minimum=0.0, maximum=1.0)
    max_angular_velocity: float = setting(50.0, "an estimate beyond this is withheld (a runaway solve)",
                                          unit="rad/s", minimum=0.0, option=None, parameter=None)
    min_events: int = setting(100, "fewer events make a window degenerate", unit="events", minimum=1,
                              option=None, parameter=None)
    gap_reset_windows: float = setting(10.0, "reset the warm start after a gap of this many window durations",
                                       unit="windows", minimum=0.0, maximum=1e6, option=None)
    #: the losses' parameters (None: ``LossOptions()``)
    loss_options: object = None
    blur_sigma_px: float | None = setting(None, "Gaussian blur of the IWE before the loss, the paper's epsilon; "
                                          "0 = none; unset = the loss's (1 px for the spatial losses, 0 otherwise)",
                                          unit="px", minimum=0.0, option="--blur-sigma", unset=-1.0)
    warm_start: str = setting("previous", "each window starts from the last estimate (previous, the paper's) or "
                              "from the line through the last two (extrapolate)", choices=WARM_STARTS)
    recovery: bool = setting(True, "check every window's optimum and solve doubtful ones again, coarse to fine",
                             option=None, parameter=None)
    doubt_ratio: float = setting(0.5, "a window is doubtful below this share of the recent median focus gain",
                                 minimum=0.0, maximum=1.0, option=None, parameter=None)
    agreement_rad_s: float = setting(0.2, "a second solve within this confirms the first", unit="rad/s",
                                     minimum=0.0, option=None, parameter=None)
    doubt_history: int = setting(16, "accepted windows the recent median focus gain is taken over", unit="windows",
                                 minimum=1, option=None, parameter=None)
    recovery_sub_window: int = setting(4, "a doubtful window is first solved on the middle 1/this of its events",
                                       minimum=1, option=None, parameter=None)
    max_change_in_window_rad_s: float = setting(1.0, "solve again with an angular acceleration when omega is "
                                                "predicted to change by more than this within a window; 0 = off",
                                                unit="rad/s", minimum=0.0, option=None, parameter=None)
    max_change_with_acceleration_rad_s: float = setting(1.5, "beyond this predicted change the accelerated solve "
                                                        "uses the span around t_ref only; 0 = the whole window",
                                                        unit="rad/s", minimum=0.0, option=None, parameter=None)
    min_check_events: int = setting(8000, "the fewest events of the span the accelerated solve uses",
                                    unit="events", minimum=1, option=None, parameter=None)
    cold_acceleration_refinements: int = setting(3, "a cold window's acceleration is refined at most this often",
                                                 minimum=0, option=None, parameter=None)
    pixel_binning: int = setting(1, "IWE on bins of this many pixels per side; 0 = auto: 2 on a 1280x720 sensor, "
                                 "1 below", unit="px", minimum=0, maximum=8)
    min_motion_px: float = setting(1.0, "withhold an estimate that moves the image by less than this within its "
                                   "window: it cannot be told from no motion", unit="px of the IWE grid",
                                   minimum=0.0, maximum=1000.0, option=None)
    min_focus_gain: float = setting(0.01, "withhold an estimate whose image is sharper than with no motion by less "
                                    "than this share: a flat focus landscape does not support it",
                                    minimum=0.0, maximum=10.0, option=None)
    max_motion_share: float = setting(0.5, "withhold an estimate whose image motion within its window exceeds this "
                                      "share of the image's smaller side", minimum=0.0, option=None, parameter=None)

    @property
    def stopping_rules(self) -> OptimizerSettings:
        """``optimizer_settings`` with the ``max_iterations``, ``gradient_tolerance`` and
        ``value_tolerance`` that are set."""
        changes = {name: getattr(self, name) for name in ("max_iterations", "gradient_tolerance", "value_tolerance")
                   if getattr(self, name) is not None}
        return replace(self.optimizer_settings, **changes) if changes else self.optimizer_settings


def real_time_settings(**changes) -> AngularVelocitySettings:
    """The settings of the ROS node and of ``focus-ros estimate`` unless told otherwise: BFGS
    stopped at a relative cost change of 1e-5 (``REAL_TIME_SETTINGS``) and the extrapolated
    warm start. On fast rotation this takes about half the evaluations and time per window of
    the paper's CG (``AngularVelocitySettings()``, used by ``focus-ros evaluate``) with the
    same warm start, for about the same error (BENCHMARKS.md, "Engine: warp + IWE + loss +
    gradient", consecutive windows)."""
    return replace(AngularVelocitySettings(optimizer="bfgs", optimizer_settings=REAL_TIME_SETTINGS,
                                           warm_start="extrapolate"), **changes)


def default_blur_sigma_px(loss) -> float:
    """The IWE blur (px) a loss gets unless told otherwise: 1 px for the spatial losses, 0 for
    the statistical ones (see SPATIAL_LOSS_BLUR_SIGMA_PX for why)."""
    return SPATIAL_LOSS_BLUR_SIGMA_PX if loss.spatial else 0.0


@dataclass
class WindowEstimate:
    """The estimate for one window.

    t_ref_ns: reference time (ns); angular_velocity: (3,) rad/s in the camera frame
    (x right, y down, z forward), NaN when degenerate; score: focus score at the estimate
    (sign * loss, higher is sharper); score_at_initial / score_at_zero: at the starting
    point and at omega = 0; iterations: optimizer iterations; evaluations: objective
    evaluations for the window, those at the start and at omega = 0 included; events_used /
    events_dropped: kept in / warped outside the frame at the estimate; degenerate with a
    message when the estimate must not be trusted.
    """

    t_ref_ns: int
    angular_velocity: np.ndarray
    score: float
    score_at_initial: float
    score_at_zero: float
    initial: np.ndarray
    iterations: int
    evaluations: int
    events_used: int
    events_dropped: int
    converged: bool = False
    degenerate: bool = False
    message: str = ""
    #: focus improvement over omega = 0: (score - score_at_zero) / |score_at_zero|
    improvement: float = math.nan
    #: the first solve looked doubtful (cold start or low improvement) and was checked again
    recovered: bool = False
    #: (3,) rad/s^2: the constant angular acceleration the window was solved with, when the
    #: constant-velocity check found omega changing too much within it (None otherwise)
    angular_acceleration: np.ndarray | None = None
    #: (3, 3) (rad/s)^2: covariance of angular_velocity from the focus's curvature at the optimum
    #: (:mod:`focus_ros.estimators.covariance`); None when degenerate or not asked for
    covariance: np.ndarray | None = None
    #: why a degenerate estimate was withheld, one of WITHHELD_REASONS ('' when published)
    withheld: str = ""


def planning_speed_rad_s(estimate: "WindowEstimate") -> float | None:
    """The angular speed |omega| (rad/s) the next auto window is planned from
    (:class:`~focus_ros.windows.AdaptiveWindows`): the estimate's; 0 when it was withheld for
    too little motion (the next window longer); None (unknown: as at a start) when withheld
    for another reason."""
    if not estimate.degenerate:
        return float(np.linalg.norm(estimate.angular_velocity))
    return 0.0 if estimate.withheld == "little_motion" else None


def reference_time_ns(events: Events, t_ref: str) -> int:
    """The reference time (ns) of a window: its first event, middle of the span, or last event."""
    if t_ref not in T_REF_CHOICES:
        raise ValueError(f"unknown t_ref '{t_ref}': choose one of {', '.join(T_REF_CHOICES)}")
    first, last = int(events.t[0]), int(events.t[-1])
    if t_ref == "start":
        return first
    if t_ref == "end":
        return last
    return first + (last - first) // 2


def events_around(events: Events, t_ref_ns: int, count: int) -> Events:
    """The ``count`` consecutive events of a time-ordered window centred (by index) on the
    first event at or after ``t_ref_ns``, shifted to stay inside it (all of them when it
    holds fewer)."""
    count = min(count, len(events))
    first = min(max(0, int(np.searchsorted(events.t, t_ref_ns)) - count // 2), len(events) - count)
    return events[first:first + count]


@dataclass
class _Solution:
    """One optimizer run on the window the objective holds: the optimum, its score, the
    score at the start, the optimizer's result, the evaluation at the optimum, evaluations."""

    omega: np.ndarray
    score: float
    score_at_start: float
    result: object
    final: object
    evaluations: int


def degeneracy_of(loss, use_polarity: bool) -> str:
    """Why this loss/polarity combination cannot estimate motion ('' when it can)."""
    if getattr(loss, "degenerate_without_polarity", False) and not use_polarity:
        return (f"loss '{loss.name}' is degenerate without polarity: the IWE sums to the event "
                "count whatever the motion, so its value does not depend on it (paper Table 2 '-')")
    return ""


class AngularVelocityEstimator:
    """Per-window angular velocity estimation with warm start (see module docstring).

    ``estimate(events, initial=None)`` solves one window; without ``initial`` it starts
    from the previous window's estimate (or 0 after ``reset()`` / a degenerate window / a
    long gap). Raises ValueError for settings that make no sense (unknown names, a
    polarity mode the engine does not support for the loss: ``supported_polarity_modes``;
    counts-only losses such as the area run with polarity as the sum over the positive
    and the negative events' images; the mean timestamp has no polarity version).
    """

    def __init__(self, calibration: Calibration, settings: AngularVelocitySettings = AngularVelocitySettings()):
        self.calibration = calibration
        self.settings = settings
        for value, choices, what in ((settings.t_ref, T_REF_CHOICES, "t_ref"),
                                     (settings.warp, ROTATION_WARPS, "rotation warp"),
                                     (settings.warm_start, WARM_STARTS, "warm start"),
                                     (settings.optimizer, tuple(OPTIMIZERS), "optimizer"),
                                     (settings.kernel, tuple(KERNELS), "IWE kernel"),
                                     (settings.loss, tuple(LOSSES), "loss")):
            if value not in choices:
                raise ValueError(f"unknown {what} '{value}': choose one of {', '.join(choices)}")
        self.loss = get_loss(settings.loss)
        self.degenerate_reason = degeneracy_of(self.loss, settings.use_polarity)
        mode = "with" if settings.use_polarity else "without"
        modes = supported_polarity_modes(self.loss)
        if not self.degenerate_reason and mode not in modes:
            raise ValueError(f"loss '{self.loss.name}' works only {' or '.join(modes)} polarity, not {mode}")
        self.blur_sigma_px = (default_blur_sigma_px(self.loss) if settings.blur_sigma_px is None
                              else settings.blur_sigma_px)
        #: pixels per side of an IWE bin: pixel_binning, or (0) the sensor's coarse grid factor
        self.binning = int(settings.pixel_binning) or coarse_grid_factor(calibration.width, calibration.height)
        #: the camera as the IWE sees it: the sensor, or its coarse grid (pixel_binning)
        self.grid_calibration = coarse_grid_calibration(calibration, self.binning)
        self.objective = Objective(self.grid_calibration, self.loss, warp=settings.warp, kernel=settings.kernel,
                                   sigma=settings.sigma, use_polarity=settings.use_polarity,
                                   loss_options=settings.loss_options, blur_sigma_px=self.blur_sigma_px)
        self.reset()

    def reset(self) -> None:
        """Forget the warm start: the next window starts from omega = 0."""
        self.previous: np.ndarray | None = None
        self._previous_end_ns: int | None = None
        self._previous_duration_ns: int = 0
        self._history: list[tuple[int, np.ndarray]] = []  # (t_ref ns, omega) of the last two windows
        self._improvements: list[float] = []  # focus improvements of the last accepted windows (recovery)

    def _warm_start(self, events: Events, t_ref_ns: int) -> np.ndarray:
        """Where the next window's search starts: 0, the previous estimate, or (warm_start
        "extrapolate") the line through the last two estimates evaluated at this t_ref."""
        if self.previous is None:
            return np.zeros(3)
        if self._previous_end_ns is not None and self._previous_duration_ns > 0:
            gap = int(events.t[0]) - self._previous_end_ns
            if gap > self.settings.gap_reset_windows * self._previous_duration_ns:
                self._history.clear()
                return np.zeros(3)
        if self.settings.warm_start == "extrapolate" and len(self._history) == 2:
            (t0, omega0), (t1, omega1) = self._history
            if t1 > t0:
                return omega1 + (omega1 - omega0) * ((t_ref_ns - t1) / (t1 - t0))
        return self.previous.copy()

    def _remember(self, t_ref_ns: int, omega: np.ndarray | None) -> None:
        self.previous = None if omega is None else omega.copy()
        self._history = [] if omega is None else (self._history + [(t_ref_ns, omega.copy())])[-2:]

    def estimate(self, events: Events, initial=None, covariance: bool = False) -> WindowEstimate:
        """Estimate omega (rad/s) for one window of time-ordered events; ``covariance`` True also
        computes the estimate's covariance (3 more gradient evaluations, about a quarter more time
        per window: :mod:`focus_ros.estimators.covariance`), for callers that publish it (the node
        while imu or twist has a subscriber); otherwise it is None, the estimate the same."""
        settings = self.settings
        events = events_on_coarse_grid(events, self.binning)
        count = len(events)
        t_ref_ns = reference_time_ns(events, settings.t_ref) if count else 0
        start = np.asarray(initial, dtype=np.float64).reshape(3) if initial is not None else (
            self._warm_start(events, t_ref_ns) if count else np.zeros(3))
        nan3 = np.full(3, np.nan)
        reason, withheld = self.degenerate_reason, "degenerate_loss"
        if not reason and count < settings.min_events:
            reason = f"window has {count} events, fewer than the minimum {settings.min_events}"
            withheld = "few_events"
        if reason:
            if count:
                self._previous_end_ns = int(events.t[-1])
            self._remember(t_ref_ns, None)
            return WindowEstimate(t_ref_ns, nan3, math.nan, math.nan, math.nan, start, 0, 0, 0, 0,
                                  degenerate=True, message=reason, withheld=withheld)
        cold = initial is None and (self.previous is None or not start.any())
        self.objective.set_events(events, t_ref_ns, int(events.t[0]))
        sign = self.loss.sign
        solution = self._solve(start)
        evaluation_count = solution.evaluations
        score_at_initial = solution.score_at_start
        if start.any():
            score_at_zero = sign * self.objective.value(np.zeros(3))
            evaluation_count += 1
        else:
            score_at_zero = score_at_initial
        improvement = self._improvement(solution.score, score_at_zero)
        recovered = False
        disagreement = 0.0
        if settings.recovery and math.isfinite(solution.score) and (cold or self._doubtful(improvement)):
            recovered = True
            for candidate in self._recover(events, t_ref_ns, start):
                evaluation_count += candidate.evaluations
                disagreement = max(disagreement, float(np.linalg.norm(candidate.omega - solution.omega)))
                if candidate.score > solution.score and self._plausible(candidate.omega):
                    solution = candidate
            improvement = self._improvement(solution.score, score_at_zero)
        angular_acceleration = None
        if settings.max_change_in_window_rad_s > 0 and math.isfinite(solution.score) \
                and np.all(np.isfinite(solution.omega)):
            solution, angular_acceleration, check_evaluations = self._check_constant_velocity(
                events, t_ref_ns, solution)
            evaluation_count += check_evaluations
        omega, result, final = solution.omega, solution.result, solution.final
        score = solution.score
        message = result.message
        withheld = ""
        motion_px = self.image_motion_px(omega, events)
        if not np.all(np.isfinite(omega)) or not math.isfinite(score):
            withheld, message = "non_finite", "optimizer produced a non-finite estimate"
        elif np.linalg.norm(omega) > settings.max_angular_velocity:
            withheld = "beyond_sensor"
            message = (f"estimate |omega| = {np.linalg.norm(omega):.1f} rad/s exceeds the limit "
                       f"{settings.max_angular_velocity} rad/s (diverged)")
        elif motion_px > settings.max_motion_share * min(self.objective.width, self.objective.height):
            withheld = "beyond_sensor"
            message = (f"estimate |omega| = {np.linalg.norm(omega):.2f} rad/s moves the image by {motion_px:.0f} px "
                       f"within the window, more than {settings.max_motion_share:g} of the image: beyond what the "
                       "sensor could see")
        elif final.kept == 0:
            withheld, message = "outside_image", "every event is warped outside the image"
        elif recovered and disagreement > settings.agreement_rad_s and self._doubtful(improvement):
            withheld = "doubtful_optimum"
            message = (f"doubtful optimum: focus improvement {improvement:.3g} far below the recent windows' "
                       f"median {np.median(self._improvements):.3g}, and a coarse-to-fine search found another "
                       f"optimum {disagreement:.2f} rad/s away")
        elif motion_px < settings.min_motion_px:
            withheld = "little_motion"
            message = (f"too little motion in the window: the estimate moves the image by {motion_px:.2f} px, "
                       f"less than min_motion_px {settings.min_motion_px:g}: it cannot be told from zero")
        elif not improvement >= settings.min_focus_gain:
            withheld = "flat_focus"
            message = (f"flat focus landscape: the estimate sharpens the image by {improvement:.2g} over no motion, "
                       f"less than min_focus_gain {settings.min_focus_gain:g}")
        degenerate = bool(withheld)
        self._previous_end_ns = int(events.t[-1])
        self._previous_duration_ns = int(events.t[-1] - events.t[0])
        if not degenerate and math.isfinite(improvement):
            self._improvements = (self._improvements + [improvement])[-max(settings.doubt_history, 1):]
        # a doubtful window keeps its best estimate as the next warm start (better than none)
        self._remember(t_ref_ns, omega if self._plausible(omega) and final.kept else None)
        omega_covariance = None
        if covariance and not degenerate:  # the objective holds the window the solution belongs to
            omega_covariance, spent = angular_velocity_covariance(self.objective, omega, final.value, self.loss.sign,
                                                            final.gradient, settings.max_angular_velocity ** 2)
            evaluation_count += spent
        return WindowEstimate(t_ref_ns, nan3 if degenerate else omega, score, score_at_initial,
                              score_at_zero, start, result.iterations, evaluation_count,
                              final.kept, final.dropped, converged=result.converged,
                              degenerate=degenerate, message=message, improvement=improvement,
                              recovered=recovered, angular_acceleration=angular_acceleration,
                              covariance=omega_covariance, withheld=withheld)

    def image_motion_px(self, omega: np.ndarray, events: Events) -> float:
        """How far (px of the IWE grid) the image moves over the window's time span at this
        angular velocity (rad/s): |omega| times the larger focal length times the span; NaN
        for a non-finite omega."""
        span_s = (int(events.t[-1]) - int(events.t[0])) * 1e-9 if len(events) else 0.0
        focal_px = max(self.grid_calibration.fx, self.grid_calibration.fy)
        return float(np.linalg.norm(omega)) * focal_px * span_s

    def _plausible(self, omega: np.ndarray) -> bool:
        """Finite and within ``max_angular_velocity``: a second solve that wanders beyond it
        found a spurious optimum of the loss (weak losses have them far out), not a better one."""
        return bool(np.all(np.isfinite(omega)) and np.linalg.norm(omega) <= self.settings.max_angular_velocity)

    @staticmethod
    def _improvement(score: float, score_at_zero: float) -> float:
        if not (math.isfinite(score) and math.isfinite(score_at_zero)) or score_at_zero == 0:
            return math.nan
        return (score - score_at_zero) / abs(score_at_zero)

    def _doubtful(self, improvement: float) -> bool:
        """Focus improvement far below the recent windows' (needs 3 of them to compare)."""
        if len(self._improvements) < 3 or not math.isfinite(improvement):
            return False
        # statistics.median: np.median's value (the middle one, or the mean of the middle two) in a
        # twentieth of its time on these few floats; this test runs in every window
        return improvement < self.settings.doubt_ratio * statistics.median(self._improvements)

    def _solve(self, start: np.ndarray) -> "_Solution":
        """Maximise the focus of the window the objective holds, from ``start``."""
        sign = self.loss.sign
        evaluated = {}  # omega bytes -> Evaluation: the start and the result are not evaluated twice

        def evaluate(omega, with_gradient=True):
            key = omega.tobytes()
            known = evaluated.get(key)
            if known is not None and (known.gradient is not None or not with_gradient):
                return known
            evaluation = self.objective.evaluate(omega, with_gradient)
            evaluated[key] = evaluation
            return evaluation

        score_at_start = sign * evaluate(start).value
        scale = abs(score_at_start) if score_at_start != 0 and math.isfinite(score_at_start) else 1.0

        def cost(omega):
            evaluation = evaluate(np.asarray(omega, dtype=np.float64))
            return -sign * evaluation.value / scale, -sign * evaluation.gradient / scale

        # (the previous window's inverse-Hessian estimate is not passed on: at the end of a
        # solve it reflects the gradient noise of bilinear voting more than the curvature, and
        # made BFGS slower, CG no faster; see focus_ros.optimize)
        result = minimize(cost, start, self.settings.optimizer, self.settings.stopping_rules)
        omega = np.asarray(result.x, dtype=np.float64)
        final = evaluate(omega, with_gradient=False)
        return _Solution(omega, sign * final.value, score_at_start, result, final, len(evaluated))

    def _check_constant_velocity(self, events: Events, t_ref_ns: int,
                                 solution: "_Solution") -> tuple["_Solution", np.ndarray | None, int]:
        """The constant-velocity check (``max_change_in_window_rad_s``): when the recent
        angular acceleration predicts omega to change too much within the window, solve it
        again with that acceleration (on a shorter span around t_ref beyond
        ``max_change_with_acceleration_rad_s``; for a cold window, refined up to
        ``cold_acceleration_refinements`` times). The accelerated solution is kept only when
        its IWE is sharper than the constant-velocity estimate's on the same events (a wrong
        acceleration, e.g. from the noisy halves of a cold window of a weak loss, blurs it).
        Returns the solution, the acceleration it used (None: the constant-velocity one
        stands) and the objective evaluations spent; leaves the objective holding the
        window the returned solution belongs to."""
        settings = self.settings
        cold = not self._history  # the acceleration is measured on the window's halves
        acceleration, evaluations = self._recent_acceleration(events, t_ref_ns, solution.omega)
        if self._predicted_change(events, acceleration) <= settings.max_change_in_window_rad_s:
            if cold:
                self.objective.set_events(events, t_ref_ns, int(events.t[0]))
            return solution, None, evaluations
        # a warm window's objective still holds the whole window, without acceleration
        accelerated, spent = self._solve_accelerated(events, t_ref_ns, solution, acceleration, holds_window=not cold)
        evaluations += spent
        if accelerated is None:
            self.objective.set_events(events, t_ref_ns, int(events.t[0]))
            return solution, None, evaluations
        held = True  # the objective holds what ``accelerated`` was solved on
        for _ in range(settings.cold_acceleration_refinements if cold else 0):
            refined, spent = self._acceleration_within(events, accelerated.omega, compensation=acceleration)
            evaluations += spent
            held = False
            if np.linalg.norm(refined - acceleration) <= 0.1 * np.linalg.norm(acceleration):
                break
            candidate, spent = self._solve_accelerated(events, t_ref_ns, solution, refined)
            evaluations += spent
            if candidate is None:
                break
            accelerated, acceleration, held = candidate, refined, True
        if not held:
            self._hold(events, t_ref_ns, acceleration, solution.omega)
        return accelerated, acceleration, evaluations

    def _predicted_change(self, events: Events, acceleration: np.ndarray) -> float:
        """How much omega changes (rad/s) over the window at this angular acceleration (rad/s^2)."""
        return float(np.linalg.norm(acceleration)) * (int(events.t[-1]) - int(events.t[0])) * 1e-9

    def _checked_span(self, events: Events, t_ref_ns: int, acceleration: np.ndarray) -> Events:
        """The events the accelerated warp is solved on: the whole window, or beyond
        ``max_change_with_acceleration_rad_s`` of predicted change the span around t_ref over
        which omega changes by that much (at least ``min_check_events`` events)."""
        limit = self.settings.max_change_with_acceleration_rad_s
        if limit > 0 and self._predicted_change(events, acceleration) > limit:
            # omega changes by ``limit`` over limit / |alpha| seconds
            return self._span_around(events, t_ref_ns, 0.5 * limit / float(np.linalg.norm(acceleration)))
        return events

    def _hold(self, events: Events, t_ref_ns: int, acceleration: np.ndarray, omega: np.ndarray) -> None:
        """Let the objective hold the checked span of the window, warped with this acceleration
        (linearised at ``omega``), as when the accelerated solution was found."""
        span = self._checked_span(events, t_ref_ns, acceleration)
        self.objective.set_events(span, t_ref_ns, int(span.t[0]))
        self.objective.compensate_angular_acceleration(acceleration, omega)

    def _solve_accelerated(self, events: Events, t_ref_ns: int, solution: "_Solution", acceleration: np.ndarray,
                           holds_window: bool = False) -> tuple["_Solution | None", int]:
        """Solve the window's checked span with the warp of constant angular acceleration,
        from the constant-velocity ``solution``; the accelerated solution when its IWE is
        sharper than the constant-velocity estimate's on the same events and it is plausible,
        else None; and the objective evaluations spent. ``holds_window``: the objective holds
        the whole window without acceleration already (not read again when the span is the
        whole window). Leaves the objective holding the span with the acceleration."""
        span = self._checked_span(events, t_ref_ns, acceleration)
        if not (holds_window and len(span) == len(events)):
            self.objective.set_events(span, t_ref_ns, int(span.t[0]))
        score_constant, evaluations = solution.score, 0
        if len(span) < len(events):
            score_constant = self.loss.sign * self.objective.value(solution.omega)
            evaluations += 1
        self.objective.compensate_angular_acceleration(acceleration, solution.omega)
        accelerated = self._solve(solution.omega)
        evaluations += accelerated.evaluations
        if accelerated.score > score_constant and self._plausible(accelerated.omega):
            return accelerated, evaluations
        return None, evaluations

    def _recent_acceleration(self, events: Events, t_ref_ns: int, omega: np.ndarray) -> tuple[np.ndarray, int]:
        """The angular acceleration (3,) rad/s^2 this window's estimate ``omega`` and the last
        estimates suggest (the mean of the slopes from the last window to this one and between
        the last two), or for a cold window the one measured on its halves; and the objective
        evaluations spent measuring it."""
        if not self._history:
            return self._acceleration_within(events, omega)
        slopes = []
        t_last, omega_last = self._history[-1]
        if t_ref_ns > t_last:
            slopes.append((omega - omega_last) / ((t_ref_ns - t_last) * 1e-9))
        if len(self._history) == 2:
            (t0, omega0), (t1, omega1) = self._history
            if t1 > t0:
                slopes.append((omega1 - omega0) / ((t1 - t0) * 1e-9))
        return (np.mean(slopes, axis=0) if slopes else np.zeros(3)), 0

    def _span_around(self, events: Events, t_ref_ns: int, half_span_s: float) -> Events:
        """The window's events within ``half_span_s`` (s) of ``t_ref_ns``, widened to at least
        ``min_check_events`` events around it."""
        half_span_ns = half_span_s * 1e9
        first = int(np.searchsorted(events.t, t_ref_ns - half_span_ns))
        last = int(np.searchsorted(events.t, t_ref_ns + half_span_ns, side="right"))
        wanted = max(self.settings.min_check_events, self.settings.min_events)
        if last - first < min(wanted, len(events)):
            return events_around(events, t_ref_ns, wanted)
        return events[first:last]

    def _acceleration_within(self, events: Events, omega: np.ndarray,
                             compensation: np.ndarray | None = None) -> tuple[np.ndarray, int]:
        """Angular acceleration (3,) rad/s^2 measured inside a window that has no previous
        estimates to compare with (a cold start): its two halves solved from ``omega``, the
        change of their estimates over the time between their reference times (0 when they
        differ by no more than ``max_change_in_window_rad_s``: each half has half the events,
        so their estimates scatter more than the whole window's); and the objective
        evaluations spent. With ``compensation`` (rad/s^2, a previous measurement) the halves
        are solved with the warp of that acceleration, and the change is taken as it is (a
        refinement). Leaves the objective holding the second half."""
        unmeasured = np.zeros(3) if compensation is None else compensation
        half = len(events) // 2
        if half < self.settings.min_events:
            return unmeasured, 0
        estimates, evaluations = [], 0
        for part in (events[:half], events[half:]):
            t_ref = reference_time_ns(part, self.settings.t_ref)
            self.objective.set_events(part, t_ref, int(part.t[0]))
            if compensation is not None:
                self.objective.compensate_angular_acceleration(compensation, omega)
            solution = self._solve(omega)
            estimates.append((t_ref, solution.omega))
            evaluations += solution.evaluations
        (t0, omega0), (t1, omega1) = estimates
        if t1 <= t0 or not (np.all(np.isfinite(omega0)) and np.all(np.isfinite(omega1))):
            return unmeasured, evaluations
        if compensation is None and np.linalg.norm(omega1 - omega0) <= self.settings.max_change_in_window_rad_s:
            return np.zeros(3), evaluations  # the halves agree within the limit: noise, not acceleration
        return (omega1 - omega0) / ((t1 - t0) * 1e-9), evaluations

    def _recover(self, events: Events, t_ref_ns: int, start: np.ndarray) -> list["_Solution"]:
        """Coarse to fine: solve the middle 1/k of the window (its shorter span widens the
        basin of the optimum) from the warm start and from 0, then the whole window from the
        better of the two. Leaves the objective holding the whole window."""
        part = max(len(events) // max(self.settings.recovery_sub_window, 1), self.settings.min_events)
        middle = events_around(events, t_ref_ns, part)
        self.objective.set_events(middle, t_ref_ns, int(middle.t[0]))
        starts = [start] + ([np.zeros(3)] if start.any() else [])
        coarse = [self._solve(candidate) for candidate in starts]
        best = max(coarse, key=lambda solution: solution.score if math.isfinite(solution.score) else -math.inf)
        self.objective.set_events(events, t_ref_ns, int(events.t[0]))
        refined = self._solve(best.omega if np.all(np.isfinite(best.omega)) else start)
        refined.evaluations += sum(solution.evaluations for solution in coarse)
        return [refined]

    def with_settings(self, **changes) -> "AngularVelocityEstimator":
        """A new estimator with some settings changed (same calibration)."""
        return AngularVelocityEstimator(self.calibration, replace(self.settings, **changes))
