"""What the angular velocity's covariance costs: the estimator's CPU per window with and without it.

The node computes the covariance (:mod:`focus_ros.estimators.covariance`, three more gradient
evaluations) only while someone subscribes to ``imu`` or ``twist``; this measures what that
choice saves. One simulated sequence (a preset, seed 0, the given sensor) is cut into windows
of a fixed number of events (30,000: the Event Camera Dataset's windows), and the same windows
are estimated in order with the node's settings (``real_time_settings()``), once with and once
without the covariance, alternating, ``--runs`` times in this one process (a fresh estimator
per pass, so each pass has the same warm starts). Printed per pass: CPU ms per window
(``time.process_time``, the estimator's own work: this process only), gradient evaluations
per window; then the median and range of the passes and the ratio within each pair (the
machine's noise hits both halves of a pair alike).

    .venv/bin/python benchmarks/bench_covariance.py                       # rotation_short, 1 s, davis240c
    .venv/bin/python benchmarks/bench_covariance.py --camera imx636 --seconds 0.3 --window-events 150000
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from focus_ros.estimators.angular_velocity import AngularVelocityEstimator, real_time_settings
from focus_ros.iwe import coarse_grid_factor
from focus_ros.sources.simulator import simulate_preset
from focus_ros.windows import count_windows


def one_pass(recording, windows, covariance: bool, binning: int) -> tuple[float, float, int]:
    """(CPU ms per window, gradient evaluations per window, published windows) for one pass."""
    estimator = AngularVelocityEstimator(recording.calibration, real_time_settings(pixel_binning=binning))
    evaluations, published = 0, 0
    start = time.process_time()
    for window in windows:
        estimate = estimator.estimate(window, covariance=covariance)
        evaluations += estimate.evaluations
        published += int(not estimate.degenerate)
    cpu_s = time.process_time() - start
    return 1e3 * cpu_s / len(windows), evaluations / len(windows), published


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--preset", default="rotation_short", help="simulator preset")
    parser.add_argument("--camera", default="davis240c", help="a sensor of focus_ros.camera.SENSORS")
    parser.add_argument("--seconds", type=float, default=1.0, help="simulated duration (s)")
    parser.add_argument("--window-events", type=int, default=30000, help="events per window")
    parser.add_argument("--runs", type=int, default=3, help="passes with and without the covariance")
    args = parser.parse_args()

    recording = simulate_preset(args.preset, duration_s=args.seconds, seed=0, camera=args.camera)
    windows = list(count_windows([recording.events], args.window_events))
    calibration = recording.calibration
    binning = coarse_grid_factor(calibration.width, calibration.height)
    print(f"{args.preset}, {args.camera} ({calibration.width}x{calibration.height}), {args.seconds:g} s: "
          f"{len(windows)} windows of {args.window_events} events, IWE bins {binning} px")
    one_pass(recording, windows[:2], True, binning)  # compile the kernels outside the timing
    rows = {True: [], False: []}
    for run in range(args.runs):
        for covariance in (True, False):
            cpu_ms, evaluations, published = one_pass(recording, windows, covariance, binning)
            rows[covariance].append(cpu_ms)
            print(f"run {run + 1}, {'with' if covariance else 'without'} covariance: {cpu_ms:.2f} CPU ms/window, "
                  f"{evaluations:.1f} evaluations/window, {published} published")
    ratios = np.array(rows[True]) / np.array(rows[False])
    for covariance in (True, False):
        values = rows[covariance]
        print(f"{'with' if covariance else 'without'} covariance: {np.median(values):.2f} "
              f"({min(values):.2f}-{max(values):.2f}) CPU ms/window")
    print(f"with / without, per run: {np.median(ratios):.2f} ({ratios.min():.2f}-{ratios.max():.2f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
