"""StreamGuard.check on a 30,000-event message: in order, nearly sorted (one swap), shuffled.

Run: .venv/bin/python benchmarks/bench_stream_guard.py (µs per check, median and range of 7 runs of 50)."""
import time
import numpy as np
from focus_ros.events import Events
from focus_ros.stream import StreamGuard, _first_descent

rng = np.random.default_rng(0)
n = 30000
t = 10**9 + np.arange(n, dtype=np.int64) * 1000
base = Events.from_arrays(rng.integers(0, 240, n), rng.integers(0, 180, n), t, rng.integers(0, 2, n) * 2 - 1)
swap = np.arange(n); swap[[n // 2, n // 2 + 1]] = swap[[n // 2 + 1, n // 2]]
cases = {"in order": base, "one swap": base[swap], "shuffled": base[rng.permutation(n)]}
_first_descent(t)
for name, events in cases.items():
    runs = []
    for run in range(7):
        guard = StreamGuard(240, 180)
        start = time.perf_counter()
        for _ in range(50):
            guard.last_t_ns = None
            guard.check(events)
        runs.append((time.perf_counter() - start) / 50 * 1e6)
    check = []
    for run in range(7):
        start = time.perf_counter()
        for _ in range(200):
            _first_descent(events.t)
        check.append((time.perf_counter() - start) / 200 * 1e6)
    print(f"{name:9s} check {np.median(runs):7.1f} us (range {min(runs):.1f}-{max(runs):.1f}); "
          f"monotonic test alone {np.median(check):5.1f} us")
