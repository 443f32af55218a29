"""Timing a call the way every benchmark and the evaluation's timing column do."""

from __future__ import annotations

import time
from typing import Callable

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
