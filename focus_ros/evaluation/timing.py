"""Timing the way every benchmark and the evaluation's timing column do: a call's wall time, and
how much of a stream's event time a live estimator's outputs cover."""

from __future__ import annotations

import time
from typing import Callable, Iterable

import numpy as np


def median_microseconds(function: Callable[[], object], repeats: int, warmup: int = 1) -> float:
    """Median wall time of ``function()`` in µs over ``repeats`` calls, after ``warmup``
    untimed calls (Numba compilation, caches)."""
    for _ in range(warmup):
        function()
    samples = []
    for _ in range(repeats):
        started = time.perf_counter()
        function()
        samples.append(time.perf_counter() - started)
    return float(np.median(samples)) * 1e6


def covered_share(stamps_ns: Iterable[int], first_ns: int, last_ns: int, period_ns: int) -> float:
    """Share of the event time [first_ns, last_ns] (ns) within half a period of an estimate's
    stamp: 1.0 when estimates come at least every ``period_ns`` throughout, and each window a live
    node skips leaves a hole of about one stride. Unlike counting fixed slots of ``period_ns`` that
    hold a stamp, it does not depend on where the stamps fall against the slots' edges: estimates
    exactly one period apart whose stamps sit on the edges (window centres on a lattice from the
    first event) fill or miss slots by a microsecond's jitter, and an empty slot there is no
    estimate lost."""
    if last_ns <= first_ns or period_ns <= 0:
        raise ValueError(f"covered_share needs first_ns < last_ns and a positive period, got "
                         f"[{first_ns}, {last_ns}] and {period_ns} ns")
    half = period_ns / 2
    covered, reached = 0.0, float(first_ns)
    for stamp in sorted(int(t) for t in stamps_ns):
        start, end = max(stamp - half, reached), min(stamp + half, last_ns)
        if end > start:
            covered += end - start
            reached = end
    return covered / (last_ns - first_ns)
