"""Windows of events: count and duration windows, offline (generators) and live (push)."""

import numpy as np
import pytest

from focus_ros.events import Events
from focus_ros.windows import CountWindowCutter, DurationWindowCutter, count_windows, duration_windows


def stream(n=1000, seed=0):
    rng = np.random.default_rng(seed)
    t = np.cumsum(rng.integers(0, 1000, n)).astype(np.int64)
    return Events.from_arrays(rng.integers(0, 240, n), rng.integers(0, 180, n), t, rng.integers(0, 2, n))


def split(events, seed=1):
    rng = np.random.default_rng(seed)
    cuts = np.sort(rng.integers(0, len(events), 15))
    return [events[a:b] for a, b in zip(np.r_[0, cuts], np.r_[cuts, len(events)])]


@pytest.mark.parametrize("size,stride", [(100, 100), (100, 40), (100, 130)])
def test_count_windows_match_direct_slicing_whatever_the_batching(size, stride):
    events = stream()
    expected = [events[s:s + size] for s in range(0, len(events) - size + 1, stride)]
    windows = list(count_windows(split(events), size, stride))
    assert len(windows) == len(expected)
    assert all(w.equals(e) for w, e in zip(windows, expected))


def test_duration_windows_hold_the_events_of_their_interval():
    events = stream()
    duration, stride = 50_000, 20_000
    windows = list(duration_windows(split(events), duration, stride))
    t0 = int(events.t[0])
    starts = [t0 + k * stride for k in range(10_000) if t0 + k * stride + duration <= events.t[-1]]
    expected = [events[(events.t >= s) & (events.t < s + duration)] for s in starts]
    expected = [e for e in expected if len(e)]
    assert len(windows) == len(expected)
    assert all(w.equals(e) for w, e in zip(windows, expected))


def test_push_cutter_reset_starts_over():
    events = stream()
    cutter = CountWindowCutter(100)
    assert cutter.push(events[:150])[0].equals(events[:100])
    cutter.reset()
    windows = cutter.push(events[150:260])
    assert len(windows) == 1 and windows[0].equals(events[150:250])
    duration = DurationWindowCutter(10_000)
    assert duration.push(Events.empty()) == []


@pytest.mark.parametrize("bad", [dict(size=0), dict(size=10, stride=0)])
def test_bad_window_settings_are_refused(bad):
    with pytest.raises(ValueError, match="positive"):
        CountWindowCutter(**bad)
