"""Accuracy of angular velocity estimation on each sensor focus_ros has presets for, offline,
with the node's defaults (auto windows, IWE binning, withheld estimates): the tables of
EVALUATION.md, "Sensors".

- Sequences: the simulated rotation of benchmarks/bench_sensors.py for each sensor
  (``focus_ros.camera.SENSORS``: size, typical intrinsics, distortion; textured panorama;
  oscillation at a constant amplitude, the peak per sensor below), the first ``--seconds``
  of it, cached in ``--cache``.
- Windows: :class:`focus_ros.windows.AdaptiveWindows` with the default :class:`WindowRule`,
  each thinned to ``--max-events`` (the node's compute budget lies between
  WindowRule.min_events and .max_events; offline it is fixed), planned from the previous
  estimate as in the node; the estimator the node's (``real_time_settings``) with the IWE
  binned as the node chooses (``coarse_grid_factor``), the loss changed.
- Table 1 (``--losses``, default every loss of the paper's Table 1 that runs without polarity,
  with polarity where it needs it): per loss, the RMS error (deg/s, pooled over the axes,
  and % of the peak) of the published estimates after the first 0.05 s (the cold start),
  the windows withheld, the median estimator time per window (ms, this process, one core).
- Table 2 (``--grid``): the variance loss at every bin size (1, 2, 3 px) and event budget
  (30,000, 60,000, 150,000): is a coarser grid as accurate, and how much cheaper.

    .venv/bin/python benchmarks/eval_sensors.py --grid                     # table 2, every sensor
    .venv/bin/python benchmarks/eval_sensors.py --losses variance gradient_magnitude --sensors imx636
    .venv/bin/python benchmarks/eval_sensors.py                            # table 1, every loss and sensor

Times are of a shared machine unless stated: compare within one table.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_sensors import RUNS, SensorRun, cached_sequence  # noqa: E402

#: the DAVIS240C beside the bench's three (its rate at this peak is far below its limits)
SEQUENCES = {"davis240c": SensorRun("davis240c", 200.0, 2.0, 0.0, 20.0, 2.5), **RUNS}
COLD_S = 0.05


def evaluate(recording, peak_deg_s: float, seconds: float, loss: str, polarity: bool, binning: int | None,
             max_events: int) -> dict:
    """One loss / grid / budget on the first ``seconds`` of a sequence."""
    from focus_ros.estimators.angular_velocity import (AngularVelocityEstimator, planning_speed_rad_s,
                                                       real_time_settings)
    from focus_ros.evaluation.metrics import error_statistics
    from focus_ros.iwe import coarse_grid_factor
    from focus_ros.windows import AdaptiveWindows, WindowRule

    calibration = recording.calibration
    events = recording.events
    events = events[events.t < int(events.t[0]) + int(seconds * 1e9)]
    binning = binning or coarse_grid_factor(calibration.width, calibration.height)
    estimator = AngularVelocityEstimator(calibration, real_time_settings(loss=loss, use_polarity=polarity,
                                                                         pixel_binning=binning))
    grid = estimator.grid_calibration
    windows = AdaptiveWindows(WindowRule(), grid.width * grid.height, max_events)
    stamps, omegas, times, withheld, durations = [], [], [], 0, []
    for window in windows.cut(events):
        started = time.perf_counter()
        estimate = estimator.estimate(window.events)
        times.append(time.perf_counter() - started)
        durations.append((window.end_ns - window.start_ns) * 1e-6)
        windows.after_estimate(window, planning_speed_rad_s(estimate))
        if window.start_ns < int(events.t[0]) + COLD_S * 1e9:
            continue
        if estimate.degenerate:
            withheld += 1
        else:
            stamps.append(estimate.t_ref_ns)
            omegas.append(estimate.angular_velocity)
    gyro = recording.imu
    truth = np.stack([np.interp(stamps, gyro.t, gyro.angular_velocity[:, axis]) for axis in range(3)], axis=1)
    stats = error_statistics(np.array(omegas), truth, peak_deg_s) if omegas else None
    return dict(rms=stats.rms if stats else float("nan"), percent=stats.rms_percent_of_peak if stats else float("nan"),
                published=len(omegas), withheld=withheld, ms=1e3 * statistics.median(times[1:] or times),
                window_ms=statistics.median(durations), binning=binning, max_events=max_events)


def losses_table(sensor: str, run: SensorRun, recording, seconds: float, losses, max_events: int) -> None:
    from focus_ros.losses import LOSSES

    model = recording.calibration
    rate = len(recording.events) / recording.events.duration_s / 1e6
    print(f"\n#### {sensor} ({model.width}x{model.height}, fx {model.lens.fx:g} px), rotation up to {run.peak_deg_s:g} "
          f"deg/s per axis, {rate:.1f} Mev/s, first {seconds:g} s; node defaults, windows thinned to {max_events}\n")
    print("| loss | polarity | RMS deg/s | % of peak | published | withheld | window ms | IWE bins | ms/window |\n"
          "|---|---|---:|---:|---:|---:|---:|---:|---:|", flush=True)
    for loss in losses:
        polarity = "without" not in LOSSES[loss].polarity_modes
        result = evaluate(recording, run.peak_deg_s, seconds, loss, polarity, None, max_events)
        print(f"| {loss} | {'with' if polarity else 'without'} | {result['rms']:.2f} | {result['percent']:.2f} | "
              f"{result['published']} | {result['withheld']} | {result['window_ms']:.1f} | {result['binning']} | "
              f"{result['ms']:.1f} |", flush=True)


def grid_table(sensor: str, run: SensorRun, recording, seconds: float) -> None:
    model = recording.calibration
    print(f"\n#### {sensor} ({model.width}x{model.height}): IWE bin size and event budget, variance loss, "
          f"first {seconds:g} s\n")
    print("| bins (px) | events per window at most | RMS deg/s | % of peak | withheld | ms/window |\n"
          "|---:|---:|---:|---:|---:|---:|", flush=True)
    for binning in (1, 2, 3):
        for max_events in (30_000, 60_000, 150_000):
            result = evaluate(recording, run.peak_deg_s, seconds, "variance", False, binning, max_events)
            print(f"| {binning} | {max_events} | {result['rms']:.2f} | {result['percent']:.2f} | "
                  f"{result['withheld']} | {result['ms']:.1f} |", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sensors", nargs="*", default=list(SEQUENCES), choices=list(SEQUENCES))
    parser.add_argument("--losses", nargs="*", default=None, help="default: every loss")
    parser.add_argument("--grid", action="store_true", help="table 2 (bin size x event budget) instead of table 1")
    parser.add_argument("--seconds", type=float, default=0.5, help="length of each sequence used (s)")
    parser.add_argument("--max-events", type=int, default=60_000, help="table 1: events per window at most")
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "focus_ros_bench_sensors",
                        help="where the simulated sequences are kept (shared with bench_sensors.py)")
    args = parser.parse_args()
    from focus_ros.losses import LOSSES

    losses = args.losses or [name for name in LOSSES]
    for sensor in args.sensors:
        run = SEQUENCES[sensor]
        recording = cached_sequence(run, args.cache)
        if args.grid:
            grid_table(sensor, run, recording, args.seconds)
        else:
            losses_table(sensor, run, recording, args.seconds, losses, args.max_events)
    return 0


if __name__ == "__main__":
    sys.exit(main())
