"""Windows of events cut from a stream of ``Events`` batches, with bounded memory.

- ``count_windows``: N events per window, a new window every ``stride`` events
  (stride = N: consecutive, non-overlapping; stride < N: overlapping; stride > N: gaps).
- ``duration_windows``: all events in [start, start + duration) (ns), a new window
  every ``stride`` ns; empty windows are skipped.

Both hold at most about one window plus one input batch in memory, whatever the
length of the stream. The generators serve offline streams; the classes behind them,
:class:`CountWindowCutter` and :class:`DurationWindowCutter`, take batches as they arrive
(``push(batch) -> list of complete windows``), for a live stream.

Windows that fit the sensor and the motion of a rotating camera (the angular velocity
node's and ``focus-ros estimate``'s default): :class:`WindowRule` says how long a window must
be and how often windows come, :class:`SlotWindowCutter` cuts windows whose duration and
stride may change from one to the next, thinned with :func:`thin_events` to a budget of
events that :class:`EventBudget` keeps within the estimator's time; :class:`AdaptiveWindows`
puts the three together. :func:`duration_for_motion_s` is the rule's core (a window holds a
given motion at the last estimate's speed), which the flow estimator applies too, looking back
over the windows :class:`RecentEvents` holds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Iterator

import numpy as np

from focus_ros.events import Events
from focus_ros.settings import setting


class CountWindowCutter:
    """Cuts windows of exactly ``size`` events, one every ``stride`` events (default:
    stride = size), from batches pushed as they arrive."""

    def __init__(self, size: int, stride: int | None = None):
        if size <= 0:
            raise ValueError(f"window size must be a positive number of events, got {size}")
        stride = size if stride is None else stride
        if stride <= 0:
            raise ValueError(f"window stride must be a positive number of events, got {stride}")
        self.size, self.stride = int(size), int(stride)
        self.reset()

    def reset(self) -> None:
        """Forget buffered events: the next window starts with the next batch."""
        self._pending: list[Events] = []  # batches not yet cut, oldest first (concatenated once a window completes)
        self._pending_count = 0
        self._skip = 0  # events still to discard before the next window starts (stride > size)

    def push(self, batch: Events) -> list[Events]:
        """Add a batch; return the windows it completed (oldest first)."""
        if self._skip:
            dropped = min(self._skip, len(batch))
            batch = batch[dropped:]
            self._skip -= dropped
        if len(batch):
            self._pending.append(batch)
            self._pending_count += len(batch)
        if self._pending_count < self.size:
            return []
        buffer = Events.concatenate(self._pending)
        windows = []
        start = 0
        while len(buffer) - start >= self.size:
            windows.append(buffer[start:start + self.size])
            if self.stride <= len(buffer) - start:
                start += self.stride
            else:
                self._skip = self.stride - (len(buffer) - start)
                start = len(buffer)
        rest = buffer[start:]
        self._pending = [rest] if len(rest) else []
        self._pending_count = len(rest)
        return windows

    def held_window(self) -> Events:
        """The events held for the next window, not yet a window (oldest first; they stay held):
        at the end of a stream shorter than one window, the whole stream."""
        return Events.concatenate(self._pending)


class DurationWindowCutter:
    """Cuts the events of [t0 + i stride, t0 + i stride + duration) for i = 0, 1, ... (ns;
    t0 = start_ns or the first event's time) from batches pushed as they arrive. Empty
    windows are skipped; a window is complete once an event at or after its end arrives."""

    def __init__(self, duration_ns: int, stride_ns: int | None = None, start_ns: int | None = None):
        if duration_ns <= 0:
            raise ValueError(f"window duration must be positive (ns), got {duration_ns}")
        stride_ns = duration_ns if stride_ns is None else stride_ns
        if stride_ns <= 0:
            raise ValueError(f"window stride must be positive (ns), got {stride_ns}")
        self.duration_ns, self.stride_ns, self.start_ns = int(duration_ns), int(stride_ns), start_ns
        self.reset()

    def reset(self) -> None:
        """Forget buffered events; the next window starts at the next event (or start_ns)."""
        self._buffer = Events.empty()
        self._window_start = self.start_ns

    def push(self, batch: Events) -> list[Events]:
        """Add a batch; return the windows it completed (oldest first)."""
        if not len(batch):
            return []
        duration_ns, stride_ns = self.duration_ns, self.stride_ns
        if self._window_start is None:
            self._window_start = int(batch.t[0])
        window_start = self._window_start
        buffer = Events.concatenate([self._buffer, batch])
        windows = []
        while len(buffer) and int(buffer.t[-1]) >= window_start + duration_ns:
            first = int(np.searchsorted(buffer.t, window_start, side="left"))
            last = int(np.searchsorted(buffer.t, window_start + duration_ns, side="left"))
            if last > first:
                windows.append(buffer[first:last])
            window_start += stride_ns
            if int(buffer.t[-1]) >= window_start + duration_ns and last == first:
                # jump over a gap without events in one step
                next_time = int(buffer.t[min(last, len(buffer) - 1)])
                if next_time > window_start + duration_ns:
                    gaps = (next_time - window_start - duration_ns) // stride_ns
                    window_start += int(gaps) * stride_ns
            buffer = buffer[int(np.searchsorted(buffer.t, window_start, side="left")):]
        self._window_start = window_start
        self._buffer = buffer
        return windows

    def held_window(self) -> Events:
        """The events held for the next window, not yet a window (oldest first; they stay held):
        at the end of a stream shorter than one window, the whole stream."""
        return self._buffer


def count_windows(batches: Iterable[Events], size: int, stride: int | None = None) -> Iterator[Events]:
    """Yield consecutive windows of exactly ``size`` events, starting every ``stride``
    events (default: stride = size). A last incomplete window is not yielded."""
    cutter = CountWindowCutter(size, stride)
    for batch in batches:
        yield from cutter.push(batch)


def duration_windows(batches: Iterable[Events], duration_ns: int, stride_ns: int | None = None,
                     start_ns: int | None = None) -> Iterator[Events]:
    """Yield the events of [t0 + i stride, t0 + i stride + duration) for i = 0, 1, ...
    (t0 = start_ns or the first event's time; ns). Empty windows are skipped; the last,
    incomplete window (stream ends before its end time) is not yielded."""
    cutter = DurationWindowCutter(duration_ns, stride_ns, start_ns)
    for batch in batches:
        yield from cutter.push(batch)


# ----------------------------------------------------------------- windows that fit the sensor and the motion

def thin_events(events: Events, count: int) -> Events:
    """At most ``count`` of the events, spread uniformly over the window by index: event
    ``floor((i + 1/2) n / count)`` for i = 0 .. count - 1 (n = len(events)). Deterministic (the
    same window and count give the same events), in time order, every part of the window
    thinned alike; all of them when there are no more than ``count``."""
    return events[_thinned_indices(len(events), count)] if len(events) > count else events


def _thinned_indices(total: int, count: int) -> np.ndarray:
    """The indices :func:`thin_events` keeps of ``total`` events (increasing)."""
    return ((np.arange(count, dtype=np.int64) * 2 + 1) * total) // (2 * count)


def duration_for_motion_s(motion: float, speed: float, longest_s: float) -> float:
    """How long (s) a window must be to hold ``motion`` at ``speed`` (motion per s, the same unit:
    rad and rad/s for a rotating camera, px and px/s for optical flow): motion / speed, or
    ``longest_s`` while there is (nearly) no motion (speed <= 0). The one rule behind the windows
    sized by the motion (:class:`WindowRule` for the angular velocity, the flow estimator's
    ``window_motion_px``): the error of a focused image is a fraction of a pixel, the same small
    fraction of the motion whatever the speed."""
    return motion / speed if speed > 0 else longest_s


@dataclass(frozen=True)
class WindowRule:
    """How long a window of a rotating camera must be to hold enough to focus, and how often the
    windows come: the camera turns ``rotation_deg`` within a window at the last estimate's speed
    (an image motion of about f times it, f the focal length in px, so that the error of a focused
    image, a fraction of a pixel, is the same small fraction of the motion on every sensor), with
    enough events per IWE pixel and at most ``max_duration_s`` long (the motion changes within a
    longer one), overlapping (a new window every ``stride_share`` of a window's length, at most one
    output period apart: each window's warm start comes from closer by); each window thinned to
    the events the estimator takes in ``budget_share`` of the time between windows
    (:class:`EventBudget`). The defaults of ``events_per_pixel``, ``stride_share``,
    ``min_duration_s`` and ``max_duration_s`` were chosen by measurement (benchmarks/eval_window_rules.py,
    docs/evaluation/window_rules.md); why the others: docs/design.md, section 6."""

    rotation_deg: float = setting(3.0, "auto windows: the camera's rotation within a window at the last estimate's "
                                  "speed; an image motion of about f times it", unit="deg", minimum=0.1,
                                  maximum=90.0, option="--window-rotation-deg",
                                  parameter="window_rotation_deg")
    events_per_pixel: float = setting(0.7, "a window grows until it holds this many events per IWE pixel",
                                      unit="events/px", minimum=0.0, option=None, parameter=None)
    cold_events_per_pixel: float = setting(0.7, "while the motion is unknown a window holds this many events per "
                                           "IWE pixel, at most one output period", unit="events/px", minimum=0.0,
                                           option=None, parameter=None)
    output_period_s: float = setting(0.02, "auto windows: at most this long between estimates", unit="s",
                                     minimum=0.001, maximum=1.0, option=None)
    stride_share: float = setting(0.5, "auto windows: the stride between windows as a share of their length "
                                  "(0.5: each event in two windows), at most one output period", minimum=0.05,
                                  maximum=1.0, option=None, parameter=None)
    min_duration_s: float = setting(0.02, "the shortest window: at fast rotations the angular velocity is measured "
                                    "against the image motion across the window", unit="s", minimum=0.0,
                                    option=None, parameter=None)
    max_duration_s: float = setting(0.035, "auto windows: the longest window, also while the camera stands still",
                                    unit="s", minimum=0.001, maximum=10.0, option=None,
                                    parameter="max_window_duration_s")
    budget_share: float = setting(0.6, "the compute budget: the estimator's share of the time between windows",
                                  minimum=0.0, maximum=1.0, option=None, parameter=None)
    min_events: int = setting(15_000, "the compute budget's floor (or min_events_per_pixel, if more)",
                              unit="events", minimum=1, option=None, parameter=None)
    min_events_per_pixel: float = setting(0.1, "the compute budget's floor per IWE pixel", unit="events/px",
                                          minimum=0.0, option=None, parameter=None)
    max_events: int = setting(150_000, "the compute budget's ceiling, and the offline thinning bound",
                              unit="events", minimum=1, option=None, parameter=None)
    max_held_events: int = setting(4_000_000, "the most events held for the windows to come (about 50 MB)",
                                   unit="events", minimum=0, option=None, parameter=None)

    def duration_ns(self, pixels: int, angular_speed_rad_s: float | None, event_rate_hz: float | None) -> int:
        """The window duration (ns) for an IWE of ``pixels`` pixels, the angular speed |omega|
        (rad/s) of the last estimate (None: unknown, see ``cold_events_per_pixel``; one output
        period while the rate is unknown too) and the event rate (events/s, None while unknown)."""
        if angular_speed_rad_s is None or not np.isfinite(angular_speed_rad_s):
            duration_s = (min(self.cold_events_per_pixel * pixels / event_rate_hz, self.output_period_s)
                          if event_rate_hz else self.output_period_s)
        else:
            duration_s = duration_for_motion_s(np.deg2rad(self.rotation_deg), angular_speed_rad_s,
                                               self.max_duration_s)
        if event_rate_hz and event_rate_hz > 0:
            duration_s = max(duration_s, self.events_per_pixel * pixels / event_rate_hz)
        return int(round(1e9 * min(max(duration_s, self.min_duration_s), self.max_duration_s)))

    def stride_ns(self, duration_ns: int) -> int:
        """Between two windows' reference times (ns): ``stride_share`` of the duration, at most one
        output period."""
        return int(min(round(duration_ns * self.stride_share), round(1e9 * self.output_period_s)))


@dataclass
class CutWindow:
    """One window of a :class:`SlotWindowCutter`: its events (thinned to the cutter's
    ``max_events``), how many events the window held before thinning, and its span
    [start_ns, end_ns)."""

    events: Events
    raw_count: int
    start_ns: int
    end_ns: int

    @property
    def kept_share(self) -> float:
        """Share of the window's events kept by the thinning (1 = all)."""
        return len(self.events) / self.raw_count if self.raw_count else 1.0


class SlotWindowCutter:
    """Windows centred on a sequence of reference times: window k holds the events of
    [c_k - d_k / 2, c_k + d_k / 2), c_{k+1} = c_k + s_k (ns), where the duration d_k and the
    stride s_k are the attributes ``duration_ns`` and ``stride_ns`` as they are when window k is
    planned: the caller may change them between windows (the :class:`WindowRule` from the last
    estimate). The first window (since the start or a reset) starts at the first event and
    ends after ``duration_ns`` or, sooner, after its ``first_window_events`` events (0 = no
    such bound): the event rate is unknown then. A window is complete once an
    event at or after its end arrives; windows without events are skipped (after a gap the
    next window starts at the next event). Each window is thinned to at most ``max_events``
    (0 = all; :func:`thin_events`, set it between windows too) while it is gathered.

    Memory: the batches are kept as they came (no copy per batch) back to the start of the
    longest window that can still come (``max_duration_ns``), and a window is copied once,
    thinned: the events held are bounded by max_duration_ns times the event rate, and by
    ``max_held_events`` (0 = no such bound; beyond it the oldest batches go, a window then
    starts later), whatever the length of the stream.
    """

    def __init__(self, duration_ns: int, stride_ns: int, max_duration_ns: int, max_events: int = 0,
                 first_window_events: int = 0, max_held_events: int = 0):
        if min(duration_ns, stride_ns, max_duration_ns) <= 0:
            raise ValueError(f"window duration, stride and longest duration must be positive (ns), got "
                             f"{duration_ns}, {stride_ns}, {max_duration_ns}")
        self.duration_ns, self.stride_ns = int(duration_ns), int(stride_ns)
        self.max_duration_ns, self.max_events = int(max_duration_ns), int(max_events)
        self.first_window_events = int(first_window_events)
        self.max_held_events = int(max_held_events)
        self.reset()

    def reset(self) -> None:
        """Forget the held events; the next window starts at the next event."""
        self._chunks: list[Events] = []
        self._held = 0  # events in _chunks
        self._centre_ns: int | None = None

    @property
    def held_events(self) -> int:
        """Events held now (bounded, see the class docstring)."""
        return self._held

    def held_window(self) -> CutWindow | None:
        """The next window as far as the held events reach, thinned as the windows are (None: no
        event held for it; the events stay held): at the end of a stream shorter than the first
        window, the whole stream (within ``max_held_events``)."""
        if not self._chunks:
            return None
        start = (int(self._chunks[0].t[0]) if self._centre_ns is None
                 else self._centre_ns - min(self.duration_ns, self.max_duration_ns) // 2)
        window = self._gather(start, int(self._chunks[-1].t[-1]) + 1)
        return window if window.raw_count else None

    def push(self, batch: Events) -> list[CutWindow]:
        """Add a time-ordered batch; return the windows it completed (oldest first)."""
        return list(self.cut(batch))

    def cut(self, batch: Events) -> Iterator[CutWindow]:
        """Add a time-ordered batch and yield the windows it completed one by one, each planned
        with ``duration_ns`` / ``stride_ns`` as they are when the previous one has been taken
        (offline, where one batch completes many windows, a window is planned from the
        previous one's estimate as live). Iterate it to the end."""
        if not len(batch):
            return
        self._chunks.append(batch)
        self._held += len(batch)
        while self.max_held_events and self._held - len(self._chunks[0]) >= self.max_held_events:
            self._held -= len(self._chunks.pop(0))  # beyond the bound: the oldest go (the windows thin anyway)
        last_ns = int(batch.t[-1])
        if self._centre_ns is None:  # the first window since the start (or a reset)
            first_ns = int(self._chunks[0].t[0])
            end = first_ns + min(self.duration_ns, self.max_duration_ns)
            if self.first_window_events and self.held_events >= self.first_window_events:
                end = min(end, self._time_of_event(self.first_window_events - 1) + 1)
            elif last_ns < end:
                return
            self._centre_ns = first_ns + (end - first_ns) // 2
            yield self._gather(first_ns, end)
            self._centre_ns += self.stride_ns
        while True:
            half = min(self.duration_ns, self.max_duration_ns) // 2
            start, end = self._centre_ns - half, self._centre_ns + half
            if last_ns < end:
                break
            window = self._gather(start, end)
            if window.raw_count:
                yield window
                self._centre_ns += self.stride_ns
            else:  # a gap: the next window starts at the next event
                following = self._first_time_at_or_after(end)
                self._centre_ns = max(self._centre_ns + self.stride_ns, following + half)
        self._forget_before(self._centre_ns - self.max_duration_ns // 2)

    def _segments(self, start_ns: int, end_ns: int) -> list[tuple[Events, int, int]]:
        """(chunk, first, last) index ranges of the held events in [start_ns, end_ns)."""
        segments = []
        for chunk in self._chunks:
            if int(chunk.t[-1]) < start_ns or int(chunk.t[0]) >= end_ns:
                continue
            first, last = np.searchsorted(chunk.t, (start_ns, end_ns), side="left")
            if last > first:
                segments.append((chunk, int(first), int(last)))
        return segments

    def _gather(self, start_ns: int, end_ns: int) -> CutWindow:
        """The window's events, thinned while copied (one copy of the kept events only)."""
        segments = self._segments(start_ns, end_ns)
        total = sum(last - first for _, first, last in segments)
        if self.max_events and total > self.max_events:
            keep = _thinned_indices(total, self.max_events)
            parts, offset = [], 0
            for chunk, first, last in segments:
                low, high = np.searchsorted(keep, (offset, offset + last - first))
                parts.append(chunk[keep[low:high] - offset + first])
                offset += last - first
        else:
            parts = [chunk[first:last] for chunk, first, last in segments]
        events = Events.concatenate(parts) if parts else Events.empty()
        return CutWindow(events, total, start_ns, end_ns)

    def _time_of_event(self, index: int) -> int:
        """Time (ns) of the held event of this index (oldest first; index < held_events)."""
        for chunk in self._chunks:
            if index < len(chunk):
                return int(chunk.t[index])
            index -= len(chunk)
        raise IndexError("fewer events held")

    def _first_time_at_or_after(self, time_ns: int) -> int:
        for chunk in self._chunks:
            index = int(np.searchsorted(chunk.t, time_ns, side="left"))
            if index < len(chunk):
                return int(chunk.t[index])
        return time_ns

    def _forget_before(self, time_ns: int) -> None:
        while self._chunks and int(self._chunks[0].t[-1]) < time_ns:
            self._held -= len(self._chunks.pop(0))


class EventBudget:
    """Events per window an estimator can take within a time budget (the thinning's
    ``max_events``): after each window, ``update(events, seconds)`` scales the budget by the
    square root of target / measured time (damped: one slow window from a busy machine does
    not halve it), within [minimum, maximum] events. A rule, not a queue: the output rate stays,
    the windows hold fewer events when the estimator is slow."""

    def __init__(self, target_s: float, minimum: int, maximum: int, initial: int):
        if not (target_s > 0 and 0 < minimum <= maximum):
            raise ValueError(f"event budget needs a positive target time and 0 < minimum <= maximum, got "
                             f"{target_s} s, {minimum}, {maximum}")
        self.target_s, self.minimum, self.maximum = float(target_s), int(minimum), int(maximum)
        self.events = int(min(max(initial, minimum), maximum))

    def update(self, events: int, seconds: float) -> int:
        """Take one window's time (s) for its events; return the new budget (events)."""
        if events > 0 and seconds > 0 and np.isfinite(seconds):
            scale = np.sqrt(self.target_s / seconds)
            if events >= self.events:  # thinned to the budget: the time says how far it may move
                self.events = int(min(max(self.events * scale, self.minimum), self.maximum))
            elif seconds > self.target_s:  # a window smaller than the budget was already too slow
                self.events = int(min(max(events * scale, self.minimum), self.maximum))
        return self.events


class AdaptiveWindows:
    """The windows that fit the sensor and the motion: a :class:`SlotWindowCutter` whose
    duration and stride follow the :class:`WindowRule` from the last estimate's angular speed
    and the measured event rate, each window thinned to a budget of events: fixed
    (``max_events`` > 0; 0 = the rule's ``max_events``) or, with ``live``, an
    :class:`EventBudget` that follows the estimator's time per window. ``pixels``: the IWE's
    pixel count (after any binning). Serves the node (live) and ``focus-ros estimate``
    (offline, deterministic); not thread-safe (the node holds its lock)."""

    def __init__(self, rule: WindowRule, pixels: int, max_events: int = 0, live: bool = False):
        self.rule, self.pixels = rule, int(pixels)
        cap = int(max_events) or rule.max_events
        floor = min(max(rule.min_events, int(rule.min_events_per_pixel * self.pixels)), cap)
        self.budget = (EventBudget(rule.budget_share * rule.output_period_s, floor, cap,
                                   min(max(4 * rule.min_events, floor), cap)) if live and not max_events else None)
        self.fixed_max_events = cap
        duration = rule.duration_ns(self.pixels, None, None)
        self.cutter = SlotWindowCutter(duration, rule.stride_ns(duration), int(round(rule.max_duration_s * 1e9)),
                                       self.max_events, int(rule.cold_events_per_pixel * self.pixels),
                                       rule.max_held_events)
        self.event_rate_hz: float | None = None
        self.angular_speed_rad_s: float | None = None
        #: live: the estimator's time per event of a window (s, smoothed), None until measured
        self.seconds_per_event: float | None = None

    @property
    def max_events(self) -> int:
        """Events a window is thinned to now."""
        return self.budget.events if self.budget is not None else self.fixed_max_events

    @property
    def duration_ns(self) -> int:
        return self.cutter.duration_ns

    @property
    def stride_ns(self) -> int:
        return self.cutter.stride_ns

    def reset(self) -> None:
        """A restart of the stream: no events held, the next window as at the start."""
        self.cutter.reset()
        self.angular_speed_rad_s = None
        self._plan()

    def push(self, batch: Events) -> list[CutWindow]:
        """Add a batch; the windows it completed, thinned (oldest first)."""
        return self.cutter.push(batch)

    def cut(self, batch: Events) -> Iterator[CutWindow]:
        """Add a batch; yield the windows it completed one by one, each planned after the
        previous one's :meth:`after_estimate` (offline; see :meth:`SlotWindowCutter.cut`)."""
        return self.cutter.cut(batch)

    def held_window(self) -> CutWindow | None:
        """The next window as far as the held events reach (:meth:`SlotWindowCutter.held_window`)."""
        return self.cutter.held_window()

    def after_estimate(self, window: CutWindow, angular_speed_rad_s: float | None,
                       estimator_s: float | None = None) -> None:
        """Plan the next windows from one window's outcome: the angular speed |omega| (rad/s)
        it found (None: unknown, e.g. withheld; 0: too little motion), the event rate it
        held and (live) the estimator's time for it (s)."""
        span_s = (window.end_ns - window.start_ns) * 1e-9
        if span_s > 0 and window.raw_count:
            self.event_rate_hz = window.raw_count / span_s
        self.angular_speed_rad_s = angular_speed_rad_s
        if self.budget is not None and estimator_s is not None:
            self.budget.update(len(window.events), estimator_s)
            if len(window.events) and estimator_s > 0 and np.isfinite(estimator_s):
                measured = estimator_s / len(window.events)
                self.seconds_per_event = (measured if self.seconds_per_event is None
                                          else 0.7 * self.seconds_per_event + 0.3 * measured)
        self._plan()

    def _plan(self) -> None:
        duration = self.rule.duration_ns(self.pixels, self.angular_speed_rad_s, self.event_rate_hz)
        self.cutter.duration_ns, self.cutter.stride_ns = duration, self._stride_ns(duration)
        if self.budget is not None:  # windows come every stride: each may take its share of that
            self.budget.target_s = self.rule.budget_share * self.cutter.stride_ns * 1e-9
        self.cutter.max_events = self.max_events

    def _stride_ns(self, duration_ns: int) -> int:
        """The rule's stride, or live a longer one (at most one output period) when the estimator
        could not take the whole window within ``budget_share`` of it: overlapping windows cost
        more estimates per second, and the compute goes first to the events of each window (the
        windows are thinned only when one per output period is already too many for them)."""
        stride_ns = self.rule.stride_ns(duration_ns)
        if self.budget is None or self.seconds_per_event is None or not self.event_rate_hz:
            return stride_ns
        events = min(self.event_rate_hz * duration_ns * 1e-9, self.budget.maximum)
        needed_ns = 1e9 * self.seconds_per_event * events / self.rule.budget_share
        return int(min(max(stride_ns, needed_ns), round(1e9 * self.rule.output_period_s)))


class RecentEvents:
    """The last windows' events (copies), for an estimator that looks further back than the window
    it is given (the flow estimator's windows sized by the motion): ``add(window, keep_ns)`` after
    each window, then ``since(start_ns)``: the held events from start_ns (ns) on, time-ordered.
    Windows follow each other (not overlapping) and are held back to ``keep_ns`` before the newest
    event; a window reaching back before the previous one's end (a restart, a bag played again)
    forgets the older ones. Gaps between windows (windows skipped by a live node that cannot keep
    up) stay as holes in the span: a focus objective needs no contiguous events, only fewer.
    Copies: a caller may reuse a window's arrays (the node's estimator process reads windows from
    a shared slot)."""

    def __init__(self):
        self._windows: list[Events] = []

    def reset(self) -> None:
        self._windows = []

    @property
    def count(self) -> int:
        """Windows held (the last one added included)."""
        return len(self._windows)

    def add(self, window: Events, keep_ns: int) -> None:
        """Hold a time-ordered window (copied); forget the windows that end more than keep_ns (ns)
        before its last event, or all of them when it starts before the previous one's end (a
        restart)."""
        if not len(window):
            return
        first, last = int(window.t[0]), int(window.t[-1])
        if self._windows and first < int(self._windows[-1].t[-1]):
            self._windows = []
        self._windows.append(Events(window.x.copy(), window.y.copy(), window.t.copy(), window.p.copy()))
        while len(self._windows) > 1 and int(self._windows[0].t[-1]) < last - keep_ns:
            self._windows.pop(0)

    def since(self, start_ns: int) -> Events:
        """The held events at or after start_ns (ns), oldest first."""
        events = Events.concatenate(self._windows) if self._windows else Events.empty()
        return events[int(np.searchsorted(events.t, start_ns, side="left")):]
