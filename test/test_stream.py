"""StreamGuard: what a live stream's bad input becomes."""

import numpy as np

from focus_ros.events import Events
from focus_ros.stream import StreamGuard


def batch(t_ns, x=None, y=None):
    n = len(t_ns)
    x = np.full(n, 10) if x is None else x
    y = np.full(n, 20) if y is None else y
    return Events.from_arrays(x, y, np.asarray(t_ns, dtype=np.int64), np.ones(n))


def test_good_batches_pass_untouched():
    guard = StreamGuard(240, 180)
    first = guard.check(batch([1, 2, 3]), 240, 180)
    second = guard.check(batch([3, 4, 5]), 240, 180)
    assert first.events.equals(batch([1, 2, 3])) and second.events.equals(batch([3, 4, 5]))
    assert not first.problems and not second.problems and not second.restart


def test_out_of_range_coordinates_are_dropped_and_counted():
    guard = StreamGuard(240, 180)
    result = guard.check(batch([1, 2, 3, 4], x=np.array([0, 240, 239, 5]), y=np.array([0, 0, 180, 179])))
    assert list(result.events.t) == [1, 4]
    assert [kind for kind, _ in result.problems] == ["out_of_range"]
    assert guard.counts["out_of_range_events"] == 2


def test_size_mismatch_drops_message():
    guard = StreamGuard(240, 180)
    result = guard.check(batch([1, 2]), 346, 260)
    assert len(result.events) == 0 and result.problems[0][0] == "size_mismatch"
    assert "346x260" in result.problems[0][1] and "240x180" in result.problems[0][1]


def test_empty_message_reported():
    result = StreamGuard(240, 180).check(Events.empty())
    assert result.problems[0][0] == "empty"


def test_small_reordering_dropped_large_jump_back_restarts():
    guard = StreamGuard(240, 180, jump_back_s=0.5)
    guard.check(batch([1_000_000_000, 1_000_000_100]))
    result = guard.check(batch([1_000_000_050, 1_000_000_200, 1_000_000_150, 1_000_000_300]))
    assert list(result.events.t) == [1_000_000_200, 1_000_000_300]
    assert guard.counts["out_of_order_events"] == 2 and not result.restart
    restarted = guard.check(batch([10, 20]))
    assert restarted.restart and list(restarted.events.t) == [10, 20]
    assert restarted.problems[0][0] == "jump_back"


def test_gap_restarts_only_when_configured():
    without_gap = StreamGuard(240, 180, gap_s=None)
    without_gap.check(batch([0]))
    assert not without_gap.check(batch([5_000_000_000])).restart
    with_gap = StreamGuard(240, 180, gap_s=0.1)
    with_gap.check(batch([0]))
    assert not with_gap.check(batch([50_000_000])).restart
    gap = with_gap.check(batch([200_000_000]))
    assert gap.restart and gap.problems[0][0] == "gap"
