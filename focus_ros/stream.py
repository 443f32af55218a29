"""Checks on a live event stream, before events reach the windows.

A driver, a bag or a network can hand over events that cannot be used as they are:
empty packets, coordinates outside the sensor, a message whose events are not in time
order, timestamps going backwards across messages, gaps. The :class:`StreamGuard` keeps
what is usable (it sorts a message out of time order rather than dropping most of it), says
what it removed or repaired (a problem kind and a one-line message, for the caller to log
once), and tells when a gap or a jump back in time means the warm start and the buffered
events no longer apply.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numba
import numpy as np

from focus_ros.events import Events, NANOSECONDS_PER_SECOND


@dataclass
class GuardResult:
    """What the guard made of one batch.

    events: the usable events (possibly empty);
    problems: (kind, one-line message) pairs, kind a short stable key for "log once";
    restart: True when the stream restarted (jump back in time or a gap): buffered events
    and the warm start should be discarded before ``events`` are used.
    """

    events: Events
    problems: list = field(default_factory=list)
    restart: bool = False


_NO_RESTART, _JUMP_BACK, _GAP = 0, 1, 2


@numba.njit(cache=True, nogil=True)
def _first_descent(t) -> int:
    """Index of the first timestamp earlier than the one before it, or -1 when t never
    decreases (one early-exit pass: a sorted message, the usual case, costs one read)."""
    for k in range(1, len(t)):
        if t[k] < t[k - 1]:
            return k
    return -1


@numba.njit(cache=True, nogil=True)
def _scan_events(x, y, t, width, height, has_last, last_t_ns, jump_back_ns, has_gap, gap_ns, keep):
    """One pass over a batch: keep[k] = event k lies inside the sensor and is not earlier than
    every kept event before it (nor than last_t_ns, unless the stream restarts). The restart
    test is made on the first event inside: earlier than last_t_ns - jump_back_ns (jump back)
    or later than last_t_ns + gap_ns (gap, when has_gap). Returns (events outside,
    index of the first event inside, restart kind, events out of order)."""
    outside = 0
    out_of_order = 0
    first_inside = -1
    restart = _NO_RESTART
    running = np.int64(0)
    for k in range(len(t)):
        if x[k] >= width or y[k] >= height:
            keep[k] = False
            outside += 1
            continue
        if first_inside < 0:
            first_inside = k
            if has_last:
                if t[k] < last_t_ns - jump_back_ns:
                    restart = _JUMP_BACK
                elif has_gap and float(t[k] - last_t_ns) > gap_ns:
                    restart = _GAP
            if has_last and restart == _NO_RESTART:
                running = last_t_ns
            else:
                running = t[k]
        if t[k] >= running:
            keep[k] = True
            running = t[k]
        else:
            keep[k] = False
            out_of_order += 1
    return outside, first_inside, restart, out_of_order


#: the guard's counters (StreamGuard.counts), as a node reports them on /diagnostics
COUNTERS = ("empty_messages", "out_of_range_events", "unsorted_messages", "out_of_order_events", "restarts",
            "size_mismatch_messages")


class StreamGuard:
    """Validates consecutive event batches of one camera.

    width, height: the sensor size in px from the calibration;
    gap_s: a gap between consecutive events longer than this (s) restarts the stream
    (``None``: never); jump_back_s: timestamps earlier than the last accepted one by more
    than this (s) are a restart (a replayed bag looping, a driver reset); smaller
    reorderings across messages are dropped as out-of-order events. A message whose own
    events are out of time order (a driver merging readout lanes, a bag of shuffled
    events) is sorted first (stable, by t) and counted in ``unsorted_messages``.

    counts: empty_messages, out_of_range_events, unsorted_messages, out_of_order_events,
    restarts, size_mismatch_messages.
    """

    def __init__(self, width: int, height: int, gap_s: float | None = None, jump_back_s: float = 0.5):
        self.width = int(width)
        self.height = int(height)
        self.gap_s = gap_s
        self.jump_back_ns = int(jump_back_s * NANOSECONDS_PER_SECOND)
        self.last_t_ns: int | None = None
        self.counts = dict.fromkeys(COUNTERS, 0)

    def check(self, events: Events, message_width: int = 0, message_height: int = 0,
              dropped_outside: int = 0) -> GuardResult:
        """Check one batch; message_width/height as the message declares (0: not given);
        dropped_outside: events the decoder already dropped from it for lying outside the
        declared size (counted with the guard's own out-of-range events)."""
        problems = []
        if message_width and message_height and (message_width, message_height) != (self.width, self.height):
            self.counts["size_mismatch_messages"] += 1
            problems.append(("size_mismatch",
                             f"event message declares {message_width}x{message_height} px but the "
                             f"calibration is {self.width}x{self.height} px: messages of that size are ignored"))
            return GuardResult(Events.empty(), problems)
        if dropped_outside:
            self.counts["out_of_range_events"] += dropped_outside
            problems.append(("out_of_range", f"{dropped_outside} events outside the {self.width}x{self.height} px "
                                             "sensor dropped, the others kept"))
            if len(events) == 0:
                return GuardResult(events, problems)
        if len(events) == 0:
            self.counts["empty_messages"] += 1
            problems.append(("empty", "empty event message ignored"))
            return GuardResult(events, problems)

        descent = _first_descent(events.t)
        if descent >= 0:
            # sort what is out of order; the prefix before the first descent is already sorted,
            # so a stable argsort keeps equal timestamps in arrival order
            self.counts["unsorted_messages"] += 1
            problems.append(("unsorted", f"event message with its {len(events)} events out of time order (the "
                                         f"first at index {descent}): sorted by time, none dropped"))
            events = events[np.argsort(events.t, kind="stable")]

        # one compiled pass: events outside the sensor, the restart test on the first event
        # inside, events going back in time (against the running maximum, from the last
        # accepted time unless the stream restarts)
        keep = np.empty(len(events), dtype=np.bool_)
        has_last = self.last_t_ns is not None
        outside, first_inside, restart_kind, out_of_order = _scan_events(
            events.x, events.y, events.t, self.width, self.height, has_last, self.last_t_ns if has_last else 0,
            self.jump_back_ns, self.gap_s is not None,
            0.0 if self.gap_s is None else self.gap_s * NANOSECONDS_PER_SECOND, keep)
        if outside:
            self.counts["out_of_range_events"] += outside
            problems.append(("out_of_range", f"{outside} events outside the {self.width}x{self.height} px "
                                             "sensor dropped, the others kept"))
            if outside == len(events):
                return GuardResult(events[keep], problems)

        restart = restart_kind != _NO_RESTART
        first_t = int(events.t[first_inside])
        if restart_kind == _JUMP_BACK:
            problems.append(("jump_back",
                             f"timestamps jumped back by {(self.last_t_ns - first_t) / 1e9:.3f} s: "
                             "stream restarted, warm start reset"))
        elif restart_kind == _GAP:
            problems.append(("gap", f"gap of {(first_t - self.last_t_ns) / 1e9:.3f} s in the event stream: "
                                    "warm start reset"))
        if out_of_order:
            self.counts["out_of_order_events"] += out_of_order
            problems.append(("out_of_order", f"{out_of_order} events with timestamps going backwards dropped"))
        if outside or out_of_order:
            events = events[keep]
        if restart:
            self.counts["restarts"] += 1
        if len(events):
            self.last_t_ns = int(events.t[-1])
        return GuardResult(events, problems, restart)
