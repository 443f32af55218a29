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

__all__ = ["AngularVelocityPipeline", "Outcome", "PipelineCounts", "WINDOW_LOG_PERIOD_S",
           "WindowJob", "WindowSettings", "check_settings", "real_time_defaults"]

#: auto windows: their length is said again when it has changed twofold, at most once in this many seconds
WINDOW_LOG_PERIOD_S = 10.0


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
    the cut window (its span and its event count before thinning)."""

    events: Events
    cut: CutWindow | None = None

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
    ``windows_changed``: the auto windows' length changed twofold since last said (say it)."""

    estimate: WindowEstimate
    publish: bool
    withheld: str = ""
    gap_limit_s: float | None = None
    windows_changed: bool = False


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

    @staticmethod
    def _job(window) -> WindowJob:
        return WindowJob(window.events, window) if isinstance(window, CutWindow) else WindowJob(window)

    # ----------------------------------------------------------------- estimate -> feedback
    def take(self, job: WindowJob, estimate: WindowEstimate, estimator_s: float | None = None,
             now_s: float | None = None) -> Outcome:
        """One window's estimate back: plan the next auto windows from it (its speed, the event rate
        and, live, the estimator's time ``estimator_s`` in s), count it, and say whether to publish
        it. ``now_s``: monotonic time (s) for the rate limit on saying the windows (default: now).
        The published count follows :meth:`published`, called once it is out."""
        changed = self._plan(job, estimate, estimator_s, time.monotonic() if now_s is None else now_s)
        counts = self.counts
        counts.windows_recovered += int(estimate.recovered)
        counts.windows_accelerated += int(estimate.angular_acceleration is not None)
        withheld = ""
        if estimate.degenerate:
            withheld = estimate.withheld or "degenerate"
            counts.degenerate_windows += 1
            counts.withheld[withheld] = counts.withheld.get(withheld, 0) + 1
        return Outcome(estimate, not estimate.degenerate, withheld, self._gap_limit_s(job), changed)

    def published(self, estimate: WindowEstimate) -> None:
        """Count a published estimate (after it went out: whoever reads the counts then finds it
        published)."""
        self.counts.windows_processed += 1
        self.counts.last_iterations = estimate.iterations
        self.counts.last_focus_gain = (estimate.score / estimate.score_at_zero if estimate.score_at_zero
                                       else float("nan"))

    def _plan(self, job: WindowJob, estimate: WindowEstimate, estimator_s: float | None, now_s: float) -> bool:
        """Auto windows: the next windows' duration, stride and event budget from this window's
        outcome; True when their duration changed twofold since last said (at most every
        WINDOW_LOG_PERIOD_S), or was never said."""
        windows = self.windows
        if not (isinstance(windows, AdaptiveWindows) and job.cut is not None):
            return False
        self._kept_shares.append(job.cut.kept_share)
        windows.after_estimate(job.cut, planning_speed_rad_s(estimate), estimator_s)
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
    def run(self, batches: Iterable[Events],
            estimate: Callable[[Events], WindowEstimate]) -> Iterator[tuple[WindowJob, Outcome]]:
        """The whole loop offline: every window of the batches estimated in order with ``estimate``
        (e.g. an :class:`~focus_ros.estimators.angular_velocity.AngularVelocityEstimator`'s, built
        with :attr:`settings`), each auto window planned from the previous estimate; yields each
        window with its outcome. Gaps do not restart the windows offline (the estimator drops its
        warm start after gap_reset_windows itself)."""
        for batch in batches:
            for job in self.cut(batch):
                outcome = self.take(job, estimate(job.events))
                if outcome.publish:
                    self.published(outcome.estimate)
                yield job, outcome

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
