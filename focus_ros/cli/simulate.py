"""Simulate an event camera with ground truth (ω, poses, depth) and write it as ECD text or a bag.

Presets: ``rotation`` (DAVIS240C in a textured room, ω ramping up to ±700 deg/s,
10 s), ``rotation_short`` (2 s, ±300 deg/s), ``six_dof`` (moving in front of a wall
with panels) and ``slider`` (sliding right at 0.25 m/s for 3 s in front of panels at
0.55-2.3 m, like slider_depth). The output holds the events, the IMU (ground-truth
angular velocity in the camera frame, rad/s, at 1 kHz), the camera poses, the
calibration and, for six_dof and slider, depth maps at 50 Hz (metres along the optical
axis): ``depthmaps.txt`` + ``depthmaps/*.npy`` in an ECD folder, 32FC1 images on
``/dvs/depthmap`` in a bag (see focus_ros.sources.depth_maps).
"""

from __future__ import annotations

import argparse
import importlib
import time
from pathlib import Path

import numpy as np

from focus_ros.cli import UserError

#: --format -> (module, function, keyword arguments)
WRITERS = {
    "ecd": ("focus_ros.sources.ecd", "write_ecd_folder", {}),
    "rosbag1": ("focus_ros.sources.bags", "write_bag", {"version": 1}),
    "rosbag2": ("focus_ros.sources.bags", "write_bag", {"version": 2, "storage": "mcap"}),
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from focus_ros.sources.simulator import PRESETS, SensorConfig
    defaults = SensorConfig()
    parser.add_argument("--output", "-o", required=True, type=Path,
                        help="output folder (ecd) or bag path (rosbag1/rosbag2)")
    parser.add_argument("--format", choices=sorted(WRITERS), default="ecd", help="output format (default ecd)")
    parser.add_argument("--preset", choices=sorted(PRESETS), default="rotation_short",
                        help="(default rotation_short) "
                        + "; ".join(f"{p.name}: {p.description}" for p in PRESETS.values()))
    parser.add_argument("--duration", type=float, default=None, metavar="S",
                        help="simulated seconds (default: the preset's, 10 s for rotation)")
    parser.add_argument("--seed", type=int, default=0, help="random seed: scene, motion, sensor, noise")
    parser.add_argument("--contrast-threshold", type=float, default=defaults.contrast_threshold,
                        help=f"contrast threshold C in log intensity (default {defaults.contrast_threshold})")
    parser.add_argument("--threshold-mismatch", type=float, default=defaults.threshold_mismatch,
                        help=f"per-pixel σ of C (default {defaults.threshold_mismatch})")
    parser.add_argument("--refractory-period", type=float, default=defaults.refractory_period_s * 1e3,
                        metavar="MS", help=f"refractory period in ms (default {defaults.refractory_period_s * 1e3})")
    parser.add_argument("--noise-rate", type=float, default=defaults.noise_rate_hz, metavar="HZ",
                        help=f"background activity per pixel, Hz (default {defaults.noise_rate_hz})")
    parser.add_argument("--max-pixel-motion", type=float, default=defaults.max_pixel_motion_px, metavar="PX",
                        help=f"render step bound, px of image motion (default {defaults.max_pixel_motion_px})")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


def load_writer(output_format: str):
    """The writer function for a --format, with its fixed keyword arguments."""
    module_name, function_name, options = WRITERS[output_format]
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        if error.name == module_name:
            raise UserError(f"--format {output_format} is not available: {module_name} is not installed "
                            f"in this version of focus_ros") from None
        raise
    return getattr(module, function_name), options


def check_options(args: argparse.Namespace) -> None:
    """Raise UserError naming the first out-of-range option."""
    checks = [("--duration", args.duration is None or args.duration > 0, "> 0 s", args.duration),
              ("--contrast-threshold", args.contrast_threshold > 0, "> 0", args.contrast_threshold),
              ("--threshold-mismatch", args.threshold_mismatch >= 0, ">= 0", args.threshold_mismatch),
              ("--refractory-period", args.refractory_period >= 0, ">= 0 ms", args.refractory_period),
              ("--noise-rate", args.noise_rate >= 0, ">= 0 Hz", args.noise_rate),
              ("--max-pixel-motion", 0 < args.max_pixel_motion <= 5, "in (0, 5] px", args.max_pixel_motion)]
    for flag, ok, expected, value in checks:
        if not ok or not np.isfinite(value if value is not None else 0.0):
            raise UserError(f"{flag} must be {expected}, got {value}")


def run(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from focus_ros.sources.simulator import SensorConfig, make_preset
    check_options(args)
    sensor = SensorConfig(contrast_threshold=args.contrast_threshold, threshold_mismatch=args.threshold_mismatch,
                          refractory_period_s=args.refractory_period * 1e-3, noise_rate_hz=args.noise_rate,
                          max_pixel_motion_px=args.max_pixel_motion)
    sensor.validate()
    writer, writer_options = load_writer(args.format)  # fail before simulating, not after
    simulator = make_preset(args.preset, args.duration, args.seed, sensor)
    duration_s = simulator.trajectory.duration_s
    started = time.perf_counter()
    with tqdm(total=round(duration_s, 3), unit="s sim", disable=args.no_progress,
              bar_format="{l_bar}{bar}| {n:.2f}/{total:.2f} s [{elapsed}<{remaining}]") as bar:
        recording = simulator.simulate(progress=lambda seconds: bar.update(seconds))
    simulated_in_s = time.perf_counter() - started
    writer(args.output, recording, **writer_options)
    events = recording.events
    peak_deg_s = float(np.rad2deg(np.abs(recording.imu.angular_velocity).max()))
    window = 10_000_000  # ns
    peak_rate = (np.bincount((events.t - events.t[0]) // window).max() / (window * 1e-9)
                 if len(events) else 0.0)
    print(f"{args.preset}: {len(events):,} events in {duration_s:g} s "
          f"(mean {len(events) / duration_s / 1e6:.2f} Mev/s, peak {peak_rate / 1e6:.2f} Mev/s over 10 ms), "
          f"peak |ω| per axis {peak_deg_s:.0f} deg/s; simulated in {simulated_in_s:.1f} s wall "
          f"({duration_s / simulated_in_s:.2f} simulated s per s); wrote {args.format} to {args.output}")
    return 0
