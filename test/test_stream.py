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
    """Inside a message, events out of order are sorted (none lost); across messages, what goes
    back by less than jump_back_s is dropped, more restarts the stream."""
    guard = StreamGuard(240, 180, jump_back_s=0.5)
    guard.check(batch([1_000_000_000, 1_000_000_100]))
    result = guard.check(batch([1_000_000_050, 1_000_000_200, 1_000_000_150, 1_000_000_300]))
    # sorted: 050 150 200 300; only 050 lies before the previous message's last event (100)
    assert list(result.events.t) == [1_000_000_150, 1_000_000_200, 1_000_000_300]
    assert guard.counts["out_of_order_events"] == 1 and guard.counts["unsorted_messages"] == 1
    assert [kind for kind, _ in result.problems] == ["unsorted", "out_of_order"] and not result.restart
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


def reference_check(state, events, width, height, gap_s, jump_back_ns):
    """The guard's rules written out with numpy, batch by batch: (events, problem kinds,
    restart); state: {"last": last accepted time or None}."""
    kinds = []
    if np.any(np.diff(events.t) < 0):
        kinds.append("unsorted")
        events = events[sorted(range(len(events)), key=lambda k: events.t[k])]  # Python's sort is stable
    inside = (events.x < width) & (events.y < height)
    kinds += ["out_of_range"] if not inside.all() else []
    events = events[inside]
    if len(events) == 0:
        return events, kinds, False
    t, last, restart = events.t, state["last"], False
    if last is not None:
        if t[0] < last - jump_back_ns:
            restart, kinds = True, kinds + ["jump_back"]
        elif gap_s is not None and t[0] - last > gap_s * 1e9:
            restart, kinds = True, kinds + ["gap"]
    previous = -2**62 if (last is None or restart) else last
    in_order = t >= np.maximum.accumulate(np.concatenate(([previous], t)))[:-1]
    if not in_order.all():
        kinds.append("out_of_order")
    events = events[in_order]
    if len(events):
        state["last"] = int(events.t[-1])
    return events, kinds, restart


def test_guard_matches_its_rules_written_out_on_random_faulty_batches():
    """Out-of-range pixels, reordering, jumps back and gaps at random, 300 batches: the
    guard keeps exactly the events, reports exactly the kinds and restarts the reference does."""
    rng = np.random.default_rng(3)
    guard = StreamGuard(240, 180, gap_s=0.05, jump_back_s=0.01)
    state = {"last": None}
    clock = 10_000_000_000
    faults = {"unsorted": 0, "out_of_range": 0, "out_of_order": 0, "jump_back": 0, "gap": 0}
    for _ in range(300):
        n = int(rng.integers(1, 60))
        clock += int(rng.choice([1_000_000, 1_000_000, 1_000_000, -30_000_000, 80_000_000]))
        t = clock + np.sort(rng.integers(0, 1_000_000, n))
        if rng.random() < 0.3:  # a few events going back
            t = t - rng.integers(0, 2, n) * rng.integers(0, 2_000_000, n)
        x = np.where(rng.random(n) < 0.05, 240 + rng.integers(0, 10, n), rng.integers(0, 240, n))
        y = np.where(rng.random(n) < 0.05, 180, rng.integers(0, 180, n))
        events = batch(t, x, y)
        expected, kinds, restart = reference_check(state, events, 240, 180, 0.05, 10_000_000)
        result = guard.check(events)
        assert result.events.equals(expected)
        assert [kind for kind, _ in result.problems] == kinds and result.restart == restart
        for kind in kinds:
            faults[kind] += 1
    assert all(count > 5 for count in faults.values()), faults  # every rule was exercised


def test_a_shuffled_message_is_sorted_whole_and_counted_once():
    """A message whose events come in random order (a driver merging readout lanes, a
    shuffled bag) keeps every event, in time order, with equal timestamps in arrival order;
    the next in-order message passes untouched."""
    rng = np.random.default_rng(5)
    t = 2_000_000_000 + np.repeat(np.arange(500, dtype=np.int64) * 1000, 2)  # pairs of equal times
    x = np.arange(1000) % 240
    order = rng.permutation(1000)
    guard = StreamGuard(240, 180)
    result = guard.check(batch(t[order], x[order]))
    assert len(result.events) == 1000 and np.all(np.diff(result.events.t) >= 0)
    # equal times keep their arrival order: for each pair, the one that came first stays first
    arrival = np.argsort(order)  # position in the message of original event k
    for k in range(0, 1000, 2):
        first, second = sorted((k, k + 1), key=lambda j: arrival[j])
        index = np.flatnonzero(result.events.t == t[k])
        assert list(result.events.x[index]) == [x[first], x[second]]
    assert guard.counts["unsorted_messages"] == 1 and guard.counts["out_of_order_events"] == 0
    after = guard.check(batch(t[-1] + np.arange(1, 4)))
    assert len(after.events) == 3 and not after.problems and guard.counts["unsorted_messages"] == 1


def test_events_the_decoder_dropped_outside_the_sensor_are_counted_with_the_guards():
    """dropped_outside (events a dvs_msgs message declared outside its size, dropped by the
    decoder) adds to out_of_range_events; a message left empty by it is not an empty message."""
    guard = StreamGuard(240, 180)
    result = guard.check(batch([1, 2]), 240, 180, dropped_outside=3)
    assert list(result.events.t) == [1, 2] and [kind for kind, _ in result.problems] == ["out_of_range"]
    nothing_left = guard.check(Events.empty(), 240, 180, dropped_outside=2)
    assert len(nothing_left.events) == 0
    assert guard.counts["out_of_range_events"] == 5 and guard.counts["empty_messages"] == 0
