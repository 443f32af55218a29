"""Simulate an event camera with ground truth (ω, poses, depth) and write it as ECD text or a bag.

Presets: ``rotation`` (a textured room, ω ramping up to ±700 deg/s, 10 s),
``rotation_short`` (2 s, ±300 deg/s), ``six_dof`` (moving in front of a wall with panels)
and ``slider`` (sliding right at 0.25 m/s for 3 s in front of panels at 0.55-2.3 m, like
slider_depth), each seen through any camera of --sensor (davis240c, davis346, dvxplorer,
imx636: its size, typical intrinsics and distortion; the motion and ground truth are the
same for all). The output holds the events, the IMU (ground-truth angular velocity in the
camera frame, rad/s, at 1 kHz), the camera poses, the calibration, the simulator's record
(``simulation.yaml`` in a folder, std_msgs/String on ``/focus_ros/simulation`` in a bag: the
evaluations then compare with the exact ω) and, for six_dof and slider, depth maps at
50 Hz (metres along the optical axis): ``depthmaps.txt`` + ``depthmaps/*.npy`` in an ECD
folder, 32FC1 images on ``/dvs/depthmap`` in a bag (see focus_ros.sources.depth_maps). A
bag's events are in the sensor's driver encoding (event_camera_msgs/EventPacket: evt3 for
imx636, libcaer_cmp for davis346 and dvxplorer, 1 us resolution) or, for davis240c, in the
Event Camera Dataset's dvs_msgs/EventArray; --event-encoding chooses another.
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


#: --event-encoding values: dvs_msgs/EventArray or an event_camera_msgs/EventPacket encoding
EVENT_ENCODINGS = ("dvs_msgs", "evt3", "libcaer_cmp", "libcaer", "mono")


def default_event_encoding(sensor: str) -> str:
    """The event message a bag of ``sensor`` (a focus_ros.camera.SENSORS name) gets by default: its
    driver's encoding, except the DAVIS240C's, which is the Event Camera Dataset's dvs_msgs."""
    from focus_ros.camera import sensor_model
    return "dvs_msgs" if sensor == "davis240c" else sensor_model(sensor).encoding


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from focus_ros.camera import SENSORS
    from focus_ros.sources.simulator import PRESETS, SensorConfig
    defaults = SensorConfig()
    parser.add_argument("--output", "-o", required=True, type=Path,
                        help="output folder (ecd) or bag path (rosbag1/rosbag2)")
    parser.add_argument("--format", choices=sorted(WRITERS), default="ecd", help="output format (default ecd)")
    parser.add_argument("--preset", choices=sorted(PRESETS), default="rotation_short",
                        help="(default rotation_short) "
                        + "; ".join(f"{p.name}: {p.description}" for p in PRESETS.values()))
    parser.add_argument("--sensor", default="davis240c", metavar="NAME",
                        help="the camera: " + "; ".join(f"{name}: {model.description}"
                                                        for name, model in SENSORS.items()) + " (default davis240c)")
    parser.add_argument("--event-encoding", choices=EVENT_ENCODINGS, default=None,
                        help="event messages of a bag (default: the sensor's driver encoding, evt3 for imx636, "
                        "libcaer_cmp for davis346/dvxplorer; dvs_msgs for davis240c as in the Event Camera Dataset)")
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
    from focus_ros.cli._sources import check_sensor
    check_sensor(args.sensor)
    if args.event_encoding is not None and args.format == "ecd":
        raise UserError(f"--event-encoding {args.event_encoding} applies to bags: give --format rosbag1 or rosbag2")
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
    encoding = args.event_encoding or default_event_encoding(args.sensor)
    if args.format != "ecd":
        writer_options = dict(writer_options, event_encoding=None if encoding == "dvs_msgs" else encoding)
    simulator = make_preset(args.preset, args.duration, args.seed, sensor, camera=args.sensor)
    duration_s = simulator.trajectory.duration_s
    started = time.perf_counter()
    with tqdm(total=round(duration_s, 3), unit="s sim", disable=args.no_progress,
              bar_format="{l_bar}{bar}| {n:.2f}/{total:.2f} s [{elapsed}<{remaining}]") as bar:
        recording = simulator.simulate(progress=lambda seconds: bar.update(seconds))
    simulated_in_s = time.perf_counter() - started
    writer(args.output, recording, **writer_options)
    events = recording.events
    peak_deg_s = float(np.rad2deg(np.abs(recording.imu.angular_velocity).max()))
    window = max(1, min(10_000_000, int(duration_s * 1e9)))  # ns: 10 ms bins, or one for a shorter sequence
    peak_rate = (np.bincount((events.t - events.t[0]) // window).max() / (window * 1e-9)
                 if len(events) else 0.0)
    written = args.format if args.format == "ecd" else f"{args.format} ({encoding} events)"
    print(f"{args.preset}, {args.sensor} ({simulator.calibration.width}x{simulator.calibration.height}): "
          f"{len(events):,} events in {duration_s:g} s (mean {len(events) / duration_s / 1e6:.2f} Mev/s, "
          f"peak {peak_rate / 1e6:.2f} Mev/s over {window / 1e6:g} ms), "
          f"peak |ω| per axis {peak_deg_s:.0f} deg/s; simulated in {simulated_in_s:.1f} s wall "
          f"({duration_s / simulated_in_s:.3g} simulated s per s); wrote {written} to {args.output}")
    return 0
