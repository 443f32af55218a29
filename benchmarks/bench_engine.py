"""Engine benchmark on the real boxes_rotation slice (30,000 events, 240x180, one thread).

    .venv/bin/python benchmarks/bench_engine.py

Prints Markdown tables: microseconds per value+gradient (and value only) for every loss,
and evaluations / milliseconds per window for the variance (cold start from 0, warm start
from the previous window's estimate). Medians of repeated runs; timings vary +-30 %.
"""

from __future__ import annotations

import os

os.environ.setdefault("NUMBA_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from focus_ros.camera import Calibration  # noqa: E402
from focus_ros.estimators.angular_velocity import AngularVelocityEstimator, AngularVelocitySettings  # noqa: E402
from focus_ros.events import Events  # noqa: E402
from focus_ros.losses import LOSSES, get_loss  # noqa: E402
from focus_ros.objective import Objective  # noqa: E402

SLICE = Path(os.environ.get("FOCUS_ROS_SHARED_DATA", ROOT.parent / "shared" / "data")) / "ec_slices" / "boxes_rotation"
OMEGA = np.array([3.576, 3.945, -1.754])


def median_us(function, repeats: int = 15) -> float:
    function()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return float(np.median(times)) * 1e6


def main() -> None:
    table = np.loadtxt(SLICE / "events.txt")
    events = Events.from_arrays(table[:, 1], table[:, 2], np.round(table[:, 0] * 1e9).astype(np.int64), table[:, 3])
    calibration = Calibration.from_ecd_calib(SLICE / "calib.txt")
    print(f"# Engine benchmark: {len(events)} events, boxes_rotation, one thread\n")
    print("| loss | polarity | value+gradient µs (bilinear, exact) | value only µs | value+gradient µs (Gaussian σ=1) |")
    print("|---|---|---|---|---|")
    for name in LOSSES:
        loss = get_loss(name)
        polarity = "with" in loss.polarity_modes and (loss.degenerate_without_polarity or "without" not in loss.polarity_modes)
        row = []
        for kernel in ("bilinear", "gaussian"):
            objective = Objective(calibration, loss, kernel=kernel, use_polarity=polarity)
            objective.set_events(events, int(events.t[0]))
            row.append(median_us(lambda: objective.evaluate(OMEGA)))
            if kernel == "bilinear":
                row.append(median_us(lambda: objective.evaluate(OMEGA, with_gradient=False)))
        print(f"| {name} | {'with' if polarity else 'without'} | {row[0]:.0f} | {row[1]:.0f} | {row[2]:.0f} |")

    objective = Objective(calibration, get_loss("variance"), warp="small_angle")
    objective.set_events(events, int(events.t[0]))
    small = median_us(lambda: objective.evaluate(OMEGA))
    print(f"\nvariance, small-angle warp, bilinear: value+gradient {small:.0f} µs\n")

    print("| optimizer | start | evaluations | iterations | ms per window |")
    print("|---|---|---|---|---|")
    for optimizer in ("cg", "lbfgs"):
        estimator = AngularVelocityEstimator(calibration, AngularVelocitySettings(
            loss="variance", t_ref="start", optimizer=optimizer))
        estimator.estimate(events, initial=np.zeros(3))  # compile
        for label, initial in (("cold (0)", np.zeros(3)), ("warm (previous estimate)", None)):
            results = []
            times = []
            for _ in range(5):
                estimator.reset()
                first = estimator.estimate(events, initial=np.zeros(3))
                start = time.perf_counter()
                result = estimator.estimate(events, initial=initial if initial is not None else first.angular_velocity)
                times.append(time.perf_counter() - start)
                results.append(result)
            print(f"| {optimizer} | {label} | {results[-1].evaluations} | {results[-1].iterations} | "
                  f"{np.median(times) * 1e3:.1f} |")


if __name__ == "__main__":
    main()
