"""Windows of events cut from a stream of ``Events`` batches, with bounded memory.

- ``count_windows``: N events per window, a new window every ``stride`` events
  (stride = N: consecutive, non-overlapping; stride < N: overlapping; stride > N: gaps).
- ``duration_windows``: all events in [start, start + duration) (ns), a new window
  every ``stride`` ns; empty windows are skipped.

Both hold at most about one window plus one input batch in memory, whatever the
length of the stream. The generators serve offline streams; the classes behind them,
:class:`CountWindowCutter` and :class:`DurationWindowCutter`, take batches as they arrive
(``push(batch) -> list of complete windows``), for a live stream.
"""

from __future__ import annotations

from typing import Iterable, Iterator

import numpy as np

from focus_ros.events import Events


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
