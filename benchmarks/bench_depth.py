"""Depth engine benchmark: DSI votes per second, time per keyframe, focus-curve stage per loss.

    .venv/bin/python benchmarks/bench_depth.py [--repeats 5] [--events 1000000]

One thread (NUMBA_NUM_THREADS=1, OPENBLAS_NUM_THREADS=1). Data: a fronto-parallel textured
plane at 1 m seen by a DAVIS240C (240x180, the dataset's distortion) moving along x at
0.25 m/s for 3 s (slider_depth's motion: 0.75 m of baseline), made from geometry by
focus_ros.depth.synthetic; one keyframe of all the events, reference at the middle,
100 planes over 0.45-2.4 m (the defaults). Prints Markdown tables: median and range of
wall and CPU (process) time over the repeats, and the load average, because the machine
is shared: compare within one run.
"""

from __future__ import annotations

import os

os.environ.setdefault("NUMBA_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from focus_ros.camera import Calibration  # noqa: E402
from focus_ros.depth.dsi import plane_depths_m  # noqa: E402
from focus_ros.depth.focus import MAX_VOTE, PATCH_LOSSES  # noqa: E402
from focus_ros.depth.synthetic import plane_events  # noqa: E402
from focus_ros.estimators.depth import DepthEstimator, DepthSettings  # noqa: E402


def timed(function, repeats: int):
    """(result of the last call, wall seconds list, CPU seconds list) after one warm-up call."""
    result = function()
    walls, cpus = [], []
    for _ in range(repeats):
        wall, cpu = time.perf_counter(), time.process_time()
        result = function()
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    return result, walls, cpus


def spread(values, scale=1.0, digits=0) -> str:
    values = np.asarray(values) * scale
    return f"{np.median(values):.{digits}f} ({values.min():.{digits}f}–{values.max():.{digits}f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--loss-repeats", type=int, default=3)
    args = parser.parse_args()

    calibration = Calibration.davis240c()
    scene = plane_events(calibration, depth_m=1.0, event_count=args.events, duration_s=3.0, speed_m_s=0.25)
    events = len(scene.events)
    settings = DepthSettings()
    estimator = DepthEstimator(calibration, settings)
    print(f"load average at start: {os.getloadavg()[0]:.1f} (2 cores); {events} events in view, "
          f"{settings.planes} planes, {calibration.width}x{calibration.height}, DSI {estimator.dsi.nbytes / 2**20:.1f} MB\n")

    dsi, walls, cpus = timed(lambda: estimator.build_dsi(scene.events, scene.trajectory), args.repeats)
    event_planes = events * settings.planes
    print("| DSI build (1 thread) | wall | CPU |")
    print("|---|---|---|")
    print(f"| time, ms | {spread(walls, 1e3)} | {spread(cpus, 1e3)} |")
    print(f"| events × planes / s, M | {spread(event_planes / np.array(walls), 1e-6)} | "
          f"{spread(event_planes / np.array(cpus), 1e-6)} |")
    print(f"| votes cast inside the image / s, M ({dsi.vote_count / 1e6:.1f} M votes) | "
          f"{spread(dsi.vote_count / np.array(walls), 1e-6)} | {spread(dsi.vote_count / np.array(cpus), 1e-6)} |")
    print(f"\npose-batch error bound: {dsi.pose_batch_error_px:.3f} px (1024 events per pose); "
          f"parallax {dsi.parallax_px():.1f} px\n")

    keyframe, walls, cpus = timed(lambda: estimator.estimate(scene.events, scene.trajectory), args.repeats)
    error = np.abs(keyframe.depth_m[keyframe.mask] - 1.0)
    print(f"| keyframe end to end ({settings.loss}) | wall | CPU |")
    print("|---|---|---|")
    print(f"| ms per keyframe | {spread(walls, 1e3)} | {spread(cpus, 1e3)} |")
    stages = ", ".join(f"{name} {1e3 * value:.0f}" for name, value in keyframe.timing_s.items())
    print(f"\nlast run's stages (ms): {stages}; {keyframe.point_count} points, median |error| "
          f"{1e3 * np.median(error):.2f} mm at 1 m\n")

    print("| focus-curve stage | ms wall | ms CPU | points | median rel. error | within 5 % |")
    print("|---|---|---|---|---|---|")
    for name in PATCH_LOSSES + (MAX_VOTE,):
        polarity = name == "mean_absolute_value" or name == "local_mean_absolute_value"
        if polarity:
            dsi = estimator.build_dsi(scene.events, scene.trajectory, use_polarity=True)
        elif dsi.polarity:
            dsi = estimator.build_dsi(scene.events, scene.trajectory)
        method = MAX_VOTE if name == MAX_VOTE else "focus"
        loss = None if name == MAX_VOTE else name
        _, walls, cpus = timed(lambda: estimator.focus_scores(dsi, method, loss), args.loss_repeats)
        keyframe = estimator.depth_from_dsi(dsi, method, loss)
        error = np.abs(keyframe.depth_m[keyframe.mask] - 1.0)
        label = name + (" (polarity)" if polarity else "")
        print(f"| {label} | {spread(walls, 1e3)} | {spread(cpus, 1e3)} | {keyframe.point_count} | "
              f"{100 * np.median(error):.2f} % | {100 * np.mean(error < 0.05):.1f} % |")

    print("\n| sensor | DSI of 100 planes |")
    print("|---|---|")
    for width, height in ((240, 180), (346, 260), (640, 480), (1280, 720)):
        print(f"| {width}x{height} | {width * height * 100 * 4 / 2**20:.0f} MiB |")
    print(f"\nload average at end: {os.getloadavg()[0]:.1f}")
    assert len(plane_depths_m(settings.z_min_m, settings.z_max_m, settings.planes)) == settings.planes


if __name__ == "__main__":
    main()
