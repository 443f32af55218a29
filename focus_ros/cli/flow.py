"""Estimate patch optical flow (px/s) over a whole sequence: flow.csv and pictures.

Reads an Event Camera Dataset folder or a ROS 1 / ROS 2 bag as a stream, cuts it into windows of
N events (or of a duration), splits the sensor into square patches and gives each patch the flow
v maximising the focus loss of its events warped by x' = x - (t - t_ref) v, in pixels of the raw
(distorted) image, warm-started from the previous window. Writes OUTPUT/flow.csv (one row per
patch and window: t_ref s, patch centre x y px, vx vy px/s, events, confidence (the focus's
curvature at the maximum: threshold it to keep the surest flows), valid, reason, borrowed (1: a
patch with few events or one edge solved with its neighbours' flow as a prior), normal_vx
normal_vy px/s (aperture patches: the flow along their edge's normal, the only observable part))
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

CSV_COLUMNS = ("t_ref", "x", "y", "vx", "vy", "events", "confidence", "valid", "reason", "borrowed", "normal_vx",
               "normal_vy")


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
    parser.add_argument("--min-borrowing-events", type=int, default=defaults.min_borrowing_events,
                        help="patches with at least this many events (but fewer than --min-patch-events) and "
                             "aperture patches are solved with their neighbours' flow as a prior "
                             f"(default {defaults.min_borrowing_events})")
    parser.add_argument("--no-borrowing", action="store_true",
                        help="no second pass with the neighbours' prior: sparse and aperture patches stay invalid")
    parser.add_argument("--no-smoothing", action="store_true",
                        help="the second pass leaves the valid patches' flows as they are")
    parser.add_argument("--min-confidence", type=float, default=defaults.min_confidence,
                        help="a valid patch needs at least this confidence (default "
                             f"{defaults.min_confidence:g}; flow.csv has each patch's)")
    parser.add_argument("--min-motion-confidence", type=float, default=defaults.min_motion_confidence,
                        help="a valid patch needs at least this confidence times its motion over the window (px): "
                             "slow patches measured too coarsely for their speed are reported invalid (default "
                             f"{defaults.min_motion_confidence:g}: none)")
    parser.add_argument("--slow-motion-px", type=float, default=defaults.slow_motion_px,
                        help="valid patches moving less than this (px over the window) are solved again on "
                             f"{defaults.slow_span_windows:g} windows' span, the previous events prepended "
                             f"(default {defaults.slow_motion_px:g}: never)")
    parser.add_argument("--window-motion-px", type=float, default=defaults.window_motion_px,
                        help="windows sized by the motion: a window reaches back over the previous windows' events "
                             "until it spans this motion (px) at the last estimate's median patch speed, at most "
                             f"--max-window-extension times its own span (default {defaults.window_motion_px:g}; "
                             "0: the windows as cut)")
    parser.add_argument("--max-window-extension", type=float, default=defaults.max_window_extension,
                        help="the longest window sized by the motion, in spans of the window as cut "
                             f"(default {defaults.max_window_extension:g})")
    parser.add_argument("--extended-events-factor", type=float, default=defaults.extended_events_factor,
                        help="a window sized by the motion is thinned to at most this many times the events of the "
                             "window as cut (1: about its cost; default 0: all its events)")
    parser.add_argument("--min-motion-px", type=float, default=defaults.min_motion_px,
                        help="a valid patch moving less than this over its window (px) is reported invalid, too "
                             f"slow for its precision (default {defaults.min_motion_px:g})")
    parser.add_argument("--min-relative-speed", type=float, default=defaults.min_relative_speed,
                        help="a valid patch slower than this share of the window's median patch speed is reported "
                             f"invalid, too slow for its precision (default {defaults.min_relative_speed:g})")
    parser.add_argument("--pixel-binning", type=int, default=defaults.pixel_binning,
                        help="events binned b x b before the flow (patch sizes in binned px); default 0 = from the "
                             "sensor: 1 up to 479 px wide, 2 up to 959, 4 up to 1919, and so on")
    parser.add_argument("--max-window-events", type=int, default=None,
                        help="windows with more events are thinned to this many (uniform, deterministic); default: "
                             "with binning, the default window of the binned image, else none; 0 = never")
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
                               min_borrowing_events=args.min_borrowing_events, borrowing=not args.no_borrowing,
                               smoothing=not args.no_smoothing, min_confidence=args.min_confidence,
                               min_motion_confidence=args.min_motion_confidence, slow_motion_px=args.slow_motion_px,
                               window_motion_px=args.window_motion_px, max_window_extension=args.max_window_extension,
                               extended_events_factor=args.extended_events_factor,
                               min_motion_px=args.min_motion_px, min_relative_speed=args.min_relative_speed,
                               pixel_binning=args.pixel_binning, max_window_events=args.max_window_events,
                               t_ref=args.t_ref, **changes)


def add_arguments(parser) -> None:
    parser.add_argument("sequence", help="ECD folder with events.txt and calib.txt, an events.txt file, "
                                         "a ROS 1 .bag or a ROS 2 bag folder")
    parser.add_argument("-o", "--output", required=True, type=Path, help="output folder (flow.csv, pictures)")
    parser.add_argument("--calib", help="calib.txt or ROS camera YAML (only the sensor size is used: flow is "
                                        "in raw pixels); default: beside events.txt, or the bag's camera_info")
    parser.add_argument("--topic", default=None, help="bag event topic (default: found by message type)")
    parser.add_argument("--width", type=int, default=None, help="sensor width for calib.txt (px; default: the "
                        "size a simulated folder records, else 240)")
    parser.add_argument("--height", type=int, default=None, help="sensor height for calib.txt (px; default: the "
                        "size a simulated folder records, else 180)")
    parser.add_argument("--window-events", type=int, default=None,
                        help="events per window (default: 30000 on a 240x180 sensor, scaled by the pixel count)")
    parser.add_argument("--window-ms", type=float, default=None,
                        help="windows of this duration (ms) instead of a number of events")
    parser.add_argument("--loss", default=None, help="focus loss name (default area_exponential)")
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
    if args.window_events is not None and args.window_events <= 0:
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
    number = lambda value, digits=6: f"{value:.{digits}f}" if math.isfinite(value) else "nan"  # noqa: E731
    for center, vector, events, confidence, reason, borrowed, normal in zip(
            estimate.centers, estimate.flow, estimate.event_counts, estimate.confidence, estimate.reason,
            estimate.borrowed, estimate.normal_flow):
        yield [t_ref, f"{center[0]:g}", f"{center[1]:g}", number(vector[0]), number(vector[1]), int(events),
               f"{confidence:.6g}" if math.isfinite(confidence) else "nan", int(reason == 0), REASONS[int(reason)],
               int(borrowed), number(normal[0]), number(normal[1])]


def run(args) -> int:
    from tqdm import tqdm

    from focus_ros.estimators.optical_flow import OpticalFlowEstimator, OpticalFlowSettings, default_window_events
    from focus_ros.losses import LOSSES
    from focus_ros.sources.sequence import sequence_calibration

    args.loss = args.loss or OpticalFlowSettings().loss
    if args.loss not in LOSSES:
        raise UserError(f"unknown loss '{args.loss}': choose one of {', '.join(LOSSES)}")
    check_window_arguments(args)
    if args.picture_every < 0:
        raise UserError(f"--picture-every must be >= 0, got {args.picture_every}")
    sequence = Path(args.sequence)
    calibration = sequence_calibration(sequence, args.calib, args.width, args.height)
    settings = settings_from_flow_arguments(args, loss=args.loss, use_polarity=args.polarity)
    try:
        estimator = OpticalFlowEstimator(calibration.width, calibration.height, settings)
    except ValueError as error:
        raise UserError(str(error)) from None
    window_events = args.window_events or default_window_events(calibration.width, calibration.height)
    output = args.output
    output.mkdir(parents=True, exist_ok=True)
    written = valid = patches = 0
    with open(output / "flow.csv", "w", newline="") as handle, tqdm(unit="window", disable=args.quiet,
                                                                    file=sys.stderr) as progress:
        writer = csv.writer(handle)
        writer.writerow(CSV_COLUMNS)
        for window in sequence_windows(sequence, args.topic, window_events, args.window_ms):
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
