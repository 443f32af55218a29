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
The ROS node optical_flow_node runs the same loop (focus_ros.pipelines.optical_flow) and gives the
same flows for the same windows and settings.
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


def add_flow_arguments(parser, *, exclude: tuple[str, ...] = ()) -> None:
    """The estimator's options (shared with the flow evaluation): one per declared setting of
    ``OpticalFlowSettings`` (not those in ``exclude``), and ``--pyramid`` (comma-separated sizes)."""
    from focus_ros.cli._settings import add_setting_options
    from focus_ros.estimators.optical_flow import OpticalFlowSettings

    add_setting_options(parser, OpticalFlowSettings, exclude=exclude)
    sizes = ",".join(str(size) for size in OpticalFlowSettings().pyramid_patch_sizes)
    parser.add_argument("--pyramid", default=sizes,
                        help="coarser patch sizes solved first where a patch has no warm start "
                             f"(px, comma-separated, decreasing; '' for none; default '{sizes}')")


def settings_from_flow_arguments(args, **changes):
    """OpticalFlowSettings from the options of ``add_flow_arguments`` (``changes``: by field name)."""
    from dataclasses import replace

    from focus_ros.cli._settings import settings_from_options
    from focus_ros.estimators.optical_flow import OpticalFlowSettings

    try:
        pyramid = tuple(int(size) for size in args.pyramid.split(",") if size.strip())
    except ValueError:
        raise UserError(f"--pyramid must be comma-separated patch sizes in px, got '{args.pyramid}'") from None
    return replace(settings_from_options(OpticalFlowSettings, args), **{"pyramid_patch_sizes": pyramid, **changes})


def add_window_arguments(parser) -> None:
    """The windows' options (shared with the flow evaluation): ``--window-events`` and ``--window-ms``."""
    from focus_ros.cli._settings import add_setting_options
    from focus_ros.pipelines.optical_flow import FlowWindowSettings

    add_setting_options(parser, FlowWindowSettings)
    parser.add_argument("--window-ms", type=float, default=None,
                        help="windows of this duration (ms) instead of a number of events")


def window_settings_from_arguments(args):
    """FlowWindowSettings from the options of ``add_window_arguments``."""
    from dataclasses import replace

    from focus_ros.cli._settings import settings_from_options
    from focus_ros.pipelines.optical_flow import FlowWindowSettings

    check_window_arguments(args)
    windows = settings_from_options(FlowWindowSettings, args)
    return windows if args.window_ms is None else replace(windows, window_duration_s=args.window_ms / 1000)


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
    add_window_arguments(parser)
    add_flow_arguments(parser)
    parser.add_argument("--picture-every", type=int, default=10, metavar="K",
                        help="write the pictures of every K-th window (0: none; default 10)")
    parser.add_argument("--max-windows", type=int, default=None, help="stop after this many windows")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")


def check_window_arguments(args) -> None:
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

    from focus_ros.pipelines.optical_flow import OpticalFlowPipeline
    from focus_ros.sources.sequence import iter_sequence_events, sequence_calibration

    windows = window_settings_from_arguments(args)
    if args.picture_every < 0:
        raise UserError(f"--picture-every must be >= 0, got {args.picture_every}")
    sequence = Path(args.sequence)
    calibration = sequence_calibration(sequence, args.calib, args.width, args.height)
    try:
        pipeline = OpticalFlowPipeline(calibration.width, calibration.height, settings_from_flow_arguments(args),
                                       windows)
    except ValueError as error:
        raise UserError(str(error)) from None
    output = args.output
    output.mkdir(parents=True, exist_ok=True)
    written = valid = patches = 0
    with open(output / "flow.csv", "w", newline="") as handle, tqdm(unit="window", disable=args.quiet,
                                                                    file=sys.stderr) as progress:
        writer = csv.writer(handle)
        writer.writerow(CSV_COLUMNS)
        for estimate in pipeline.run(iter_sequence_events(sequence, args.topic)):
            writer.writerows(flow_rows(estimate))
            if args.picture_every and written % args.picture_every == 0:
                write_pictures(output, written, pipeline.estimator, estimate)
            written += 1
            counts = pipeline.take(estimate)
            valid += counts.valid
            patches += counts.with_events
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
