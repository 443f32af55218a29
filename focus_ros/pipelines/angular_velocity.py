"""The angular velocity task's loop, once: events -> windows -> estimates -> the next windows.

Windows are N events (``window_events``), a fixed duration (``window_duration_s``) or, by
default, auto windows (:class:`~focus_ros.windows.AdaptiveWindows`: as long as the
:class:`~focus_ros.windows.WindowRule` says from the last estimate's speed and the event rate,
each thinned to a budget of events). Every estimate feeds back: the next auto window's duration,
stride and event budget (:meth:`AngularVelocityPipeline.take`), the stream gap beyond which the
warm start and the windows restart, and whether the estimate is published or withheld (counted by
reason). The estimator's own warm start travels with the estimator.

Two callers, one loop:

- offline (``focus-ros estimate``, the benchmarks): :meth:`AngularVelocityPipeline.run` estimates
  each window inline, and plans each auto window from the previous one's estimate;
- the node, whose estimator runs asynchronously in a worker process
  (:class:`~focus_ros.runtime.EstimatorRunner`): :meth:`AngularVelocityPipeline.feed` turns a
  batch of events into window jobs, :meth:`AngularVelocityPipeline.take` takes a window's
  estimate back. Windows cut before the previous estimate came back are planned from the last one
  known; the compute budget (``live``) follows the estimator's time per window.

Free of rclpy and threads; not thread-safe (the node holds its lock around every call).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field, replace
from typing import Callable, Iterable, Iterator

import numpy as np

from focus_ros.camera import Calibration
from focus_ros.estimators.angular_velocity import (AngularVelocityEstimator, AngularVelocitySettings,
                                                   WindowEstimate, degeneracy_of, planning_speed_rad_s,
                                                   real_time_settings)
from focus_ros.events import Events
from focus_ros.iwe import coarse_grid_factor
from focus_ros.losses import get_loss
from focus_ros.settings import setting
from focus_ros.windows import AdaptiveWindows, CountWindowCutter, CutWindow, DurationWindowCutter, WindowRule

__all__ = ["AngularVelocityPipeline", "Outcome", "PipelineCounts", "RunawayWatch", "WINDOW_LOG_PERIOD_S",
           "WindowJob", "WindowSettings", "check_settings", "real_time_defaults"]

#: auto windows: their length is said again when it has changed twofold, at most once in this many seconds
WINDOW_LOG_PERIOD_S = 10.0

#: The runaway check of the auto windows (:class:`RunawayWatch`; measured: docs/evaluation/runaway.md,
#: benchmarks/eval_runaway.py). A weak loss (the entropy, at times the range) can return an estimate faster than
#: the speed its window was planned for; the next window, planned shorter from it, gives a faster one still, up to
#: ``max_angular_velocity``. An honest estimate runs ahead of its plan only as fast as the camera accelerates. So
#: an estimate is withheld as ``runaway`` when it and the RUNAWAY_WINDOWS - 1 before it each exceed RUNAWAY_RATIO
#: times the speed their windows were planned for, and together the speed grew faster than
#: RUNAWAY_ACCELERATION_RAD_S2 (rad/s^2: from the first one's plan, i.e. the speed and reference time of the
#: estimate it was planned from, to this estimate). Measured on simulated rotations with every loss, the check
#: off: right estimates grew over two windows ahead at most 83 rad/s^2 in rotations up to 700 deg/s per axis,
#: 382 in a jerk from 20 to 600 deg/s within 30 ms (a peak of 510 rad/s^2), up to 502 within 15 ms (1,020
#: rad/s^2); the entropy's wrong ones up to 5,500, two thirds of them above 600. Honest estimates run ahead of
#: their plans too, up to 7 times and 8 windows in a row (a jerk; a rotation speeding up): no ratio tells them apart.
RUNAWAY_RATIO = 1.1
RUNAWAY_WINDOWS = 2
RUNAWAY_ACCELERATION_RAD_S2 = 600.0


@dataclass(frozen=True)
class WindowSettings:
    """Which windows the events are cut into (the auto windows' rule is a
    :class:`~focus_ros.windows.WindowRule`)."""

    window_events: int = setting(0, "events per window; 0 = auto: windows that fit the sensor and the motion "
                                 "(window_rotation_deg, output_period_s, max_window_events)", unit="events",
                                 minimum=0, maximum=10_000_000)
    window_stride_events: int = setting(0, "events between consecutive window starts; 0 = window_events (no "
                                        "overlap)", unit="events", minimum=0, maximum=10_000_000, option="--stride")
    window_duration_s: float = setting(0.0, "> 0: fixed-duration windows of this length instead of event counts",
                                       unit="s", minimum=0.0, maximum=10.0, read_only=True, option=None)
    max_window_events: int = setting(0, "auto windows: thin each window to at most this many events (uniformly, in "
                                     "time order); 0 = the compute budget: what the estimator takes in 0.6 of the "
                                     "time between windows (offline: 150000)", unit="events", minimum=0,
                                     maximum=10_000_000)
    max_angular_acceleration: float = setting(
        RUNAWAY_ACCELERATION_RAD_S2, "auto windows: withhold as a runaway an estimate whose speed, like the "
        "windows' before it, ran ahead of the speed its window was planned for and grew faster than this "
        "(docs/evaluation/runaway.md); 0 = never", unit="rad/s^2", minimum=0.0, maximum=1e6)
    runaway_ratio: float = setting(RUNAWAY_RATIO, "auto windows: a window runs ahead of its plan when its estimate's "
                                   "speed exceeds this many times the speed it was planned for", minimum=1.0,
                                   option=None, parameter=None)
    runaway_windows: int = setting(RUNAWAY_WINDOWS, "auto windows: a runaway needs this many consecutive windows "
                                   "ahead of their plans", unit="windows", minimum=1, option=None, parameter=None)

    @property
    def mode(self) -> str:
        """auto (the default), or the explicit events / duration windows."""
        if self.window_duration_s > 0:
            return "duration"
        return "events" if self.window_events > 0 else "auto"

    @property
    def stride_events(self) -> int:
        """Events between window starts (events windows)."""
        return self.window_stride_events or self.window_events


def real_time_defaults() -> AngularVelocitySettings:
    """The node's and ``focus-ros estimate``'s settings, as their parameters and options default to
    them: :func:`~focus_ros.estimators.angular_velocity.real_time_settings` with its stopping rules
    spelled out (so that they show as values) and the pixel binning auto (0)."""
    settings = real_time_settings()
    rules = settings.stopping_rules
    return replace(settings, max_iterations=rules.max_iterations, gradient_tolerance=rules.gradient_tolerance,
                   value_tolerance=rules.value_tolerance, pixel_binning=0)


def check_settings(calibration: Calibration, settings: AngularVelocitySettings) -> None:
    """ValueError when the estimator cannot run with these settings (e.g. a loss that does not
    work with polarity); builds an estimator to find out."""
    AngularVelocityEstimator(calibration, settings)


@dataclass
class WindowJob:
    """One window for the estimator: its events (thinned, for auto windows) and, for auto windows,
    the cut window (its span and its event count before thinning). ``partial``: not a complete
    window but all a stream held when it ended without one (:meth:`AngularVelocityPipeline.finish`).
    ``plan``: for an auto window planned from a known speed, (the reference time in ns of the estimate
    it was planned from, that estimate's speed |omega| in rad/s); None otherwise (a cold window)."""

    events: Events
    cut: CutWindow | None = None
    partial: bool = False
    plan: tuple[int, float] | None = None

    @property
    def event_count(self) -> int:
        """The window's events before any thinning."""
        return self.cut.raw_count if self.cut is not None else len(self.events)

    @property
    def duration_s(self) -> float:
        """The window's span (s): the cut's, or from its first to its last event."""
        if self.cut is not None:
            return (self.cut.end_ns - self.cut.start_ns) * 1e-9
        return self.events.duration_s if len(self.events) > 1 else 0.0


@dataclass(frozen=True)
class Outcome:
    """What one window's estimate means for its caller: ``publish`` it, or it was withheld
    (``withheld``: the reason, one of WITHHELD_REASONS or "degenerate"); ``gap_limit_s``: a gap
    in the stream longer than this (s) restarts the windows (None: unchanged);
    ``windows_changed``: the auto windows' length changed twofold since last said (say it);
    ``forget_warm_start``: the estimator must not start its next solves from this estimate, nor
    extrapolate from it (a runaway withheld): reset its warm start."""

    estimate: WindowEstimate
    publish: bool
    withheld: str = ""
    gap_limit_s: float | None = None
    windows_changed: bool = False
    forget_warm_start: bool = False


class RunawayWatch:
    """The runaway check of the auto windows (see RUNAWAY_RATIO): :meth:`check` each window's
    estimate, in order, with the plan its window was cut with (:attr:`WindowJob.plan`).

    ratio: a window runs ahead of its plan when its estimate's speed exceeds this many times the
    planned speed; windows: a runaway is this many consecutive windows ahead of their plans
    (at least 1), whose speed grew, from the plan of the first of them (the speed and reference
    time of the estimate it came from) to the last estimate, faster than ``acceleration_rad_s2``
    (rad/s^2; 0 = no check)."""

    def __init__(self, ratio: float, windows: int, acceleration_rad_s2: float):
        self.ratio, self.windows = float(ratio), max(int(windows), 1)
        self.acceleration_rad_s2 = float(acceleration_rad_s2)
        self.reset()

    def reset(self) -> None:
        """Forget the windows ahead so far (a restart, a cold window)."""
        self._plans: list[tuple[int, float]] = []  # the plans of the last windows ahead (at most ``windows``)

    def check(self, plan: tuple[int, float] | None, estimate: WindowEstimate) -> str:
        """Why to withhold this estimate as a runaway ('' to publish it): ``plan`` is its window's
        (t_ref in ns and |omega| in rad/s of the estimate the window was planned from; None for a
        window planned without a known speed, which starts the count again, as does a window that
        is not ahead)."""
        speed = math.nan if estimate.degenerate else float(np.linalg.norm(estimate.angular_velocity))
        if (self.acceleration_rad_s2 <= 0 or plan is None or not plan[1] > 0 or not math.isfinite(speed)
                or speed <= self.ratio * plan[1]):
            self.reset()
            return ""
        self._plans = (self._plans + [plan])[-self.windows:]
        (origin_ns, origin_speed), ahead = self._plans[0], len(self._plans)
        elapsed_s = (estimate.t_ref_ns - origin_ns) * 1e-9
        growth = (speed - origin_speed) / elapsed_s if elapsed_s > 0 else 0.0
        if ahead < self.windows or growth <= self.acceleration_rad_s2:
            return ""
        self.reset()
        return (f"runaway: |omega| = {speed:.2f} rad/s is {speed / plan[1]:.2f} times the {plan[1]:.2f} rad/s its "
                f"window was planned for, {ahead} windows in a row ahead of their plans, grown from "
                f"{origin_speed:.2f} rad/s at {growth:.0f} rad/s^2, more than max_angular_acceleration "
                f"{self.acceleration_rad_s2:g} rad/s^2: the loss runs away with its windows")


@dataclass
class PipelineCounts:
    """What the estimates were: published (``windows_processed``), withheld (``degenerate_windows``,
    and by reason in ``withheld``), solved again as doubtful optima (``windows_recovered``) or with
    an angular acceleration (``windows_accelerated``); the last published window's optimizer
    iterations and focus gain (score / score at omega = 0)."""

    windows_processed: int = 0
    degenerate_windows: int = 0
    windows_recovered: int = 0
    windows_accelerated: int = 0
    last_iterations: int = 0
    last_focus_gain: float = float("nan")
    withheld: dict = field(default_factory=dict)


class AngularVelocityPipeline:
    """The windows of one event stream and the feedback of each estimate into them (see the
    module docstring). ``live``: auto windows thinned to the compute budget (from
    :meth:`take`'s ``estimator_s``) unless ``max_window_events`` is set; offline they are
    thinned to ``max_window_events``, or the rule's ``max_events`` for 0."""

    def __init__(self, calibration: Calibration, settings: AngularVelocitySettings,
                 windows: WindowSettings = WindowSettings(), rule: WindowRule = WindowRule(), *, live: bool = False):
        self.live = live
        self.counts = PipelineCounts()
        self._kept_shares: list[float] = []  # auto windows: share of each window's events kept, since last asked
        self._said_duration_ns = 0           # auto windows: the duration last said, and when (monotonic s)
        self._said_s = float("-inf")
        self._windows_cut = 0                # windows cut from the stream (none: finish() estimates what it held)
        self.window_settings, self.rule = windows, rule
        self.configure(calibration, settings)

    def configure(self, calibration: Calibration, settings: AngularVelocitySettings,
                  windows: WindowSettings | None = None, rule: WindowRule | None = None) -> None:
        """New calibration or settings: new windows, cut from the next events on."""
        self.calibration = calibration
        self.window_settings = windows if windows is not None else self.window_settings
        self.rule = rule if rule is not None else self.rule
        #: pixels per side of an IWE bin: the setting, or (0) the sensor's coarse grid factor
        self.binning = int(settings.pixel_binning) or coarse_grid_factor(calibration.width, calibration.height)
        #: the estimator's settings, the pixel binning resolved
        self.settings = replace(settings, pixel_binning=self.binning)
        self.windows = self._make_windows()
        window_settings = self.window_settings
        self.runaway = RunawayWatch(window_settings.runaway_ratio, window_settings.runaway_windows,
                                    window_settings.max_angular_acceleration)
        self._plan_source: tuple[int, float] | None = None  # the plan of the next auto windows (WindowJob.plan)

    def recalibrate(self, calibration: Calibration) -> None:
        """New intrinsics of the same sensor size (camera_info after the fallback parameters, a
        driver's recalibration): the windows cut and held stay (they hold events, not intrinsics)."""
        if (calibration.width, calibration.height) != (self.calibration.width, self.calibration.height):
            raise ValueError("another sensor size needs configure(), not recalibrate()")
        self.calibration = calibration

    def _make_windows(self):
        """The window cutter the settings ask for."""
        windows = self.window_settings
        if windows.mode == "duration":
            return DurationWindowCutter(int(round(windows.window_duration_s * 1e9)))
        if windows.mode == "events":
            return CountWindowCutter(windows.window_events, windows.stride_events)
        pixels = -(-self.calibration.width // self.binning) * -(-self.calibration.height // self.binning)
        return AdaptiveWindows(self.rule, pixels, windows.max_window_events, live=self.live)

    def degeneracy(self) -> str:
        """Why the loss and polarity cannot estimate motion ('' when they can)."""
        return degeneracy_of(get_loss(self.settings.loss), self.settings.use_polarity)

    # ----------------------------------------------------------------- events -> window jobs
    def reset(self) -> None:
        """A restart of the stream (a gap, a jump back in time): the held events go, the next
        window starts as at the start."""
        self.windows.reset()
        self.runaway.reset()
        self._plan_source = None

    def feed(self, events: Events) -> list[WindowJob]:
        """Add a time-ordered batch; the window jobs it completed, oldest first, each planned from
        the last estimate taken back (live)."""
        return [self._job(window) for window in self.windows.push(events)]

    def cut(self, events: Events) -> Iterator[WindowJob]:
        """Add a time-ordered batch; yield the window jobs it completed one by one, each auto window
        planned after the previous one's :meth:`take` (offline). Iterate it to the end."""
        if isinstance(self.windows, AdaptiveWindows):
            return (self._job(window) for window in self.windows.cut(events))
        return iter(self.feed(events))

    def _job(self, window) -> WindowJob:
        self._windows_cut += 1
        if isinstance(window, CutWindow):
            return WindowJob(window.events, window, plan=self._plan_source)
        return WindowJob(window)

    def finish(self) -> WindowJob | None:
        """The end of the stream (offline: of the recording). When no window was cut from it (a
        recording shorter than one window), the events it held as one window job, marked
        ``partial``, if they are at least the estimator's ``min_events`` (fewer would be withheld
        as few_events: nothing to estimate); else None. A stream that gave windows leaves its tail
        as it was, not estimated."""
        window = None if self._windows_cut else self.windows.held_window()
        if window is None:
            return None
        job = replace(self._job(window), partial=True)
        return job if job.event_count >= self.settings.min_events else None

    # ----------------------------------------------------------------- estimate -> feedback
    def take(self, job: WindowJob, estimate: WindowEstimate, estimator_s: float | None = None,
             now_s: float | None = None) -> Outcome:
        """One window's estimate back: plan the next auto windows from it (its speed, the event rate
        and, live, the estimator's time ``estimator_s`` in s), count it, and say whether to publish
        it. ``now_s``: monotonic time (s) for the rate limit on saying the windows (default: now).
        The published count follows :meth:`published`, called once it is out. An auto window's
        estimate that runs away with its windows (:class:`RunawayWatch`) is withheld as ``runaway``
        (the outcome's estimate says so: no angular velocity), the next windows planned as at a
        start, not from it, and the outcome asks the caller to reset the estimator's warm start."""
        estimate = self._check_runaway(job, estimate)
        changed = self._plan(job, estimate, estimator_s, time.monotonic() if now_s is None else now_s)
        counts = self.counts
        counts.windows_recovered += int(estimate.recovered)
        counts.windows_accelerated += int(estimate.angular_acceleration is not None)
        withheld = ""
        if estimate.degenerate:
            withheld = estimate.withheld or "degenerate"
            counts.degenerate_windows += 1
            counts.withheld[withheld] = counts.withheld.get(withheld, 0) + 1
        return Outcome(estimate, not estimate.degenerate, withheld, self._gap_limit_s(job), changed,
                       forget_warm_start=withheld == "runaway")

    def published(self, estimate: WindowEstimate) -> None:
        """Count a published estimate (after it went out: whoever reads the counts then finds it
        published)."""
        self.counts.windows_processed += 1
        self.counts.last_iterations = estimate.iterations
        self.counts.last_focus_gain = (estimate.score / estimate.score_at_zero if estimate.score_at_zero
                                       else float("nan"))

    def _check_runaway(self, job: WindowJob, estimate: WindowEstimate) -> WindowEstimate:
        """The estimate, or withheld as ``runaway`` when :attr:`runaway` says so (auto windows)."""
        if job.cut is None:
            return estimate
        message = self.runaway.check(job.plan, estimate)
        if not message:
            return estimate
        return replace(estimate, angular_velocity=np.full(3, np.nan), covariance=None, degenerate=True,
                       withheld="runaway", message=message)

    def _plan(self, job: WindowJob, estimate: WindowEstimate, estimator_s: float | None, now_s: float) -> bool:
        """Auto windows: the next windows' duration, stride and event budget from this window's
        outcome; True when their duration changed twofold since last said (at most every
        WINDOW_LOG_PERIOD_S), or was never said."""
        windows = self.windows
        if not (isinstance(windows, AdaptiveWindows) and job.cut is not None):
            return False
        self._kept_shares.append(job.cut.kept_share)
        speed = planning_speed_rad_s(estimate)
        windows.after_estimate(job.cut, speed, estimator_s)
        self._plan_source = (estimate.t_ref_ns, speed) if speed is not None and speed > 0 else None
        said = self._said_duration_ns
        if said and (0.5 < windows.duration_ns / said < 2.0 or now_s - self._said_s < WINDOW_LOG_PERIOD_S):
            return False
        self._said_duration_ns, self._said_s = windows.duration_ns, now_s
        return True

    def _gap_limit_s(self, job: WindowJob) -> float | None:
        """A gap longer than gap_reset_windows window durations (s) restarts the windows too, so that
        no window mixes events from both sides of it (None: no limit from this window)."""
        windows, duration_s = self.settings.gap_reset_windows, job.duration_s
        return max(windows * duration_s, 1e-3) if windows > 0 and duration_s > 0 else None

    # ----------------------------------------------------------------- offline
    def run(self, batches: Iterable[Events], estimate: Callable[[Events], WindowEstimate],
            reset: Callable[[], None] | None = None) -> Iterator[tuple[WindowJob, Outcome]]:
        """The whole loop offline: every window of the batches estimated in order with ``estimate``
        (e.g. an :class:`~focus_ros.estimators.angular_velocity.AngularVelocityEstimator`'s, built
        with :attr:`settings`), each auto window planned from the previous estimate; yields each
        window with its outcome. Gaps do not restart the windows offline (the estimator drops its
        warm start after gap_reset_windows itself). A recording shorter than one window is
        estimated as one, a ``partial`` job (:meth:`finish`). ``reset``: makes the estimator forget
        its warm start (e.g. the estimator's ``reset``), called when an outcome says so
        (``forget_warm_start``: a runaway withheld)."""
        for job in self._jobs(batches):
            outcome = self.take(job, estimate(job.events))
            if outcome.publish:
                self.published(outcome.estimate)
            if outcome.forget_warm_start and reset is not None:
                reset()
            yield job, outcome

    def _jobs(self, batches: Iterable[Events]) -> Iterator[WindowJob]:
        """Every window of the batches, one by one (:meth:`cut`), then :meth:`finish`'s, if any."""
        for batch in batches:
            yield from self.cut(batch)
        partial = self.finish()
        if partial is not None:
            yield partial

    # ----------------------------------------------------------------- reports
    def description(self) -> str:
        """The windows in use, in words (for the log)."""
        settings = self.window_settings
        if settings.mode == "duration":
            return f"{settings.window_duration_s} s"
        if isinstance(self.windows, AdaptiveWindows):
            windows = self.windows
            return (f"{windows.duration_ns * 1e-6:.1f} ms every {windows.stride_ns * 1e-6:.1f} ms for now (auto: "
                    f"{windows.rule.rotation_deg:g} deg of rotation at the last estimate's speed, at least "
                    f"{windows.rule.events_per_pixel:g} events per IWE pixel, at most "
                    f"{windows.rule.max_duration_s:g} s), thinned to at most {windows.max_events} events "
                    f"({'the compute budget' if windows.budget is not None else 'max_window_events'}), IWE bins of "
                    f"{self.binning} px")
        return f"{settings.window_events} events, stride {settings.stride_events}"

    def window_need(self) -> str:
        """What one window needs, in words (a recording with less gives no complete window): e.g.
        "auto windows: 30,240 events or 20 ms" (the first auto window's, whichever comes first),
        "60,000 events", "0.05 s"."""
        settings = self.window_settings
        if settings.mode == "duration":
            return f"{settings.window_duration_s:g} s"
        if settings.mode == "events":
            return f"{settings.window_events:,} events"
        windows = self.windows
        first_ms = self.rule.duration_ns(windows.pixels, None, None) * 1e-6
        events = windows.cutter.first_window_events
        return f"auto windows: {f'{events:,} events or ' if events else ''}{first_ms:g} ms"

    def window_values(self) -> dict:
        """The windows in use, for /diagnostics: window_mode (auto, events, duration) and the IWE's
        pixel_binning; for auto windows the duration and stride now (ms), the event budget
        (max_window_events_now), the median share of the events kept since the last call (1 = none
        thinned) and the event rate (Mev/s)."""
        values = {"window_mode": self.window_settings.mode, "pixel_binning": self.binning}
        windows = self.windows
        if isinstance(windows, AdaptiveWindows):
            shares, self._kept_shares = self._kept_shares, []
            values.update(window_duration_ms=windows.duration_ns * 1e-6, window_stride_ms=windows.stride_ns * 1e-6,
                          max_window_events_now=windows.max_events,
                          kept_share=float(np.median(shares)) if shares else math.nan,
                          event_rate_mev_s=(windows.event_rate_hz or 0.0) * 1e-6)
        return values
