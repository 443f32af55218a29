"""Estimate patch optical flow (px/s) over a whole sequence: flow.csv and pictures.

Reads an Event Camera Dataset folder or a ROS 1 / ROS 2 bag as a stream, cuts it into windows of
N events (or of a duration), splits the sensor into square patches and gives each patch the flow
v maximising the focus loss of its events warped by x' = x - (t - t_ref) v, in pixels of the raw
(distorted) image, warm-started from the previous window. Writes OUTPUT/flow.csv (one row per
patch and window: t_ref s, patch centre x y px, vx vy px/s, events, confidence, valid, reason)
and, every K-th window, OUTPUT/arrows_NNNNNN.png (flow arrows over the motion-compensated image)
and OUTPUT/colors_NNNNNN.png (flow as colours: hue = direction, brightness = speed).
The ROS node optical_flow_node gives the same flows for the same windows and settings.
"""

from __future__ import annotations

import csv
import math
import sys
from pathlib import Path

from focus_ros.cli import UserError
from focus_ros.events import NANOSECONDS_PER_SECOND

CSV_COLUMNS = ("t_ref", "x", "y", "vx", "vy", "events", "confidence", "valid", "reason")


def add_flow_arguments(parser) -> None:
    """The estimator's options (shared with the flow evaluation and landscape)."""
    from focus_ros.estimators.optical_flow import OpticalFlowSettings

    defaults = OpticalFlowSettings()
    parser.add_argument("--patch-size", type=int, default=defaults.patch_size_px, help="patch side (px, default 15)")
    parser.add_argument("--patch-stride", type=int, default=None, help="patch stride (px, default: the patch size)")
    parser.add_argument("--margin", type=int, default=defaults.margin_px,
                        help=f"events within this many px of a patch are warped into it (px, default {defaults.margin_px}; "
                             "with a warm start each patch uses only what its previous flow needs)")
    parser.add_argument("--pyramid", default=",".join(str(s) for s in defaults.pyramid_patch_sizes),
                        help="coarser patch sizes solved first where a patch has no warm start "
                             f"(px, comma-separated, decreasing; '' for none; default "
                             f"'{','.join(str(s) for s in defaults.pyramid_patch_sizes)}')")
    parser.add_argument("--min-patch-events", type=int, default=defaults.min_events_per_patch,
                        help=f"fewer events make a patch invalid (default {defaults.min_events_per_patch})")
    parser.add_argument("--min-aperture-ratio", type=float, default=defaults.min_aperture_ratio,
                        help="structure-tensor eigenvalue ratio below which a patch is an aperture case "
                             f"(default {defaults.min_aperture_ratio})")
    parser.add_argument("--blur-sigma", type=float, default=None,
                        help="IWE blur (px, at most 1; default 1 for spatial losses, 0 otherwise)")
    parser.add_argument("--t-ref", choices=("start", "middle", "end"), default=defaults.t_ref)


def settings_from_flow_arguments(args, **changes):
    """OpticalFlowSettings from the options of ``add_flow_arguments``."""
    from focus_ros.estimators.optical_flow import OpticalFlowSettings

    try:
        pyramid = tuple(int(size) for size in args.pyramid.split(",") if size.strip())
    except ValueError:
        raise UserError(f"--pyramid must be comma-separated patch sizes in px, got '{args.pyramid}'") from None
    return OpticalFlowSettings(patch_size_px=args.patch_size, patch_stride_px=args.patch_stride,
                               margin_px=args.margin, pyramid_patch_sizes=pyramid,
                               min_events_per_patch=args.min_patch_events,
                               min_aperture_ratio=args.min_aperture_ratio, blur_sigma_px=args.blur_sigma,
                               t_ref=args.t_ref, **changes)


def add_arguments(parser) -> None:
    parser.add_argument("sequence", help="ECD folder with events.txt and calib.txt, an events.txt file, "
                                         "a ROS 1 .bag or a ROS 2 bag folder")
    parser.add_argument("-o", "--output", required=True, type=Path, help="output folder (flow.csv, pictures)")
    parser.add_argument("--calib", help="calib.txt or ROS camera YAML (only the sensor size is used: flow is "
                                        "in raw pixels); default: beside events.txt, or the bag's camera_info")
    parser.add_argument("--topic", default=None, help="bag event topic (default: found by message type)")
    parser.add_argument("--width", type=int, default=240, help="sensor width for calib.txt (px, default 240)")
    parser.add_argument("--height", type=int, default=180, help="sensor height for calib.txt (px, default 180)")
    parser.add_argument("--window-events", type=int, default=30_000, help="events per window (default 30000)")
    parser.add_argument("--window-ms", type=float, default=None,
                        help="windows of this duration (ms) instead of a number of events")
    parser.add_argument("--loss", default="variance", help="focus loss name (default variance)")
    parser.add_argument("--polarity", action="store_true", help="use polarity in the IWE (b_k = p_k)")
    add_flow_arguments(parser)
    parser.add_argument("--picture-every", type=int, default=10, metavar="K",
                        help="write the pictures of every K-th window (0: none; default 10)")
    parser.add_argument("--max-windows", type=int, default=None, help="stop after this many windows")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")


def sequence_windows(sequence, topic, window_events: int, window_ms: float | None):
    """The sequence's events cut into windows, streamed."""
    from focus_ros.sources.sequence import iter_sequence_events
    from focus_ros.windows import count_windows, duration_windows

    batches = iter_sequence_events(sequence, topic)
    if window_ms is not None:
        return duration_windows(batches, int(round(window_ms * 1e6)))
    return count_windows(batches, window_events)


def check_window_arguments(args) -> None:
    if args.window_events <= 0:
        raise UserError(f"--window-events must be positive, got {args.window_events}")
    if args.window_ms is not None and not (math.isfinite(args.window_ms) and args.window_ms > 0):
        raise UserError(f"--window-ms must be a positive duration (ms), got {args.window_ms}")


def write_pictures(output: Path, index: int, estimator, estimate) -> None:
    import cv2

    from focus_ros.flow.pictures import compensated_image, flow_arrows_image, flow_color_image

    arrows = flow_arrows_image(compensated_image(estimator, estimate), estimate)
    cv2.imwrite(str(output / f"arrows_{index:06d}.png"), cv2.cvtColor(arrows, cv2.COLOR_RGB2BGR))
    colors = flow_color_image(estimate)
    cv2.imwrite(str(output / f"colors_{index:06d}.png"), cv2.cvtColor(colors, cv2.COLOR_RGB2BGR))


def flow_rows(estimate):
    """CSV rows (CSV_COLUMNS) of one window's estimate."""
    from focus_ros.estimators.optical_flow import REASONS

    t_ref = f"{estimate.t_ref_ns / NANOSECONDS_PER_SECOND:.9f}"
    for center, vector, events, confidence, reason in zip(estimate.grid.centers, estimate.flow, estimate.event_counts,
                                                           estimate.confidence, estimate.reason):
        yield [t_ref, f"{center[0]:g}", f"{center[1]:g}",
               *(f"{v:.6f}" if math.isfinite(v) else "nan" for v in vector), int(events),
               f"{confidence:.6g}" if math.isfinite(confidence) else "nan", int(reason == 0), REASONS[int(reason)]]


def run(args) -> int:
    from tqdm import tqdm

    from focus_ros.estimators.optical_flow import OpticalFlowEstimator
    from focus_ros.losses import LOSSES
    from focus_ros.sources.sequence import sequence_calibration

    if args.loss not in LOSSES:
        raise UserError(f"unknown loss '{args.loss}': choose one of {', '.join(LOSSES)}")
    check_window_arguments(args)
    if args.picture_every < 0:
        raise UserError(f"--picture-every must be >= 0, got {args.picture_every}")
    sequence = Path(args.sequence)
    calibration = sequence_calibration(sequence, args.calib, args.width, args.height)
    settings = settings_from_flow_arguments(args, loss=args.loss, use_polarity=args.polarity)
    estimator = OpticalFlowEstimator(calibration.width, calibration.height, settings)
    output = args.output
    output.mkdir(parents=True, exist_ok=True)
    written = valid = patches = 0
    with open(output / "flow.csv", "w", newline="") as handle, tqdm(unit="window", disable=args.quiet,
                                                                    file=sys.stderr) as progress:
        writer = csv.writer(handle)
        writer.writerow(CSV_COLUMNS)
        for window in sequence_windows(sequence, args.topic, args.window_events, args.window_ms):
            estimate = estimator.estimate(window)
            writer.writerows(flow_rows(estimate))
            if args.picture_every and written % args.picture_every == 0:
                write_pictures(output, written, estimator, estimate)
            written += 1
            valid += int(estimate.valid.sum())
            patches += int((estimate.event_counts > 0).sum())
            progress.update(1)
            progress.set_postfix(valid=f"{valid / max(patches, 1):.0%}")
            if args.max_windows is not None and written >= args.max_windows:
                break
    if written == 0:
        print(f"focus-ros flow: warning: {sequence} has no complete window: nothing written", file=sys.stderr)
    elif not args.quiet:
        print(f"wrote {written} windows to {output / 'flow.csv'} ({valid} valid patch flows of {patches} "
              "patches with events)", file=sys.stderr)
    return 0
