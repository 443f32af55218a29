"""Semi-dense depth maps and point clouds from events and known camera poses.

Reads an Event Camera Dataset folder (events.txt, calib.txt, groundtruth.txt) or a ROS 1 /
ROS 2 bag (events, camera_info, geometry_msgs/PoseStamped or nav_msgs/Odometry poses) as
a stream, cuts it into keyframes (every K events or every B metres of camera travel),
builds the DSI of each keyframe's reference view (the pose at the middle of its events)
and reads depth from the focus of the chosen loss on 3x3 patches (or EMVS's max vote).
Writes into OUTPUT, per keyframe NNNN: keyframe_NNNN_depth.npy (float32 m, NaN unknown,
on the undistorted pinhole grid), keyframe_NNNN_depth.png (near red, far blue, over the
event image), keyframe_NNNN_confidence.npy / .png, keyframe_NNNN_points.ply (world
frame, x y z float32 + confidence); and points.ply (all keyframes) and keyframes.csv
(reference time, pose, counts, timing, warnings).
"""

from __future__ import annotations

import csv
import sys
from pathlib import Path

import numpy as np

from focus_ros.cli import UserError
from focus_ros.estimators.depth import DepthSettings, KeyframeSelector, depth_method_names

CSV_COLUMNS = ("keyframe", "t_ref", "px", "py", "pz", "qx", "qy", "qz", "qw", "events", "votes", "points",
               "parallax_px", "pose_batch_error_px", "seconds", "warning")
_DEFAULTS = DepthSettings()


def add_arguments(parser) -> None:
    parser.add_argument("sequence", help="ECD folder (events.txt, calib.txt, groundtruth.txt), a ROS 1 .bag "
                                         "or a ROS 2 bag folder")
    parser.add_argument("-o", "--output", default="depth_output", help="output folder (default depth_output)")
    parser.add_argument("--calib", help="calib.txt or ROS camera YAML (default: the sequence's own)")
    parser.add_argument("--width", type=int, default=240, help="sensor width for calib.txt (px, default 240)")
    parser.add_argument("--height", type=int, default=180, help="sensor height for calib.txt (px, default 180)")
    parser.add_argument("--topic", default=None, help="bag event topic (default: found by message type)")
    parser.add_argument("--poses", default=None, help="poses: a groundtruth.txt (t px py pz qx qy qz qw) or a "
                                                     "bag (default: the sequence's groundtruth.txt or pose topic)")
    parser.add_argument("--pose-topic", default=None, help="bag pose topic, PoseStamped or Odometry "
                                                          "(default: the only one)")
    parser.add_argument("--time-offset-ms", type=float, default=0.0,
                        help="added to pose times to put them on the events' clock (ms, default 0)")
    parser.add_argument("--camera-from-body", default=None,
                        help="text file with the fixed camera-from-body transform: 16 numbers (4x4, m) or "
                             "7 (px py pz qx qy qz qw); default: the poses are the camera's")
    parser.add_argument("--loss", default=_DEFAULTS.loss, metavar="LOSS",
                        help=f"focus loss on the patches, or max_vote (EMVS baseline); default {_DEFAULTS.loss}; "
                             f"one of: {', '.join(depth_method_names())}")
    parser.add_argument("--polarity", action="store_true", help="votes carry the polarity (+-1)")
    parser.add_argument("--planes", type=int, default=_DEFAULTS.planes, help=f"depth planes (default {_DEFAULTS.planes})")
    parser.add_argument("--z-min", type=float, default=_DEFAULTS.z_min_m, help=f"nearest plane, m (default {_DEFAULTS.z_min_m})")
    parser.add_argument("--z-max", type=float, default=_DEFAULTS.z_max_m, help=f"farthest plane, m (default {_DEFAULTS.z_max_m})")
    parser.add_argument("--patch-size", type=int, default=_DEFAULTS.patch_size_px, help="focus patch side, odd px (default 3)")
    parser.add_argument("--patch-sigma", type=float, default=_DEFAULTS.patch_sigma_px,
                        help="Gaussian sigma of the patch weights, px (default 1)")
    parser.add_argument("--threshold-block", type=int, default=_DEFAULTS.threshold_block_px,
                        help="adaptive threshold window, odd px (default 5)")
    parser.add_argument("--threshold-offset", type=float, default=_DEFAULTS.threshold_offset,
                        help="kept when the confidence rank (0-1) exceeds the local mean rank by this (default 0)")
    parser.add_argument("--min-confidence-rank", type=float, default=_DEFAULTS.min_confidence_rank,
                        help="lowest confidence rank kept among the observed pixels, 0-1 "
                             f"(default {_DEFAULTS.min_confidence_rank}: at most the top 20 %%)")
    parser.add_argument("--median", type=int, default=_DEFAULTS.median_filter_px,
                        help="median filter side on the depth map, odd px, 1 = none (default 5)")
    parser.add_argument("--keyframe-events", type=int, default=1_000_000,
                        help="events per keyframe (default 1000000)")
    parser.add_argument("--keyframe-baseline", type=float, default=None,
                        help="also end a keyframe when the camera has moved this far, m (default: off)")
    parser.add_argument("--trim-to-poses", action="store_true",
                        help="drop events outside the poses' time span instead of stopping with an error")
    parser.add_argument("--max-keyframes", type=int, default=None, help="stop after this many keyframes")
    parser.add_argument("--no-pictures", action="store_true", help="write no PNG pictures")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")


def _read_transform(path) -> np.ndarray:
    from focus_ros.poses import pose_matrix, quaternion_to_matrix

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"camera-from-body file not found: {path}")
    try:
        values = np.array(path.read_text().split(), dtype=np.float64)
    except ValueError:
        raise UserError(f"{path}: camera-from-body must be numbers") from None
    if values.size == 16:
        return values.reshape(4, 4)
    if values.size == 7:
        quaternion = values[3:] / np.linalg.norm(values[3:])
        return pose_matrix(quaternion_to_matrix(quaternion), values[:3])
    raise UserError(f"{path}: camera-from-body needs 16 numbers (4x4) or 7 (px py pz qx qy qz qw), "
                    f"found {values.size}")


def load_trajectory(sequence: Path, poses=None, pose_topic=None, time_offset_ms: float = 0.0,
                    camera_from_body=None):
    """The trajectory of a sequence: ``poses`` (groundtruth.txt or bag) or the sequence's
    own (its groundtruth.txt, or its bag pose topic). One-line errors when there is none."""
    from focus_ros.poses import Trajectory
    from focus_ros.sources.sequence import ECD, sequence_format

    offset_ns = int(round(time_offset_ms * 1e6))
    source = Path(poses) if poses is not None else sequence
    if poses is not None and source.is_file() and source.suffix == ".txt":
        return Trajectory.from_groundtruth(source, camera_from_body, offset_ns)
    kind = sequence_format(source)
    if kind == ECD:
        folder = source if source.is_dir() else source.parent
        if not (folder / "groundtruth.txt").is_file():
            raise UserError(f"no poses: {folder / 'groundtruth.txt'} not found (give --poses)")
        return Trajectory.from_groundtruth(folder, camera_from_body, offset_ns)
    return Trajectory.from_bag(source, pose_topic, camera_from_body, offset_ns)


def run(args) -> int:
    from tqdm import tqdm

    from focus_ros.depth.pictures import confidence_picture, depth_colors, depth_picture, event_image, write_png
    from focus_ros.depth.ply import PlyAppender, write_ply
    from focus_ros.estimators.depth import DepthEstimator
    from focus_ros.events import NANOSECONDS_PER_SECOND
    from focus_ros.poses import matrix_to_quaternion
    from focus_ros.sources.sequence import iter_sequence_events, sequence_calibration

    sequence = Path(args.sequence)
    method = "max_vote" if args.loss == "max_vote" else "focus"
    loss = _DEFAULTS.loss if method == "max_vote" else args.loss
    try:
        settings = DepthSettings(loss=loss, use_polarity=args.polarity, method=method, planes=args.planes,
                                 z_min_m=args.z_min, z_max_m=args.z_max, patch_size_px=args.patch_size,
                                 patch_sigma_px=args.patch_sigma, threshold_block_px=args.threshold_block,
                                 threshold_offset=args.threshold_offset,
                                 min_confidence_rank=args.min_confidence_rank,
                                 median_filter_px=args.median)
        selector = KeyframeSelector(args.keyframe_events, args.keyframe_baseline, min_events=settings.min_events)
    except ValueError as error:
        raise UserError(str(error).replace("use_polarity on", "--polarity").replace("use_polarity off", "no --polarity")) from None
    if args.max_keyframes is not None and args.max_keyframes < 1:
        raise UserError(f"--max-keyframes must be >= 1, got {args.max_keyframes}")
    calibration = sequence_calibration(sequence, args.calib, args.width, args.height)
    camera_from_body = _read_transform(args.camera_from_body) if args.camera_from_body else None
    trajectory = load_trajectory(sequence, args.poses, args.pose_topic, args.time_offset_ms, camera_from_body)
    estimator = DepthEstimator(calibration, settings)
    first_pose_ns, last_pose_ns = trajectory.t_range_ns

    output = Path(args.output)
    output.mkdir(parents=True, exist_ok=True)
    written = 0
    dropped = 0
    total_points = 0
    warnings = 0
    with open(output / "keyframes.csv", "w", newline="") as handle, \
            PlyAppender(output / "points.ply", with_colors=True) as merged, \
            tqdm(unit="ev", unit_scale=True, disable=args.quiet, file=sys.stderr, desc="events") as progress:
        writer = csv.writer(handle)
        writer.writerow(CSV_COLUMNS)

        def process(events) -> bool:
            nonlocal written, total_points, warnings
            keyframe = estimator.estimate(events, trajectory)
            name = f"keyframe_{written:04d}"
            np.save(output / f"{name}_depth.npy", keyframe.depth_m)
            np.save(output / f"{name}_confidence.npy", keyframe.confidence)
            colors = depth_colors(keyframe.depth_m[keyframe.pixels[:, 1], keyframe.pixels[:, 0]],
                                  settings.z_min_m, settings.z_max_m)
            write_ply(output / f"{name}_points.ply", keyframe.points_world, keyframe.point_confidence, colors)
            merged.append(keyframe.points_world, keyframe.point_confidence, colors)
            if not args.no_pictures:
                background = event_image(estimator.dsi.votes)
                write_png(output / f"{name}_depth.png",
                          depth_picture(keyframe.depth_m, background, settings.z_min_m, settings.z_max_m))
                write_png(output / f"{name}_confidence.png", confidence_picture(keyframe.confidence))
            pose = keyframe.world_from_camera
            quaternion = matrix_to_quaternion(pose[:3, :3])
            writer.writerow([written, f"{keyframe.t_ref_ns / NANOSECONDS_PER_SECOND:.9f}",
                             *(f"{v:.6f}" for v in pose[:3, 3]), *(f"{v:.9f}" for v in quaternion),
                             keyframe.event_count, keyframe.vote_count, keyframe.point_count,
                             f"{keyframe.parallax_px:.2f}", f"{keyframe.pose_batch_error_px:.3f}",
                             f"{keyframe.timing_s.get('total', 0.0):.3f}", keyframe.warning])
            handle.flush()
            if keyframe.warning:
                warnings += 1
                progress.write(f"focus-ros depth: warning: keyframe {written}: {keyframe.warning}", file=sys.stderr)
            written += 1
            total_points += keyframe.point_count
            progress.set_postfix(keyframes=written, points=total_points)
            return args.max_keyframes is not None and written >= args.max_keyframes

        finished = False
        for chunk in iter_sequence_events(sequence, args.topic):
            progress.update(len(chunk))
            if args.trim_to_poses and len(chunk):
                inside = (chunk.t >= first_pose_ns) & (chunk.t <= last_pose_ns)
                dropped += int(len(chunk) - np.count_nonzero(inside))
                chunk = chunk[inside]
            for events in selector.push(chunk, trajectory):
                if process(events):
                    finished = True
                    break
            if finished:
                break
        if not finished:
            rest = selector.flush()
            if rest is not None:
                process(rest)
    if dropped:
        print(f"focus-ros depth: warning: dropped {dropped} events outside the poses' time span", file=sys.stderr)
    if written == 0:
        print(f"focus-ros depth: warning: {sequence} gave no keyframe (fewer than {settings.min_events} events "
              "with poses)", file=sys.stderr)
    if not args.quiet:
        print(f"wrote {written} keyframes ({warnings} without depth), {total_points} points, to {output}",
              file=sys.stderr)
    return 0
