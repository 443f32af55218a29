"""Windows of events: count and duration windows, offline (generators) and live (push); the
auto windows of a rotating camera (rule, slot cutter, thinning, compute budget)."""

import numpy as np
import pytest

from focus_ros.events import Events
from focus_ros.windows import (AdaptiveWindows, CountWindowCutter, DurationWindowCutter, EventBudget,
                               SlotWindowCutter, WindowRule, count_windows, duration_windows, thin_events)


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


# ----------------------------------------------------------------- thinning

def dense_stream(n=20_000, seed=3):
    """Events with strictly increasing times and a unique id in x (to follow them)."""
    rng = np.random.default_rng(seed)
    t = np.cumsum(rng.integers(1, 2000, n)).astype(np.int64)
    return Events.from_arrays(np.arange(n) % 60000, rng.integers(0, 180, n), t, rng.integers(0, 2, n))


def test_thinning_keeps_time_order_is_deterministic_and_uniform():
    events = dense_stream()
    kept = thin_events(events, 1000)
    assert len(kept) == 1000
    assert np.all(np.diff(kept.t) > 0)                        # in time order, no event twice
    assert kept.equals(thin_events(events, 1000))             # the same subset every time
    assert np.isin(kept.t, events.t).all()                    # events of the window, unchanged
    # uniform: every tenth of the window (by index) keeps a tenth of the budget
    index = np.searchsorted(events.t, kept.t)
    per_tenth = np.bincount(index * 10 // len(events), minlength=10)
    assert per_tenth.min() >= 99 and per_tenth.max() <= 101, per_tenth
    assert thin_events(events[:500], 1000).equals(events[:500])  # fewer than the budget: all


def test_slot_windows_thin_alike_whatever_the_batching():
    """The cutter thins while gathering from the batches it holds: the windows do not depend
    on how the stream was split into messages, and equal the direct slice thinned."""
    events = dense_stream()
    duration, stride = 3_000_000, 2_000_000
    whole = SlotWindowCutter(duration, stride, 10_000_000, max_events=300).push(events)
    cutter = SlotWindowCutter(duration, stride, 10_000_000, max_events=300)
    pieces = [window for batch in split(events) for window in cutter.push(batch)]
    assert len(whole) == len(pieces) >= 5
    centre = int(events.t[0]) + duration // 2
    for a, b in zip(whole, pieces):
        assert a.events.equals(b.events) and a.raw_count == b.raw_count
        direct = events[(events.t >= centre - duration // 2) & (events.t < centre + duration // 2)]
        assert (a.start_ns, a.end_ns) == (centre - duration // 2, centre + duration // 2)
        assert a.raw_count == len(direct) and a.events.equals(thin_events(direct, 300))
        assert a.kept_share == pytest.approx(min(300, len(direct)) / len(direct))
        centre += stride


def test_slot_windows_follow_a_duration_changed_between_windows_and_skip_gaps():
    events = dense_stream()
    cutter = SlotWindowCutter(2_000_000, 2_000_000, 20_000_000)
    first = cutter.push(events[:3000])
    cutter.duration_ns, cutter.stride_ns = 6_000_000, 1_000_000
    later = cutter.push(events[3000:])
    assert first and later
    assert all(w.end_ns - w.start_ns == 2_000_000 for w in first)
    assert all(w.end_ns - w.start_ns == 6_000_000 for w in later)
    centres = [(w.start_ns + w.end_ns) // 2 for w in first + later]
    assert np.all(np.diff(centres)[len(first):] == 1_000_000)
    # a gap of 1 s: the next window starts at the next event, no empty windows in between
    gap = Events(events.x, events.y, events.t + int(events.t[-1]) + 1_000_000_000, events.p)
    after = [w for w in cutter.push(gap[:15000]) if w.start_ns > int(events.t[-1])]  # (not the old tail)
    assert after and after[0].start_ns == int(gap.t[0])


def test_slot_cutter_memory_is_bounded_by_the_longest_window():
    """Hours of stream in 1-ms batches: the events held never exceed the longest window's
    (plus a batch), whatever the stream's length."""
    cutter = SlotWindowCutter(5_000_000, 5_000_000, 20_000_000, max_events=100)
    rate_per_ms, most = 200, 0
    for ms in range(3000):
        t = ms * 1_000_000 + np.arange(rate_per_ms, dtype=np.int64) * (1_000_000 // rate_per_ms)
        cutter.push(Events.from_arrays(np.zeros(rate_per_ms), np.zeros(rate_per_ms), t, np.ones(rate_per_ms)))
        most = max(most, cutter.held_events)
    assert most <= rate_per_ms * (20 + 2), most


# ----------------------------------------------------------------- the rule and the budget

def test_auto_window_shrinks_with_motion_and_grows_with_pixel_count():
    # the formula, with the bounds of the rule before issue 32 (so that each term shows)
    rule = WindowRule(events_per_pixel=0.3, max_duration_s=0.1, stride_share=1.0, min_duration_s=0.001)
    pixels, rate = 240 * 180, 1e6
    slow, fast = rule.duration_ns(pixels, 0.6, rate), rule.duration_ns(pixels, 2.4, rate)
    # the camera turns rotation_deg within a window: four times the speed, a quarter of the time
    assert fast == pytest.approx(np.deg2rad(rule.rotation_deg) / 2.4 * 1e9, rel=1e-6)
    assert slow == pytest.approx(4 * fast, rel=1e-6)
    # at a given event rate a sensor with more pixels needs more events per window: longer
    small, large = rule.duration_ns(240 * 180, 5.0, rate), rule.duration_ns(1280 * 720 // 4, 5.0, rate)
    assert large > small
    assert large == pytest.approx(rule.events_per_pixel * 1280 * 720 // 4 / rate * 1e9, rel=1e-6)
    # bounds: standing still -> the longest; unknown motion -> one output period
    assert rule.duration_ns(pixels, 0.0, rate) == int(rule.max_duration_s * 1e9)
    assert rule.duration_ns(pixels, None, None) == int(rule.output_period_s * 1e9)
    assert rule.stride_ns(int(0.005e9)) == int(0.005e9)
    assert rule.stride_ns(int(0.08e9)) == int(rule.output_period_s * 1e9)
    # the defaults' floor: however fast the camera turns, a window spans at least 20 ms (at 10 Mev/s,
    # where the events per pixel take 3 ms): 3 deg at 8 rad/s is 6.5 ms, at 2 rad/s 26 ms
    defaults = WindowRule()
    assert defaults.duration_ns(pixels, 8.0, 1e7) == int(0.02e9) == 2 * defaults.stride_ns(int(0.02e9))
    assert defaults.duration_ns(pixels, 2.0, 1e7) == round(np.deg2rad(3.0) / 2.0 * 1e9)
    # overlapping windows: a new one every stride_share of a window, at most one output period apart
    overlapping = WindowRule(stride_share=0.5)
    assert overlapping.stride_ns(int(0.01e9)) == int(0.005e9)
    assert overlapping.stride_ns(int(0.06e9)) == int(overlapping.output_period_s * 1e9)


def test_adaptive_windows_plan_the_next_window_from_the_last_estimate():
    events = dense_stream(40_000)
    windows = AdaptiveWindows(WindowRule(output_period_s=0.002, max_duration_s=0.05, events_per_pixel=0.0,
                                         min_duration_s=0.001),
                              pixels=1000, max_events=500)
    done = windows.push(events[:5000])
    assert done and all(len(w.events) <= 500 for w in done)
    windows.after_estimate(done[-1], angular_speed_rad_s=np.deg2rad(3.0) / 0.004)  # 3 deg in 4 ms
    assert windows.duration_ns == 4_000_000 and windows.stride_ns == 2_000_000
    windows.after_estimate(done[-1], angular_speed_rad_s=0.0)  # too little motion: the longest
    assert windows.duration_ns == 50_000_000
    assert windows.event_rate_hz == pytest.approx(done[-1].raw_count / 0.002, rel=1e-6)


def test_event_budget_follows_the_estimator_time_within_bounds():
    budget = EventBudget(target_s=0.012, minimum=15_000, maximum=150_000, initial=60_000)
    assert budget.update(60_000, 0.048) == 30_000          # four times too slow: half the events (damped)
    assert budget.update(30_000, 0.003) == 60_000          # four times too fast: twice
    for _ in range(20):
        budget.update(budget.events, 1.0)
    assert budget.events == 15_000                          # never below the minimum
    for _ in range(20):
        budget.update(budget.events, 1e-4)
    assert budget.events == 150_000                         # nor above the maximum
    assert budget.update(20_000, 0.001) == 150_000          # a small window that was fast says nothing


def test_auto_window_settings_are_checked():
    with pytest.raises(ValueError):
        SlotWindowCutter(0, 1, 1)
    with pytest.raises(ValueError):
        EventBudget(0.0, 1, 2, 1)


def test_first_slot_window_ends_at_its_event_count_whatever_the_batching():
    """Before the rate is known, the first window holds first_window_events events (or one
    duration, when they take longer): the same window however the stream is split."""
    events = dense_stream()
    windows = [SlotWindowCutter(50_000_000, 2_000_000, 100_000_000, first_window_events=1200).push(batch)
               for batch in (events,)][0]
    cutter = SlotWindowCutter(50_000_000, 2_000_000, 100_000_000, first_window_events=1200)
    pieces = [window for batch in split(events) for window in cutter.push(batch)]
    assert windows[0].events.equals(events[:1200]) and pieces[0].events.equals(events[:1200])
    assert all(a.events.equals(b.events) for a, b in zip(windows, pieces))
    slow = SlotWindowCutter(1_000_000, 1_000_000, 100_000_000, first_window_events=10**6).push(events)
    assert slow[0].end_ns - slow[0].start_ns == 1_000_000


def test_slot_cutter_holds_at_most_max_held_events_at_any_rate():
    cutter = SlotWindowCutter(50_000_000, 20_000_000, 100_000_000, max_events=100, max_held_events=5000)
    most = 0
    for ms in range(300):  # 20,000 events per ms: 100 ms would be 2,000,000
        t = ms * 1_000_000 + np.arange(20_000, dtype=np.int64) * 50
        windows = cutter.push(Events.from_arrays(np.zeros(20_000), np.zeros(20_000), t, np.ones(20_000)))
        most = max(most, cutter.held_events)
        assert all(len(w.events) <= 100 for w in windows)
    assert most < 5000 + 20_000, most


def test_live_budget_floor_grows_with_the_iwe_pixels():
    rule = WindowRule()
    small = AdaptiveWindows(rule, pixels=346 * 260, live=True).budget
    large = AdaptiveWindows(rule, pixels=640 * 480, live=True).budget
    assert small.minimum == rule.min_events
    assert large.minimum == int(rule.min_events_per_pixel * 640 * 480) > small.minimum
    assert AdaptiveWindows(rule, pixels=640 * 480, max_events=20_000, live=True).budget is None  # fixed: no budget


def test_live_windows_overlap_only_as_far_as_the_estimator_keeps_up():
    """Live, overlapping windows (a new one every half window) cost twice the estimates: while the
    estimator takes a whole window within budget_share of the half-window stride they overlap;
    when it is slower the stride grows (at most one output period) before any window is thinned."""
    rule = WindowRule()  # 0.7 events per pixel, 20-35 ms, a new window every half window
    pixels = 20_000
    events = dense_stream(200_000)  # about 1 event per us: 14,000 events in 14 ms, a window at least 20 ms
    for seconds_per_event, overlapping in ((1e-7, True), (1e-6, False)):
        windows = AdaptiveWindows(rule, pixels, live=True)
        done = windows.push(events[:60_000])
        for window in done[:4]:
            windows.after_estimate(window, angular_speed_rad_s=np.deg2rad(3.0) / 0.001,  # windows as short as
                                   estimator_s=seconds_per_event * len(window.events))  # the 20-ms floor lets
        duration = windows.duration_ns
        assert duration == rule.duration_ns(pixels, np.deg2rad(3.0) / 0.001, windows.event_rate_hz)
        if overlapping:  # 20,000 events take 2 ms, well within 0.6 of a 10-ms stride
            assert windows.stride_ns == rule.stride_ns(duration) == duration // 2
        else:  # 20 ms per window: more than 0.6 of the 20-ms output period even, so the stride is that
            assert windows.stride_ns == int(rule.output_period_s * 1e9) > rule.stride_ns(duration)
