"""Estimate the angular velocity (rad/s) of a rotating event camera over a whole sequence.

Reads an Event Camera Dataset folder (events.txt + calib.txt) or a ROS 1 / ROS 2 bag
(dvs_msgs/EventArray or event_camera_msgs/EventPacket, camera_info for the intrinsics) as
a stream, cuts it into windows, maximises the chosen focus loss in each window
(warm-started from the previous window) and writes a CSV: t_ref (s), wx, wy, wz (rad/s),
iterations, evaluations, score, degenerate. The windows are by default the ROS node's auto
windows (:class:`~focus_ros.windows.AdaptiveWindows`: their duration from the sensor and the
motion the previous estimate implies, thinned to ``--max-window-events``, the IWE binned on
large sensors), or N events each with ``--window-events N``. The ROS node gives the same
estimates for the same windows and settings (live, its compute budget may thin them further).
"""

from __future__ import annotations

import csv
import math
import os
import sys
from pathlib import Path

from focus_ros.cli import UserError
from focus_ros.cli._output import replaced_on_success
from focus_ros.cli._options import (add_estimator_arguments, check_estimator_arguments,
                                    settings_from_arguments)
from focus_ros.estimators.angular_velocity import real_time_settings
from focus_ros.events import NANOSECONDS_PER_SECOND
from focus_ros.windows import WindowRule

CSV_COLUMNS = ("t_ref", "wx", "wy", "wz", "iterations", "evaluations", "score", "degenerate")


def add_arguments(parser) -> None:
    parser.add_argument("sequence", help="ECD folder with events.txt and calib.txt, an events.txt file, "
                                         "a ROS 1 .bag or a ROS 2 bag folder")
    parser.add_argument("--calib", help="calib.txt (fx fy cx cy k1 k2 p1 p2 k3) or ROS camera YAML; "
                                        "default: calib.txt beside events.txt, or the bag's camera_info")
    parser.add_argument("--topic", default=None, help="bag event topic (default: found by message type)")
    parser.add_argument("--width", type=int, default=None, help="sensor width for calib.txt (px; default: the "
                                                                "size the bag's event messages declare, else 240)")
    parser.add_argument("--height", type=int, default=None, help="sensor height for calib.txt (px; default: the "
                                                                 "size the bag's event messages declare, else 180)")
    parser.add_argument("-o", "--output", default="angular_velocity.csv", help="output CSV path")
    parser.add_argument("--window-events", type=int, default=0,
                        help="events per window; default 0: auto windows, as the ROS node's")
    parser.add_argument("--stride", type=int, default=None, help="with --window-events: events between window "
                                                                 "starts (default: the window size)")
    parser.add_argument("--window-rotation-deg", type=float, default=WindowRule.rotation_deg,
                        help="auto windows: the camera's rotation within a window (deg, default "
                             f"{WindowRule.rotation_deg:g})")
    parser.add_argument("--max-window-events", type=int, default=WindowRule.max_events,
                        help=f"auto windows: thin each to at most this many events (default {WindowRule.max_events})")
    parser.add_argument("--pixel-binning", type=int, default=0,
                        help="IWE on bins of this many pixels per side; default 0: 2 on 1280x720, 1 below")
    parser.add_argument("--loss", default="variance", help="focus loss name (default variance)")
    parser.add_argument("--polarity", action="store_true", help="use polarity in the IWE (b_k = p_k)")
    parser.add_argument("--sigma", type=float, default=1.0, help="Gaussian kernel sigma (px)")
    add_estimator_arguments(parser, real_time_settings())
    parser.add_argument("--max-windows", type=int, default=None, help="stop after this many windows")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")


def run(args) -> int:
    from tqdm import tqdm

    from focus_ros.estimators.angular_velocity import AngularVelocityEstimator, degeneracy_of, planning_speed_rad_s
    from focus_ros.iwe import coarse_grid_factor
    from focus_ros.losses import LOSSES, get_loss
    from focus_ros.sources.sequence import ECD, iter_sequence_events, sequence_calibration, sequence_format
    from focus_ros.windows import AdaptiveWindows, count_windows

    sequence = Path(args.sequence)
    kind = sequence_format(sequence)
    if args.loss not in LOSSES:
        raise UserError(f"unknown loss '{args.loss}': choose one of {', '.join(LOSSES)}")
    reason = degeneracy_of(get_loss(args.loss), args.polarity)
    if reason:
        raise UserError(reason + "; add --polarity")
    if args.window_events < 0:
        raise UserError(f"--window-events must be positive (or 0: auto windows), got {args.window_events}")
    if args.max_window_events < 100 or args.pixel_binning < 0 or not args.window_rotation_deg > 0:
        raise UserError("--max-window-events must be at least 100, --pixel-binning >= 0 (0 = auto) and "
                        "--window-rotation-deg positive")
    if args.stride is not None and args.stride <= 0:
        raise UserError(f"--stride must be positive, got {args.stride}")
    check_estimator_arguments(args)
    calibration = sequence_calibration(sequence, args.calib, args.width, args.height, args.topic)
    binning = args.pixel_binning or coarse_grid_factor(calibration.width, calibration.height)
    settings = settings_from_arguments(args, real_time_settings(), loss=args.loss, use_polarity=args.polarity,
                                       sigma=args.sigma, pixel_binning=binning)
    estimator = AngularVelocityEstimator(calibration, settings)

    stride = args.stride or args.window_events
    auto = None
    if not args.window_events:
        grid = estimator.grid_calibration
        auto = AdaptiveWindows(WindowRule(rotation_deg=args.window_rotation_deg), grid.width * grid.height,
                               args.max_window_events)
    total_windows = (_estimate_window_count(sequence / "events.txt" if sequence.is_dir() else sequence,
                                            args.window_events, stride)
                     if kind == ECD and args.window_events else None)
    if args.max_windows is not None and total_windows is not None:
        total_windows = min(total_windows, args.max_windows)
    output = Path(args.output)
    output.parent.mkdir(parents=True, exist_ok=True)
    written = 0
    degenerate = 0
    with replaced_on_success(output) as partial, open(partial, "w", newline="") as handle, tqdm(
            total=total_windows, unit="window", disable=args.quiet, file=sys.stderr) as progress:
        writer = csv.writer(handle)
        writer.writerow(CSV_COLUMNS)
        batches = iter_sequence_events(sequence, args.topic, within=calibration)
        windows = (count_windows(batches, args.window_events, stride) if auto is None
                   else (window for batch in batches for window in auto.cut(batch)))
        for window in windows:
            estimate = estimator.estimate(window if auto is None else window.events)
            if auto is not None:
                auto.after_estimate(window, planning_speed_rad_s(estimate))
            omega = estimate.angular_velocity
            writer.writerow([f"{estimate.t_ref_ns / NANOSECONDS_PER_SECOND:.9f}",
                             *(f"{v:.9f}" if math.isfinite(v) else "nan" for v in omega),
                             estimate.iterations, estimate.evaluations,
                             f"{estimate.score:.9g}", int(estimate.degenerate)])
            written += 1
            degenerate += int(estimate.degenerate)
            progress.update(1)
            if args.max_windows is not None and written >= args.max_windows:
                break
    if written == 0:
        print(f"focus-ros estimate: warning: {sequence} holds no complete window "
              f"({f'{args.window_events} events' if args.window_events else 'auto windows'}): no window written",
              file=sys.stderr)
    if not args.quiet:
        print(f"wrote {written} windows ({degenerate} degenerate) to {output}", file=sys.stderr)
    return 0


def _estimate_window_count(events_path: Path, window_events: int, stride: int) -> int:
    """Windows expected from the file size and the mean line length of its first 64 KiB
    (for the progress bar only)."""
    size = os.path.getsize(events_path)
    with open(events_path, "rb") as stream:
        head = stream.read(65536)
    lines = head.count(b"\n")
    if lines == 0:
        return 0
    events = size * lines / len(head)
    return max(0, int((events - window_events) // stride) + 1)
