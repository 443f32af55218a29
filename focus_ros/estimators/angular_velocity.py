"""Angular velocity of a rotating event camera by focus maximisation, window by window.

For each window of events the estimator maximises the focus score
``sign * loss(IWE(omega))`` over the angular velocity omega (rad/s), with the exact
rotational warp ``bearing_ref = exp([omega]x (t_k - t_ref)) bearing_k`` (paper eq. (2)
for the rotation model), warm-started from the previous window's estimate.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np

from focus_ros.camera import Calibration
from focus_ros.estimators.covariance import angular_velocity_covariance
from focus_ros.events import Events
from focus_ros.iwe import KERNELS, coarse_grid_calibration, events_on_coarse_grid
from focus_ros.losses import LOSSES, get_loss
from focus_ros.objective import Objective, supported_polarity_modes
from focus_ros.optimize import OPTIMIZERS, REAL_TIME_SETTINGS, OptimizerSettings, minimize

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
#: image, a doubtful optimum (recovery), too little image motion, a flat focus landscape
WITHHELD_REASONS = ("degenerate_loss", "few_events", "non_finite", "beyond_sensor", "outside_image",
                    "doubtful_optimum", "little_motion", "flat_focus")


@dataclass(frozen=True)
class AngularVelocitySettings:
    """How to estimate one window's angular velocity; [default], then meaning, unit and why.

    The defaults are the paper's choices where it makes one (``focus-ros evaluate`` uses
    them); :func:`real_time_settings` gives the node's and ``focus-ros estimate``'s.

    - loss ["variance"]: a focus_ros.losses registry name; the paper's reference loss, among
      the most accurate and cheapest (EVALUATION.md, "(a) Simulated dataset-like rotation").
    - use_polarity [False]: b_k = p_k (True) or 1 (False); the variance does better without.
    - kernel ["bilinear"] | "gaussian", sigma [1.0 px, the paper's epsilon; Gaussian only]:
      how events vote into the IWE. A Gaussian per event costs an order of magnitude more per
      evaluation (BENCHMARKS.md, "Engine"); the spatial losses get the paper's smoothing from
      ``blur_sigma_px`` instead.
    - t_ref ["middle"] | "start" | "end": the time the events are warped to and the estimate
      is stamped with; the middle halves the largest |t_k - t_ref| the warp must bridge.
    - warp ["exact"] (exponential map) | "small_angle": the latter is a speed option.
    - optimizer ["cg"] (Fletcher-Reeves, the paper's) | "bfgs" | "lbfgs": BFGS needs fewer
      evaluations but misses the motion with the range loss where CG finds it
      (:mod:`focus_ros.optimize`); optimizer_settings [``OptimizerSettings()``]: its stopping
      rules, in rad/s.
    - max_angular_velocity [50.0 rad/s, about 2,900 deg/s]: an estimate beyond it is reported
      degenerate (diverged); far above the dataset's fastest rotations (docs/design.md,
      section 3), so it only catches runaway solves.
    - min_events [100 events]: fewer make the window degenerate; a floor far below the
      paper's 30,000-event windows.
    - gap_reset_windows [10.0 window durations]: a longer gap since the previous window drops
      the warm start (back to 0), as the public rotational CMax system does (docs/design.md,
      section 1).
    - loss_options [None: ``LossOptions()``]: the losses' parameters.
    - blur_sigma_px [None]: Gaussian blur (px) of the IWE before the loss, 0 = none, None =
      the loss's default (:func:`default_blur_sigma_px`, :data:`SPATIAL_LOSS_BLUR_SIGMA_PX`).
    - warm_start ["previous"]: each window starts from the last estimate (the paper's), or
      "extrapolate": from the line through the last two estimates at this window's t_ref
      (constant angular acceleration; fewer evaluations, see :func:`real_time_settings`).
    - recovery [True]: check every window's optimum and recover doubtful ones, since an RMS
      hides single windows far off (EVALUATION.md, "Per-window errors: doubtful optima and
      changing ω"). A window is doubtful when it started cold (no warm start) or when its
      focus improvement over omega = 0, (score - score_at_zero) / |score_at_zero|, is below
      ``doubt_ratio`` [0.5: half] times the median of the last ``doubt_history`` [16]
      accepted windows' (at least 3 of them; a wrong optimum barely sharpens the image). It
      is then solved again coarse to fine: on the middle 1/``recovery_sub_window`` [4] of its
      events (a quarter of the time span: a basin of the optimum four times as wide), from the
      warm start and from 0, then on the whole window from the better of the two; the higher
      focus wins (among estimates within ``max_angular_velocity``). When the second solve
      confirms the first (within ``agreement_rad_s`` [0.2 rad/s, about 11 deg/s]) the window
      is fine (e.g. omega crossing zero, where no motion means little gain); when they
      disagree and the winner is still doubtful, the window is reported degenerate instead of
      published.
    - max_change_in_window_rad_s [1.0 rad/s; 0 = off]: the constant-velocity check. The warp
      assumes omega constant over the window; when the angular acceleration alpha of the last
      estimates (rad/s^2, the mean of the slopes between the last two windows and from the
      last window to this one; for a cold window, measured on its two halves) times the
      window's time span predicts omega to change by more than this within the window, the
      window is solved again with the warp of constant angular acceleration alpha
      (omega(t) = omega + alpha (t - t_ref), omega still the estimate at t_ref; the estimate's
      ``angular_acceleration``), kept when its IWE is sharper than the constant-velocity
      estimate's on the same events. It never fires at constant omega, and removes the
      largest misses in fast oscillations (EVALUATION.md, "Per-window errors").
    - max_change_with_acceleration_rad_s [1.5 rad/s; 0 = the whole window always]: beyond
      this predicted change the acceleration is not constant over the window either
      (oscillations at a few Hz), so the accelerated solve uses only the events of the span
      around t_ref over which omega changes by this much, at least ``min_check_events``
      [8000 events] of them.
    - cold_acceleration_refinements [3]: a cold window's acceleration, measured on halves
      solved with the constant-velocity warp, comes out wrong when omega changes fast (each
      half is itself an average over a changing omega). Up to this many times, the halves
      are solved again with the warp of the last acceleration, which gives the next one, and
      the window with that (stopping when it changes by less than 10 %, or when its solve is
      no sharper than constant velocity).
    - pixel_binning [1]: the IWE on a grid of bins of this many pixels squared
      (:func:`~focus_ros.iwe.coarse_grid_calibration`): for large sensors, as accurate on
      windows thinned to a compute budget and several times cheaper per evaluation
      (EVALUATION.md, "Sensors"); the IWE images are then at the binned size.
    - Withheld, not published (the estimate's ``withheld`` says why; counted by the node):
      ``min_motion_px`` [1.0 px of the IWE grid]: the image motion |omega| f (t_last - t_first)
      the estimate implies over the window is below it: the image at omega = 0 is already
      as sharp, the window cannot tell the motion from zero ("little_motion");
      ``min_focus_gain`` [0.01]: the focus improvement over omega = 0 is below it although
      the estimate implies motion: a flat landscape does not support it ("flat_focus");
      ``max_motion_share`` [0.5]: the implied image motion over the window exceeds this share
      of the image's smaller side: the sensor could not have seen that motion as sharp
      edges ("beyond_sensor", as ``max_angular_velocity``).
    """

    loss: str = "variance"
    use_polarity: bool = False
    kernel: str = "bilinear"
    sigma: float = 1.0
    t_ref: str = "middle"
    warp: str = "exact"
    optimizer: str = "cg"
    optimizer_settings: OptimizerSettings = field(default_factory=OptimizerSettings)
    max_angular_velocity: float = 50.0
    min_events: int = 100
    gap_reset_windows: float = 10.0
    loss_options: object = None
    blur_sigma_px: float | None = None
    warm_start: str = "previous"
    recovery: bool = True
    doubt_ratio: float = 0.5
    agreement_rad_s: float = 0.2
    doubt_history: int = 16
    recovery_sub_window: int = 4
    max_change_in_window_rad_s: float = 1.0
    max_change_with_acceleration_rad_s: float = 1.5
    min_check_events: int = 8000
    cold_acceleration_refinements: int = 3
    pixel_binning: int = 1
    min_motion_px: float = 1.0
    min_focus_gain: float = 0.01
    max_motion_share: float = 0.5


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
        #: the camera as the IWE sees it: the sensor, or its coarse grid (pixel_binning)
        self.grid_calibration = coarse_grid_calibration(calibration, int(settings.pixel_binning))
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

    def estimate(self, events: Events, initial=None, covariance: bool = True) -> WindowEstimate:
        """Estimate omega (rad/s) for one window of time-ordered events; ``covariance`` False
        skips the covariance (3 more gradient evaluations: :mod:`focus_ros.estimators.covariance`)
        and leaves it None, for callers that publish no covariance."""
        settings = self.settings
        events = events_on_coarse_grid(events, int(settings.pixel_binning))
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
        return improvement < self.settings.doubt_ratio * float(np.median(self._improvements))

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
        result = minimize(cost, start, self.settings.optimizer, self.settings.optimizer_settings)
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
