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
from focus_ros.cli._options import add_estimator_arguments
from focus_ros.cli._sources import add_source_arguments, angular_velocity_ground_truth, load_source, loss_names
from focus_ros.estimators.angular_velocity import AngularVelocitySettings


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_source_arguments(parser)
    parser.add_argument("-o", "--output", required=True, type=Path, help="output folder")
    parser.add_argument("--losses", default="all", help="'all' (default) or comma-separated loss names")
    parser.add_argument("--polarity", choices=("with", "without", "both"), default="without")
    parser.add_argument("--window-events", type=int, default=30_000, help="events per window (default 30000)")
    parser.add_argument("--window-index", type=int, default=None,
                        help="which window of the sequence (default: the middle one)")
    add_estimator_arguments(parser, AngularVelocitySettings(), included=("t_ref",))
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
    flow = parser.add_argument_group("patch optical flow (the paper's Fig. 6)")
    flow.add_argument("--flow", action="store_true",
                      help="landscape over the flow (vx, vy) of one patch instead of ω; losses default to Fig. 6's")
    flow.add_argument("--patch", type=int, nargs=2, metavar=("X", "Y"),
                      help="a pixel of the patch (default: the patch with the most events)")
    flow.add_argument("--patch-size", type=int, default=15, help="patch side (px, default 15)")
    flow.add_argument("--flow-span", type=float, default=200.0, metavar="PX_S",
                      help="half-width of the (vx, vy) grid around the centre (px/s, default 200)")


def _window(events, window_events: int, index: int | None):
    from focus_ros.evaluation.angular_velocity import EVENT_FIELDS, build_windows
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
    if args.flow:
        return _run_flow(args)
    from focus_ros.estimators.angular_velocity import (AngularVelocityEstimator, AngularVelocitySettings,
                                                        reference_time_ns)
    from focus_ros.evaluation import landscape, plots
    from focus_ros.evaluation.angular_velocity import plan_jobs

    for flag, value, low in (("--steps", args.steps, 3), ("--grid-steps", args.grid_steps, 3)):
        if value < low:
            raise UserError(f"{flag} must be at least {low}, got {value}")
    if not args.span > 0:
        raise UserError(f"--span must be positive (deg/s), got {args.span}")
    modes = ("without", "with") if args.polarity == "both" else (args.polarity,)
    jobs = [job for job in plan_jobs(loss_names(args.losses), modes) if job.status == "ok"]
    recording, simulated, description = load_source(args)
    index, window = _window(recording.events, args.window_events, args.window_index)
    t_ref_ns = reference_time_ns(window, args.t_ref)
    ground_truth = angular_velocity_ground_truth(args, recording, simulated)
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


def _run_flow(args) -> int:
    """Focus score over (vx, vy) px/s of one patch, per loss (the paper's Fig. 6 and Supp. Fig.):
    OUTPUT/flow_grid_<polarity>.png and OUTPUT/flow_landscape.csv (each loss's peak, px/s)."""
    from focus_ros.cli.evaluate_flow import FIGURE_6_LOSSES
    from focus_ros.estimators.optical_flow import OpticalFlowEstimator, OpticalFlowSettings, reference_time_ns
    from focus_ros.evaluation import flow, plots
    from focus_ros.evaluation.landscape import normalize

    if args.grid_steps < 3:
        raise UserError(f"--grid-steps must be at least 3, got {args.grid_steps}")
    if not args.flow_span > 0:
        raise UserError(f"--flow-span must be positive (px/s), got {args.flow_span}")
    losses = list(FIGURE_6_LOSSES) if args.losses == "all" else loss_names(args.losses)
    modes = ("without", "with") if args.polarity == "both" else (args.polarity,)
    recording, simulated, description = load_source(args)
    index, window = _window(recording.events, args.window_events, args.window_index)
    calibration = recording.calibration
    settings = OpticalFlowSettings(patch_size_px=args.patch_size, t_ref=args.t_ref)
    estimator = OpticalFlowEstimator(calibration.width, calibration.height, settings)
    grid = estimator.grid
    counts = grid.event_counts(window.x, window.y)
    if args.patch is not None:
        x, y = args.patch
        if not (0 <= x < grid.columns * grid.stride and 0 <= y < grid.rows * grid.stride):
            raise UserError(f"--patch ({x}, {y}) lies outside the {grid.columns}x{grid.rows} patch grid")
        patch = (y // grid.stride) * grid.columns + x // grid.stride
    else:
        patch = int(np.argmax(counts))
    ground_truth = angular_velocity_ground_truth(args, recording, simulated)
    t_ref_ns = reference_time_ns(window, args.t_ref)
    truth = np.full(2, np.nan)
    if ground_truth is not None:
        omega = ground_truth.at([t_ref_ns])[0]
        if np.all(np.isfinite(omega)):
            truth = flow.patch_flow_from_rotation(calibration, grid, window, omega)[patch]
    if np.all(np.isfinite(truth)):
        center, center_name = truth, f"ground truth ({ground_truth.source})"
    else:
        center, center_name = estimator.estimate(window).flow[patch], "variance estimate"
        if not np.all(np.isfinite(center)):
            center, center_name = np.zeros(2), "v = 0 (the variance estimate is invalid for this patch)"
    offsets = np.linspace(-args.flow_span, args.flow_span, args.grid_steps)
    output = args.output
    output.mkdir(parents=True, exist_ok=True)
    rows = []
    for mode in modes:
        grids = {}
        for loss in losses:
            try:
                scores = flow.patch_landscape(window, grid, loss, mode == "with", patch, center, offsets, args.t_ref)
            except ValueError as error:
                print(f"focus-ros landscape: skipping {loss} ({mode} polarity): {error}", file=sys.stderr)
                continue
            grids[loss] = normalize(scores)
            row, column = np.unravel_index(int(np.argmax(scores)), scores.shape)
            rows.append([loss, mode, f"{center[0] + offsets[column]:.1f}", f"{center[1] + offsets[row]:.1f}"])
        if grids:
            plots.plot_landscape_grid(offsets, offsets, grids, output / f"flow_grid_{mode}.png",
                                      labels=("v_x", "v_y"), marker=(0.0, 0.0), unit="px/s")
    with open(output / "flow_landscape.csv", "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["loss", "polarity", "peak_vx", "peak_vy"])
        writer.writerows(rows)
    origin = grid.origins[patch]
    print(f"{description}, window {index}: patch at ({origin[0]}, {origin[1]}) px with {counts[patch]} events, "
          f"centre v = ({center[0]:.1f}, {center[1]:.1f}) px/s ({center_name}); wrote {len(rows)} landscapes "
          f"to {output}", file=sys.stderr)
    return 0
