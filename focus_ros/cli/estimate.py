"""Estimate the angular velocity (rad/s) of a rotating event camera over a whole sequence.

Reads an Event Camera Dataset folder (events.txt + calib.txt) or a ROS 1 / ROS 2 bag
(dvs_msgs/EventArray or event_camera_msgs/EventPacket, camera_info for the intrinsics) as
a stream, cuts it into windows, maximises the chosen focus loss in each window
(warm-started from the previous window) and writes a CSV: t_ref (s), wx, wy, wz (rad/s),
iterations, evaluations, score, degenerate. The windows are by default the ROS node's auto
windows (:class:`~focus_ros.windows.AdaptiveWindows`: their duration from the sensor and the
motion the previous estimate implies, thinned to ``--max-window-events``, the IWE binned on
large sensors), or N events each with ``--window-events N``. A recording shorter than one window
is estimated as one (said on stderr; :meth:`~focus_ros.pipelines.angular_velocity.AngularVelocityPipeline.finish`).
The ROS node gives the same estimates for the same windows and settings (live, its compute budget
may thin them further).
"""

from __future__ import annotations

import csv
import math
import os
import sys
from pathlib import Path

from focus_ros.cli import UserError
from focus_ros.cli._options import SHARED, add_estimator_arguments, settings_from_arguments
from focus_ros.cli._output import replaced_on_success
from focus_ros.cli._settings import add_setting_options, settings_from_options
from focus_ros.events import NANOSECONDS_PER_SECOND
from focus_ros.pipelines.angular_velocity import WindowSettings, real_time_defaults
from focus_ros.windows import WindowRule

CSV_COLUMNS = ("t_ref", "wx", "wy", "wz", "iterations", "evaluations", "score", "degenerate")
#: the estimator settings with an option here: the shared ones, and the loss and the IWE's
ESTIMATOR_OPTIONS = (*SHARED, "loss", "use_polarity", "sigma", "pixel_binning")


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
    # the node's window settings and defaults, but a fixed thinning bound: offline there is no compute budget
    add_setting_options(parser, WindowSettings, defaults={"max_window_events": WindowRule.max_events})
    add_setting_options(parser, WindowRule)
    add_estimator_arguments(parser, real_time_defaults(), ESTIMATOR_OPTIONS)  # the node's defaults
    parser.add_argument("--max-windows", type=int, default=None, help="stop after this many windows")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")


def run(args) -> int:
    from tqdm import tqdm

    from focus_ros.estimators.angular_velocity import AngularVelocityEstimator
    from focus_ros.pipelines.angular_velocity import AngularVelocityPipeline
    from focus_ros.sources.sequence import ECD, iter_sequence_events, sequence_calibration, sequence_format

    sequence = Path(args.sequence)
    kind = sequence_format(sequence)
    settings = settings_from_arguments(args, real_time_defaults(), ESTIMATOR_OPTIONS)
    windows = settings_from_options(WindowSettings, args)
    if windows.max_window_events < 100:
        raise UserError(f"--max-window-events must be at least 100, got {windows.max_window_events}")
    calibration = sequence_calibration(sequence, args.calib, args.width, args.height, args.topic)
    pipeline = AngularVelocityPipeline(calibration, settings, windows, settings_from_options(WindowRule, args))
    reason = pipeline.degeneracy()
    if reason:
        raise UserError(reason + "; add --polarity")
    estimator = AngularVelocityEstimator(calibration, pipeline.settings)

    total_windows = (_estimate_window_count(sequence / "events.txt" if sequence.is_dir() else sequence,
                                            windows.window_events, windows.stride_events)
                     if kind == ECD and windows.mode == "events" else None)
    if args.max_windows is not None and total_windows is not None:
        total_windows = min(total_windows, args.max_windows)
    output = Path(args.output)
    output.parent.mkdir(parents=True, exist_ok=True)
    written = 0
    degenerate = 0
    whole = None  # the recording as one window, when it holds less than one (pipeline.finish)
    with replaced_on_success(output) as partial, open(partial, "w", newline="") as handle, tqdm(
            total=total_windows, unit="window", disable=args.quiet, file=sys.stderr) as progress:
        writer = csv.writer(handle)
        writer.writerow(CSV_COLUMNS)
        batches = iter_sequence_events(sequence, args.topic, within=calibration)
        for job, outcome in pipeline.run(batches, estimator.estimate, estimator.reset):
            whole = job if job.partial else whole
            estimate = outcome.estimate
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
    if whole is not None:
        print(f"focus-ros estimate: {sequence} holds {whole.event_count:,} events in {whole.duration_s * 1e3:.1f} "
              f"ms, less than one window ({pipeline.window_need()}): estimated as one window", file=sys.stderr)
    elif written == 0:
        print(f"focus-ros estimate: warning: {sequence} holds no complete window ({pipeline.window_need()}) and "
              f"fewer than the {pipeline.settings.min_events} events to estimate as one: no window written",
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
