"""Checks on a live event stream, before events reach the windows.

A driver, a bag or a network can hand over events that cannot be used as they are:
empty packets, coordinates outside the sensor, timestamps going backwards, gaps. The
:class:`StreamGuard` keeps what is usable, says what it removed (a problem kind and a
one-line message, for the caller to log once), and tells when a gap or a jump back in
time means the warm start and the buffered events no longer apply.
"""

from __future__ import annotations

from dataclasses import dataclass, field

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


class StreamGuard:
    """Validates consecutive event batches of one camera.

    width, height: the sensor size in px from the calibration;
    gap_s: a gap between consecutive events longer than this (s) restarts the stream
    (``None``: never); jump_back_s: timestamps earlier than the last accepted one by more
    than this (s) are a restart (a replayed bag looping, a driver reset); smaller
    reorderings are dropped as out-of-order events.
    """

    def __init__(self, width: int, height: int, gap_s: float | None = None, jump_back_s: float = 0.5):
        self.width = int(width)
        self.height = int(height)
        self.gap_s = gap_s
        self.jump_back_ns = int(jump_back_s * NANOSECONDS_PER_SECOND)
        self.last_t_ns: int | None = None
        self.counts = {"empty_messages": 0, "out_of_range_events": 0,
                       "out_of_order_events": 0, "restarts": 0, "size_mismatch_messages": 0}

    def check(self, events: Events, message_width: int = 0, message_height: int = 0) -> GuardResult:
        """Check one batch; message_width/height as the message declares (0: not given)."""
        problems = []
        if message_width and message_height and (message_width, message_height) != (self.width, self.height):
            self.counts["size_mismatch_messages"] += 1
            problems.append(("size_mismatch",
                             f"event message declares {message_width}x{message_height} px but the "
                             f"calibration is {self.width}x{self.height} px: messages of that size are ignored"))
            return GuardResult(Events.empty(), problems)
        if len(events) == 0:
            self.counts["empty_messages"] += 1
            problems.append(("empty", "empty event message ignored"))
            return GuardResult(events, problems)

        inside = (events.x < self.width) & (events.y < self.height)
        if not inside.all():
            outside = int((~inside).sum())
            self.counts["out_of_range_events"] += outside
            problems.append(("out_of_range",
                             f"{outside} events outside the {self.width}x{self.height} px sensor dropped"))
            events = events[inside]
            if len(events) == 0:
                return GuardResult(events, problems)

        restart = False
        t = events.t
        if self.last_t_ns is not None:
            if t[0] < self.last_t_ns - self.jump_back_ns:
                restart = True
                problems.append(("jump_back",
                                 f"timestamps jumped back by {(self.last_t_ns - t[0]) / 1e9:.3f} s: "
                                 "stream restarted, warm start reset"))
            elif self.gap_s is not None and t[0] - self.last_t_ns > self.gap_s * NANOSECONDS_PER_SECOND:
                restart = True
                problems.append(("gap", f"gap of {(t[0] - self.last_t_ns) / 1e9:.3f} s in the event stream: "
                                        "warm start reset"))
        # keep events that never go back in time (relative to the running maximum)
        previous = -np.iinfo(np.int64).max if (self.last_t_ns is None or restart) else self.last_t_ns
        running_max = np.maximum.accumulate(np.concatenate(([previous], t)))[:-1]
        in_order = t >= running_max
        if not in_order.all():
            dropped = int((~in_order).sum())
            self.counts["out_of_order_events"] += dropped
            problems.append(("out_of_order", f"{dropped} events with timestamps going backwards dropped"))
            events = events[in_order]
        if restart:
            self.counts["restarts"] += 1
        if len(events):
            self.last_t_ns = int(events.t[-1])
        return GuardResult(events, problems, restart)
