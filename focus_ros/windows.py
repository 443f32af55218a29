"""Windows of events cut from a stream of ``Events`` batches, with bounded memory.

- ``count_windows``: N events per window, a new window every ``stride`` events
  (stride = N: consecutive, non-overlapping; stride < N: overlapping; stride > N: gaps).
- ``duration_windows``: all events in [start, start + duration) (ns), a new window
  every ``stride`` ns; empty windows are skipped.

Both hold at most about one window plus one input batch in memory, whatever the
length of the stream.
"""

from __future__ import annotations

from typing import Iterable, Iterator

import numpy as np

from focus_ros.events import Events


def count_windows(batches: Iterable[Events], size: int, stride: int | None = None) -> Iterator[Events]:
    """Yield consecutive windows of exactly ``size`` events, starting every ``stride``
    events (default: stride = size). A last incomplete window is not yielded."""
    if size <= 0:
        raise ValueError(f"window size must be a positive number of events, got {size}")
    stride = size if stride is None else stride
    if stride <= 0:
        raise ValueError(f"window stride must be a positive number of events, got {stride}")
    buffer = Events.empty()
    skip = 0  # events still to discard before the next window starts (stride > size)
    for batch in batches:
        if skip:
            dropped = min(skip, len(batch))
            batch = batch[dropped:]
            skip -= dropped
        buffer = Events.concatenate([buffer, batch])
        start = 0
        while len(buffer) - start >= size:
            yield buffer[start:start + size]
            if stride <= len(buffer) - start:
                start += stride
            else:
                skip = stride - (len(buffer) - start)
                start = len(buffer)
        buffer = buffer[start:]


def duration_windows(batches: Iterable[Events], duration_ns: int, stride_ns: int | None = None,
                     start_ns: int | None = None) -> Iterator[Events]:
    """Yield the events of [t0 + i stride, t0 + i stride + duration) for i = 0, 1, ...
    (t0 = start_ns or the first event's time; ns). Empty windows are skipped; the last,
    incomplete window (stream ends before its end time) is not yielded."""
    if duration_ns <= 0:
        raise ValueError(f"window duration must be positive (ns), got {duration_ns}")
    stride_ns = duration_ns if stride_ns is None else stride_ns
    if stride_ns <= 0:
        raise ValueError(f"window stride must be positive (ns), got {stride_ns}")
    buffer = Events.empty()
    window_start = start_ns
    for batch in batches:
        if not len(batch):
            continue
        if window_start is None:
            window_start = int(batch.t[0])
        buffer = Events.concatenate([buffer, batch])
        while len(buffer) and int(buffer.t[-1]) >= window_start + duration_ns:
            first = int(np.searchsorted(buffer.t, window_start, side="left"))
            last = int(np.searchsorted(buffer.t, window_start + duration_ns, side="left"))
            if last > first:
                yield buffer[first:last]
            window_start += stride_ns
            if int(buffer.t[-1]) >= window_start + duration_ns and last == first:
                # jump over a gap without events in one step
                next_time = int(buffer.t[min(last, len(buffer) - 1)])
                if next_time > window_start + duration_ns:
                    gaps = (next_time - window_start - duration_ns) // stride_ns
                    window_start += int(gaps) * stride_ns
            buffer = buffer[int(np.searchsorted(buffer.t, window_start, side="left")):]
