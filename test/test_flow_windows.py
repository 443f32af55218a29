"""Patch flow's windows sized by the motion (issue 24): a window reaches back over the previous
windows' events until it spans ``window_motion_px`` at the last estimate's speed
(``focus_ros.windows.RecentEvents``, ``duration_for_motion_s``), and patches too slow for their
precision (``min_motion_px``, ``min_relative_speed``) are reported IMPRECISE. Expected values come
from the scenes' true flows and the windows' geometry."""

from __future__ import annotations

import numpy as np
import pytest

from flow_scenes import translating_dots
from focus_ros.camera import Calibration
from focus_ros.estimators.optical_flow import IMPRECISE, OpticalFlowEstimator, OpticalFlowSettings
from focus_ros.events import Events
from focus_ros.windows import RecentEvents, duration_for_motion_s

#: events per chunk (a window as the node and `focus-ros flow` cut it) and its duration (s)
CHUNK_EVENTS, CHUNK_S = 30_000, 0.02


def _window(t_ns) -> Events:
    t_ns = np.asarray(t_ns, dtype=np.int64)
    return Events(np.arange(len(t_ns), dtype=np.int16) % 240, np.zeros(len(t_ns), dtype=np.int16), t_ns,
                  np.ones(len(t_ns), dtype=np.int8))


def test_recent_events_hold_the_last_windows_as_copies_and_forget_them_on_a_restart():
    recent = RecentEvents()
    windows = [_window(np.arange(10) * 100 + 1000 * k) for k in range(3)]  # [0, 900], [1000, 1900], [2000, 2900]
    for window in windows:
        recent.add(window, keep_ns=1500)
    # held back to 1500 ns before the newest event (2900): the first window (up to 900 ns) is gone
    assert recent.count == 2
    np.testing.assert_array_equal(recent.since(0).t, np.arange(1000, 3000, 100))
    np.testing.assert_array_equal(recent.since(1500).t, np.arange(1500, 3000, 100))
    windows[2].t[:] = 0  # the caller reuses its arrays: the held events are copies
    np.testing.assert_array_equal(recent.since(2000).t, np.arange(2000, 3000, 100))
    # a skipped window leaves a hole, not a reset: a focus objective needs no contiguous events
    recent.add(_window(np.arange(10) * 100 + 4000), keep_ns=3000)
    np.testing.assert_array_equal(recent.since(2500).t, np.r_[np.arange(2500, 3000, 100), np.arange(4000, 5000, 100)])
    # a window starting before the previous one's end (a bag played again): the past is forgotten
    recent.add(_window(np.arange(10) * 100), keep_ns=3000)
    assert recent.count == 1
    np.testing.assert_array_equal(recent.since(0).t, np.arange(0, 1000, 100))


def test_the_duration_for_a_motion_is_the_motion_over_the_speed():
    assert duration_for_motion_s(10.0, 200.0, 0.1) == pytest.approx(0.05)  # px at px/s
    assert duration_for_motion_s(np.deg2rad(3.0), np.deg2rad(60.0), 0.1) == pytest.approx(0.05)  # rad at rad/s
    assert duration_for_motion_s(10.0, 0.0, 0.1) == 0.1  # no motion: the longest


def _dots_chunks(velocity, chunks: int, start_s: float, seed: int) -> list[Events]:
    """Chunks of CHUNK_S each (about CHUNK_EVENTS events), dots translating at velocity px/s, from start_s on."""
    events = translating_dots(np.asarray(velocity, dtype=float), dots=1500, events=CHUNK_EVENTS * chunks,
                              duration_s=CHUNK_S * chunks, seed=seed)
    t0 = int(events.t[0])
    events = Events(events.x, events.y, events.t - t0 + int(round(start_s * 1e9)), events.p)
    bounds = np.searchsorted(events.t, np.round((start_s + CHUNK_S * np.arange(chunks + 1)) * 1e9).astype(np.int64))
    return [events[int(first):int(last)] for first, last in zip(bounds[:-1], bounds[1:])]


def test_windows_grow_for_a_slow_motion_and_shrink_for_a_fast_one():
    """window_motion_px 6: dots at 150 px/s move 3 px per 20-ms chunk, so from the second chunk on
    the window reaches back to 6 / 150 = 40 ms (two chunks); when the dots speed up to 600 px/s
    (12 px per chunk) the first fast window, sized by the slow estimate, is still 40 ms long (it
    mixes both motions), the next ones shrink until the window is one chunk once the estimate
    that sizes it is of the fast motion. Over the longer windows the slow flow's median endpoint
    error is lower than over single chunks."""
    slow, fast = np.array([120.0, -90.0]), np.array([480.0, -360.0])  # 150 and 600 px/s
    chunks = _dots_chunks(slow, 3, 0.0, seed=5) + _dots_chunks(fast, 3, 3 * CHUNK_S, seed=6)
    sized = OpticalFlowEstimator(240, 180, OpticalFlowSettings(window_motion_px=6.0, min_motion_px=0.0))
    plain = OpticalFlowEstimator(240, 180, OpticalFlowSettings(window_motion_px=0.0, min_motion_px=0.0))
    estimates = [sized.estimate(chunk) for chunk in chunks]
    singles = [plain.estimate(chunk) for chunk in chunks]
    durations = np.array([estimate.duration_s for estimate in estimates])
    assert durations[0] == pytest.approx(CHUNK_S, rel=0.01)  # no past yet
    np.testing.assert_allclose(durations[1:4], 6.0 / np.linalg.norm(slow), rtol=0.05)
    assert np.all(np.diff(durations[3:]) <= 0)
    assert durations[-1] == pytest.approx(CHUNK_S, rel=0.01)
    np.testing.assert_allclose([single.duration_s for single in singles], CHUNK_S, rtol=0.01)
    for k in (1, 2):
        longer, single = estimates[k], singles[k]
        assert longer.valid.sum() >= 0.9 * single.valid.sum() >= 100
        error_longer = np.median(np.linalg.norm(longer.flow[longer.valid] - slow, axis=1))
        error_single = np.median(np.linalg.norm(single.flow[single.valid] - slow, axis=1))
        assert error_longer < error_single
    valid = estimates[-1].valid
    assert valid.sum() >= 100
    assert np.median(np.linalg.norm(estimates[-1].flow[valid] - fast, axis=1)) < 0.05 * np.linalg.norm(fast)


def test_only_patches_slower_than_the_window_are_too_slow_for_their_precision():
    """A scene slow everywhere (dots at 150 px/s: 3 px over a 20-ms window, under min_motion_px 7)
    keeps its flows with min_relative_speed 0.7 (every patch moves about the median), and loses
    them all to IMPRECISE without it (min_relative_speed 0: the absolute bound alone)."""
    chunk = _dots_chunks([120.0, -90.0], 1, 0.0, seed=5)[0]
    relative = OpticalFlowEstimator(240, 180, OpticalFlowSettings(window_motion_px=0.0, min_motion_px=7.0,
                                                                  min_relative_speed=0.7)).estimate(chunk)
    absolute = OpticalFlowEstimator(240, 180, OpticalFlowSettings(window_motion_px=0.0, min_motion_px=7.0,
                                                                  min_relative_speed=0.0)).estimate(chunk)
    assert relative.valid.sum() >= 100 and not (relative.reason == IMPRECISE).any()
    assert absolute.valid.sum() == 0 and (absolute.reason == IMPRECISE).sum() == relative.valid.sum()


def test_on_a_rotation_the_imprecise_patches_are_the_slow_ones_near_its_fixed_point():
    """A simulated rotation in a textured room whose fixed point is in view (as eval_flow_defaults'
    `room`), windows sized by the motion: the patches reported IMPRECISE (slower than 7 px over
    their window and 0.7 of the window's median) are those whose true flow is slow: their true
    speeds are below the median of the kept ones', and the kept flows have a smaller share off by
    more than 10 % of their true speed than all flows of the same windows without the bound."""
    from focus_ros.evaluation.angular_velocity import build_windows
    from focus_ros.evaluation.flow import patch_flow_from_rotation
    from focus_ros.evaluation.ground_truth import from_imu
    from focus_ros.sources.scenes import PanoramaScene
    from focus_ros.sources.simulator import ConstantAngularVelocity, EventSimulator, Trajectory

    recording = EventSimulator(PanoramaScene.generate(1, shapes_per_megapixel=600),
                               Trajectory(ConstantAngularVelocity((0.5, -1.0, 2.0)), 0.15),
                               Calibration.davis240c(), seed=1).simulate()
    ground_truth = from_imu(recording.imu, 0)
    settings = OpticalFlowSettings(window_motion_px=10.0, min_motion_px=7.0, min_relative_speed=0.7)
    bounded = OpticalFlowEstimator(240, 180, settings)
    unbounded = OpticalFlowEstimator(240, 180, OpticalFlowSettings(window_motion_px=10.0, min_motion_px=0.0))
    events = recording.events
    kept_relative, all_relative, imprecise_speeds, kept_speeds = [], [], [], []
    for start, end in build_windows(events.t, CHUNK_EVENTS):
        window = events[int(start):int(end)]
        kept, everything = bounded.estimate(window), unbounded.estimate(window)
        truth = patch_flow_from_rotation(recording.calibration, bounded.grid, window,
                                         ground_truth.at([kept.t_ref_ns])[0])
        speed = np.linalg.norm(truth, axis=1)
        imprecise_speeds.append(speed[kept.reason == IMPRECISE])
        kept_speeds.append(speed[kept.valid])
        kept_relative.append((np.linalg.norm(kept.flow - truth, axis=1) / speed)[kept.valid])
        all_relative.append((np.linalg.norm(everything.flow - truth, axis=1) / speed)[everything.valid])
    imprecise_speeds, kept_speeds = np.concatenate(imprecise_speeds), np.concatenate(kept_speeds)
    kept_relative, all_relative = np.concatenate(kept_relative), np.concatenate(all_relative)
    assert len(imprecise_speeds) > 0 and len(kept_relative) >= 0.5 * len(all_relative)
    assert np.median(imprecise_speeds) < np.median(kept_speeds)
    assert np.mean(kept_relative > 0.1) < np.mean(all_relative > 0.1)


def test_a_window_sized_by_the_motion_can_be_thinned_to_the_cost_of_one_as_cut():
    """extended_events_factor 1: the window still spans 40 ms (6 px at 150 px/s) but holds about the
    events of one 20-ms chunk (its patches gather within 5 % of a plain chunk's events), where
    without the bound it holds about twice as many."""
    slow = np.array([120.0, -90.0])
    chunks = _dots_chunks(slow, 2, 0.0, seed=5)
    results = {}
    for factor in (0.0, 1.0):
        estimator = OpticalFlowEstimator(240, 180, OpticalFlowSettings(window_motion_px=6.0, min_motion_px=0.0,
                                                                       extended_events_factor=factor))
        results[factor] = [estimator.estimate(chunk) for chunk in chunks][-1]
    plain = OpticalFlowEstimator(240, 180, OpticalFlowSettings(window_motion_px=0.0, min_motion_px=0.0))
    single = [plain.estimate(chunk) for chunk in chunks][-1]
    for factor in (0.0, 1.0):
        assert results[factor].duration_s == pytest.approx(6.0 / np.linalg.norm(slow), rel=0.05)
    gathered = {factor: results[factor].event_counts.sum() / single.event_counts.sum() for factor in (0.0, 1.0)}
    assert gathered[1.0] == pytest.approx(1.0, abs=0.05) and gathered[0.0] == pytest.approx(2.0, abs=0.2)
    valid = results[1.0].valid
    assert valid.sum() >= 100 and np.median(np.linalg.norm(results[1.0].flow[valid] - slow, axis=1)) < 0.05 * 150
