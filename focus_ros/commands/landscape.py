"""Plot focus-loss landscapes of one window: 1-D slices through the optimum and a 2-D grid, normalised to [0, 1].

Like the paper's loss-landscape figures: each loss's focus score (higher is sharper) along
ω_x, ω_y, ω_z around a centre, and over a plane of two of them. The centre is the ground
truth at the window's reference time when the sequence has one, else the variance
estimate, or --omega. Writes OUTPUT/slices_<polarity>.png, OUTPUT/grid_<plane>_<polarity>.png
and OUTPUT/landscape.csv (per loss: the offset of each slice's maximum, deg/s).
"""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path

import numpy as np

from focus_ros.cli import UserError
from focus_ros.commands.evaluate import _ground_truth, _losses, add_source_arguments, load_source


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_source_arguments(parser)
    parser.add_argument("-o", "--output", required=True, type=Path, help="output folder")
    parser.add_argument("--losses", default="all", help="'all' (default) or comma-separated loss names")
    parser.add_argument("--polarity", choices=("with", "without", "both"), default="without")
    parser.add_argument("--window-events", type=int, default=30_000, help="events per window (default 30000)")
    parser.add_argument("--window-index", type=int, default=None,
                        help="which window of the sequence (default: the middle one)")
    parser.add_argument("--t-ref", choices=("start", "middle", "end"), default="middle")
    parser.add_argument("--omega", type=float, nargs=3, metavar=("WX", "WY", "WZ"),
                        help="centre ω (rad/s) instead of the ground truth / variance estimate")
    parser.add_argument("--ground-truth", choices=("auto", "imu", "mocap", "none"), default="auto")
    parser.add_argument("--imu-delay", type=float, metavar="MS", default=None,
                        help="gyro delay (ms): default 2.4 for recorded data, 0 for the simulator")
    parser.add_argument("--span", type=float, default=60.0, metavar="DEG_S",
                        help="half-width of the slices and grid (deg/s, default 60)")
    parser.add_argument("--steps", type=int, default=61, help="samples per 1-D slice (default 61)")
    parser.add_argument("--grid-steps", type=int, default=25, help="samples per grid side (default 25)")
    parser.add_argument("--plane", choices=("xy", "xz", "yz"), default="xy", help="2-D grid plane")


def _window(events, window_events: int, index: int | None):
    from focus_ros.evaluation.runner import EVENT_FIELDS, build_windows
    from focus_ros.events import Events

    windows = build_windows(events.t, window_events)
    if len(windows) == 0:
        raise UserError(f"the sequence has {len(events)} events, fewer than one window of {window_events}")
    index = len(windows) // 2 if index is None else index
    if not 0 <= index < len(windows):
        raise UserError(f"--window-index {index} outside the {len(windows)} windows of the sequence")
    start, end = windows[index]
    return index, Events(*(np.array(getattr(events, name)[start:end]) for name in EVENT_FIELDS))


def run(args) -> int:
    from focus_ros.estimators.angular_velocity import (AngularVelocityEstimator, AngularVelocitySettings,
                                                        reference_time_ns)
    from focus_ros.evaluation import landscape, plots
    from focus_ros.evaluation.runner import plan_jobs

    for flag, value, low in (("--steps", args.steps, 3), ("--grid-steps", args.grid_steps, 3)):
        if value < low:
            raise UserError(f"{flag} must be at least {low}, got {value}")
    if not args.span > 0:
        raise UserError(f"--span must be positive (deg/s), got {args.span}")
    modes = ("without", "with") if args.polarity == "both" else (args.polarity,)
    jobs = [job for job in plan_jobs(_losses(args.losses), modes) if job.status == "ok"]
    recording, simulated, description = load_source(args)
    index, window = _window(recording.events, args.window_events, args.window_index)
    t_ref_ns = reference_time_ns(window, args.t_ref)
    ground_truth = _ground_truth(args, recording, simulated)
    truth = ground_truth.at([t_ref_ns])[0] if ground_truth is not None else np.full(3, np.nan)
    if args.omega is not None:
        center, center_name = np.asarray(args.omega, dtype=np.float64), "given ω"
    elif np.all(np.isfinite(truth)):
        center, center_name = truth, f"ground truth ({ground_truth.source})"
    else:
        estimator = AngularVelocityEstimator(recording.calibration, AngularVelocitySettings(t_ref=args.t_ref))
        center, center_name = estimator.estimate(window).angular_velocity, "variance estimate"
        if not np.all(np.isfinite(center)):
            raise UserError("no centre: the sequence has no ground truth and the variance estimate failed; give --omega")
    span = np.deg2rad(args.span)
    offsets = np.linspace(-span, span, args.steps)
    grid_offsets = np.linspace(-span, span, args.grid_steps)
    marker = np.rad2deg(truth - center) if np.all(np.isfinite(truth)) else np.zeros(3)
    output = args.output
    output.mkdir(parents=True, exist_ok=True)
    rows = []
    first, second = landscape.PLANES[args.plane]
    for mode in modes:
        slices, grids = {}, {}
        for job in (job for job in jobs if job.polarity == mode):
            objective, sign = landscape.window_objective(recording.calibration, job.loss, mode == "with", window,
                                                         args.t_ref)
            scores = landscape.slice_scores(objective, sign, center, offsets)
            slices[job.loss] = np.stack([landscape.normalize(row) for row in scores])
            grids[job.loss] = landscape.normalize(landscape.grid_scores(objective, sign, center, args.plane,
                                                                        grid_offsets, grid_offsets))
            peak = np.rad2deg(landscape.argmax_offsets(offsets, scores))
            rows.append([job.loss, mode, *(f"{v:.3f}" for v in peak)])
        if not slices:
            continue
        title = f"{description}, window {index} ({mode} polarity), centre: {center_name}"
        plots.plot_landscape_slices(np.rad2deg(offsets), slices, output / f"slices_{mode}.png",
                                    marker=marker, title=title)
        plots.plot_landscape_grid(np.rad2deg(grid_offsets), np.rad2deg(grid_offsets), grids,
                                  output / f"grid_{args.plane}_{mode}.png",
                                  labels=(f"ω_{'xyz'[first]}", f"ω_{'xyz'[second]}"),
                                  marker=(marker[first], marker[second]))
    with open(output / "landscape.csv", "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["loss", "polarity", "peak_offset_x", "peak_offset_y", "peak_offset_z"])
        writer.writerows(rows)
    print(f"centre ω = ({', '.join(f'{v:.3f}' for v in center)}) rad/s ({center_name}); "
          f"wrote {len(rows)} landscapes to {output}", file=sys.stderr)
    return 0
