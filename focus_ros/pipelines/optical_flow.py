"""The optical-flow task's loop, once: events -> windows -> patch flow per window -> what each estimate reports.

Windows are N events (``window_events``; by default N from the sensor's pixel count,
:func:`~focus_ros.estimators.optical_flow.default_window_events`) or a fixed duration
(``window_duration_s``), each thinned to the estimator's bound (``max_window_events``) as it is cut:
a window of a 1280x720 sensor then crosses to the estimator process with the 40,000 events the
estimator uses instead of 640,000 (the estimator thins the same way: same result).

What an estimate feeds back to the next window stays in the estimator, because it must travel with
it into the node's worker process and be applied in window order: the warm start, and the windows
sized by the motion (a window reaches back over the previous windows' events until it spans
``window_motion_px`` at the last estimate's median patch speed). Fed the same windows in the same
order, the command line and the node therefore give the same flows, one per window as cut.

Two callers, one loop:

- offline (``focus-ros flow``, ``focus-ros evaluate-flow``, the benchmarks):
  :meth:`OpticalFlowPipeline.run` cuts a stream of event batches and estimates each window inline
  (:meth:`OpticalFlowPipeline.estimate` for windows cut elsewhere, e.g. by event indices);
- the node, whose estimator runs asynchronously in a worker process
  (:class:`~focus_ros.runtime.EstimatorRunner`): :meth:`OpticalFlowPipeline.feed` turns a batch of
  events into window jobs, :meth:`OpticalFlowPipeline.take` says what a window's estimate reports.

Free of rclpy and threads; not thread-safe (the node holds its lock around every call).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable, Iterator

import numpy as np

from focus_ros.estimators.optical_flow import (APERTURE, FEW_EVENTS, FLAT, IMPRECISE, OUT_OF_RANGE, REASONS, VALID,
                                               FlowEstimate, OpticalFlowEstimator, OpticalFlowSettings,
                                               default_window_events)
from focus_ros.events import NANOSECONDS_PER_SECOND, Events
from focus_ros.settings import setting
from focus_ros.windows import CountWindowCutter, DurationWindowCutter, thin_events

__all__ = ["FlowCounts", "FlowWindowSettings", "NO_COUNTS", "OpticalFlowPipeline", "REASON_KEYS",
           "events_per_window"]

#: /diagnostics key per reason code: patches_valid, patches_few_events, ... (last window, patches with events)
REASON_KEYS = {VALID: "valid", FEW_EVENTS: "few_events", FLAT: "flat", APERTURE: "aperture",
               OUT_OF_RANGE: "out_of_range", IMPRECISE: "imprecise"}


@dataclass(frozen=True)
class FlowWindowSettings:
    """Which windows the flow's events are cut into. The command line gives the duration in ms
    (``--window-ms``), the node in s."""

    window_events: int | None = setting(None, "events per window; unset = from the sensor: 30000 on a 240x180 "
                                        "sensor, scaled by the pixel count", unit="events", minimum=1,
                                        maximum=10_000_000, unset=0)
    window_duration_s: float = setting(0.0, "> 0: windows of this duration instead of a number of events", unit="s",
                                       minimum=0.0, maximum=10.0, read_only=True, option=None)


@dataclass(frozen=True)
class FlowCounts:
    """What one window's estimate reports (the node's /diagnostics, the command's progress).

    with_events: patches holding events; valid: patches with a valid flow (all hold events);
    reasons: per reason code (``REASONS``), the patches with events given it; borrowed: valid
    patches with fewer than ``min_events_per_patch`` events, solved with their neighbours' flow as
    a prior; normal: aperture patches given their normal flow only."""

    with_events: int
    valid: int
    reasons: tuple[int, ...]
    borrowed: int
    normal: int

    @classmethod
    def of(cls, estimate: FlowEstimate) -> "FlowCounts":
        with_events = estimate.event_counts > 0
        reasons = np.bincount(estimate.reason[with_events], minlength=len(REASONS))
        return cls(int(with_events.sum()), int(estimate.valid.sum()), tuple(int(count) for count in reasons),
                   int(estimate.borrowed.sum()), int(estimate.normal.sum()))

    @property
    def valid_share(self) -> float:
        """Share of the patches with events given a valid flow (NaN without any)."""
        return self.valid / self.with_events if self.with_events else math.nan

    def diagnostic_values(self) -> dict:
        """The node's /diagnostics values of the last window: valid_patch_share, patches_borrowed,
        patches_normal_flow and patches_<reason> (``REASON_KEYS``)."""
        return {"valid_patch_share": self.valid_share, "patches_borrowed": self.borrowed,
                "patches_normal_flow": self.normal,
                **{f"patches_{REASON_KEYS[code]}": count for code, count in enumerate(self.reasons)}}


def events_per_window(windows: FlowWindowSettings, width: int, height: int) -> int:
    """Events per window of a ``width`` x ``height`` px sensor: ``window_events``, or the sensor's
    default (:func:`~focus_ros.estimators.optical_flow.default_window_events`); 0 with windows of a
    duration."""
    if windows.window_duration_s > 0:
        return 0
    return windows.window_events or default_window_events(width, height)


#: the counts before any window: no patch seen
NO_COUNTS = FlowCounts(0, 0, (0,) * len(REASONS), 0, 0)


class OpticalFlowPipeline:
    """Patch flow of a ``width`` x ``height`` px sensor: windows cut as ``windows`` says, flows
    estimated with ``settings`` (see the module docstring). ValueError naming the problem when the
    settings are unusable (the estimator is built at once: nothing is compiled)."""

    def __init__(self, width: int, height: int, settings: OpticalFlowSettings = OpticalFlowSettings(),
                 windows: FlowWindowSettings = FlowWindowSettings()):
        #: the estimator of the offline callers (the node's runs in its worker: built from the same settings)
        self.estimator = OpticalFlowEstimator(width, height, settings)
        self.settings = settings
        self.windows = windows
        #: events per window (0 with windows of a duration)
        self.window_events = events_per_window(windows, width, height)
        self._cutter = (DurationWindowCutter(int(round(windows.window_duration_s * NANOSECONDS_PER_SECOND)))
                        if windows.window_duration_s > 0 else CountWindowCutter(self.window_events))

    @property
    def max_window_events(self) -> int:
        """Events per window at most (thinned beyond; 0: all)."""
        return self.estimator.max_window_events

    def describe(self) -> str:
        """One line on the grid and the windows, for a log."""
        settings, estimator, grid = self.settings, self.estimator, self.estimator.grid
        duration_s = self.windows.window_duration_s
        window = f"{duration_s:g}-s windows" if duration_s > 0 else f"windows of {self.window_events} events"
        if settings.window_motion_px > 0:
            window += (f" reaching back up to {settings.max_window_extension:g}x to span "
                       f"{settings.window_motion_px:g} px at the median patch speed")
        return (f"patch flow with loss '{settings.loss}': {grid.columns}x{grid.rows} patches of {grid.size} px "
                f"every {grid.stride} px (pixels binned {estimator.binning}x{estimator.binning}), {window}, at most "
                f"{estimator.max_window_events or 'all'} events per window")

    def feed(self, events: Events) -> list[Events]:
        """The windows ``events`` (the next batch of the stream, in time order) complete, oldest
        first, each thinned to ``max_window_events``: the jobs for the estimator."""
        bound = self.max_window_events
        return [thin_events(window, bound) if bound else window for window in self._cutter.push(events)]

    def reset(self) -> None:
        """A restart (the stream jumped): forget the events of the window being cut and the inline
        estimator's warm start (the node resets its worker's)."""
        self._cutter.reset()
        self.estimator.reset()

    def estimate(self, window: Events) -> FlowEstimate:
        """One window's flows, estimated inline (warm-started from the previous window's)."""
        return self.estimator.estimate(window)

    @staticmethod
    def take(estimate: FlowEstimate) -> FlowCounts:
        """What a window's estimate reports (wherever it was estimated)."""
        return FlowCounts.of(estimate)

    def run(self, batches: Iterable[Events]) -> Iterator[FlowEstimate]:
        """The offline loop: every window of the stream of ``batches``, estimated in order."""
        for batch in batches:
            for window in self.feed(batch):
                yield self.estimate(window)
