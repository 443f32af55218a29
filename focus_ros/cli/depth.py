"""Semi-dense depth maps and point clouds from events and known camera poses.

Reads an Event Camera Dataset folder (events.txt, calib.txt, groundtruth.txt) or a ROS 1 /
ROS 2 bag (events, camera_info, geometry_msgs/PoseStamped or nav_msgs/Odometry poses) as
a stream, cuts it into keyframes by parallax (a keyframe ends when the camera has travelled a
fraction of the scene depth or turned too far; or every B metres, or at most K events),
builds the DSI of each keyframe's reference view (the pose at the middle of its events, its
planes over the depths the previous keyframe saw) and reads depth from the focus of the
chosen loss on 3x3 patches (or EMVS's max vote).
Writes into OUTPUT, per keyframe NNNN: keyframe_NNNN_depth.npy (float32 m, NaN unknown,
on the undistorted pinhole grid), keyframe_NNNN_depth.png (near red, far blue, over the
event image), keyframe_NNNN_confidence.npy / .png, keyframe_NNNN_points.ply (world
frame, x y z float32 + confidence); and points.ply (all keyframes), map.ply (the fused map:
the points of points.ply that another keyframe confirms, within --map-depth-tolerance of their
depth, confidence = how many keyframes agree; what depth_node publishes on depth/map) and
keyframes.csv (reference time, pose, counts, depth range, timing, warnings).
"""

from __future__ import annotations

import csv
import math
import sys
from pathlib import Path

import numpy as np

from focus_ros.cli import UserError
from focus_ros.cli._output import replaced_on_success
from focus_ros.depth.fusion import MAP_DEPTH_TOLERANCE, MAP_MIN_KEYFRAMES, FusedMap
from focus_ros.estimators.depth import (KEYFRAME_BASELINE_FRACTION, KEYFRAME_MAX_EVENTS, KEYFRAME_MAX_ROTATION_DEG,
                                        DepthSettings, KeyframeSelector, depth_method_names)

CSV_COLUMNS = ("keyframe", "t_ref", "px", "py", "pz", "qx", "qy", "qz", "qw", "events", "votes", "points",
               "parallax_px", "pose_batch_error_px", "z_min", "z_max", "seconds", "warning")
_DEFAULTS = DepthSettings()


def add_arguments(parser) -> None:
    parser.add_argument("sequence", help="ECD folder (events.txt, calib.txt, groundtruth.txt), a ROS 1 .bag "
                                         "or a ROS 2 bag folder")
    parser.add_argument("-o", "--output", default="depth_output", help="output folder (default depth_output)")
    parser.add_argument("--calib", help="calib.txt or ROS camera YAML (default: the sequence's own)")
    parser.add_argument("--width", type=int, default=None, help="sensor width for calib.txt (px; default: the "
                                                                "size the bag's event messages declare, else 240)")
    parser.add_argument("--height", type=int, default=None, help="sensor height for calib.txt (px; default: the "
                                                                 "size the bag's event messages declare, else 180)")
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
    parser.add_argument("--z-min", type=float, default=_DEFAULTS.z_min_m,
                        help=f"nearest plane, m; without --fixed-depth-range the nearest the planes may go "
                             f"(default {_DEFAULTS.z_min_m})")
    parser.add_argument("--z-max", type=float, default=_DEFAULTS.z_max_m,
                        help=f"farthest plane, m; without --fixed-depth-range the farthest the planes may go "
                             f"(default {_DEFAULTS.z_max_m})")
    parser.add_argument("--fixed-depth-range", action="store_true",
                        help="planes over --z-min..--z-max for every keyframe (default: over the depths the "
                             "previous keyframe saw, with a margin)")
    parser.add_argument("--patch-size", type=int, default=_DEFAULTS.patch_size_px, help="focus patch side, odd px (default 3)")
    parser.add_argument("--patch-sigma", type=float, default=_DEFAULTS.patch_sigma_px,
                        help="Gaussian sigma of the patch weights, px (default 1)")
    parser.add_argument("--threshold-block", type=int, default=_DEFAULTS.threshold_block_px,
                        help="adaptive threshold window, odd px (default 5)")
    parser.add_argument("--threshold-offset", type=float, default=_DEFAULTS.threshold_offset,
                        help="kept when the confidence rank (0-1) exceeds the local mean rank by this (default 0)")
    parser.add_argument("--min-confidence-rank", type=float, default=_DEFAULTS.min_confidence_rank,
                        help="lowest confidence rank kept among the observed pixels, 0-1 (e.g. 0.8: at most "
                             f"the top 20 %%, the rule before the adaptive threshold); default "
                             f"{_DEFAULTS.min_confidence_rank}: off")
    parser.add_argument("--min-contrast", type=float, default=_DEFAULTS.min_contrast,
                        help="lowest focus contrast kept, relative to the keyframe's median; 0 = off "
                             f"(default {_DEFAULTS.min_contrast:g})")
    parser.add_argument("--max-rival-ratio", type=float, default=_DEFAULTS.max_rival_ratio,
                        help="highest contrast of a second focus peak along the ray, as a share of the best; "
                             f"1 = off (default {_DEFAULTS.max_rival_ratio:g})")
    parser.add_argument("--border-planes", type=int, default=_DEFAULTS.border_planes,
                        help="drop depths peaking this close to the DSI's ends, planes "
                             f"(default {_DEFAULTS.border_planes})")
    parser.add_argument("--support-neighbours", type=int, default=_DEFAULTS.support_neighbours,
                        help="radius outlier removal: neighbours within 2 px and 2 %% of the depth a point needs; "
                             f"0 = off (default {_DEFAULTS.support_neighbours})")
    parser.add_argument("--median", type=int, default=_DEFAULTS.median_filter_px,
                        help="median filter side on the depth map, odd px, 1 = none (default 5)")
    parser.add_argument("--keyframe-events", type=int, default=KEYFRAME_MAX_EVENTS,
                        help=f"most events per keyframe (default {KEYFRAME_MAX_EVENTS})")
    parser.add_argument("--keyframe-baseline-fraction", type=float, default=KEYFRAME_BASELINE_FRACTION,
                        help="keyframes by parallax: a keyframe ends when the camera travelled this fraction of the "
                             "scene depth (the last keyframe's median); 0 = off "
                             f"(default {KEYFRAME_BASELINE_FRACTION:g})")
    parser.add_argument("--keyframe-max-rotation", type=float, default=KEYFRAME_MAX_ROTATION_DEG,
                        help="a keyframe also ends when the camera turned this far, deg; 0 = off "
                             f"(default {KEYFRAME_MAX_ROTATION_DEG:g})")
    parser.add_argument("--keyframe-baseline", type=float, default=None,
                        help="a keyframe ends when the camera has moved this far, m, instead of the fraction of "
                             "the scene depth (default: off)")
    parser.add_argument("--dsi-max-events", type=int, default=_DEFAULTS.dsi_max_events,
                        help="a keyframe with more events votes with every k-th of them (a compute budget); "
                             f"0 = every event (default {_DEFAULTS.dsi_max_events})")
    parser.add_argument("--map-support-neighbours", type=int, default=_DEFAULTS.map_support_neighbours,
                        help="--support-neighbours for the points offered to map.ply (looser: the map keeps only "
                             f"what another keyframe confirms; default {_DEFAULTS.map_support_neighbours})")
    parser.add_argument("--map-depth-tolerance", type=float, default=MAP_DEPTH_TOLERANCE,
                        help="map.ply keeps a point when another keyframe has one within this share of its depth "
                             f"along the ray and a pixel across it (default {MAP_DEPTH_TOLERANCE:g})")
    parser.add_argument("--map-min-keyframes", type=int, default=MAP_MIN_KEYFRAMES,
                        help="keyframes that must agree on a point of map.ply, its own included "
                             f"(default {MAP_MIN_KEYFRAMES}; 1 = every point)")
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
    from focus_ros.sources.sequence import ECD, sequence_format
    from focus_ros.sources.trajectory_readers import read_bag_trajectory, read_groundtruth_trajectory

    offset_ns = int(round(time_offset_ms * 1e6))
    source = Path(poses) if poses is not None else sequence
    if poses is not None and source.is_file() and source.suffix == ".txt":
        return read_groundtruth_trajectory(source, camera_from_body, offset_ns)
    kind = sequence_format(source)
    if kind == ECD:
        folder = source if source.is_dir() else source.parent
        if not (folder / "groundtruth.txt").is_file():
            raise UserError(f"no poses: {folder / 'groundtruth.txt'} not found (give --poses)")
        return read_groundtruth_trajectory(folder, camera_from_body, offset_ns)
    return read_bag_trajectory(source, pose_topic, camera_from_body, offset_ns)


def _distance_colors(points: np.ndarray, origin: np.ndarray) -> np.ndarray:
    """Map colours: near red, far blue by distance (m) from ``origin`` over the 2-98 % range seen."""
    from focus_ros.depth.pictures import depth_colors

    if not len(points):
        return np.empty((0, 3), np.uint8)
    distance = np.linalg.norm(points - origin, axis=1)
    near, far = np.quantile(distance, [0.02, 0.98])
    return depth_colors(distance, max(float(near), 1e-3), max(float(far), float(near) * 1.01 + 1e-3))


def keyframe_selector(args, settings: DepthSettings) -> KeyframeSelector:
    """The keyframe rules of the options: by parallax (default), by a fixed baseline, by events."""
    rotation = math.radians(args.keyframe_max_rotation) if args.keyframe_max_rotation > 0 else None
    fraction = args.keyframe_baseline_fraction if args.keyframe_baseline is None and args.keyframe_baseline_fraction \
        else None
    selector = KeyframeSelector(args.keyframe_events, args.keyframe_baseline, min_events=settings.min_events,
                                max_rotation_rad=rotation, baseline_fraction=fraction)
    # until a keyframe has shown the scene: the geometric middle of the depths searched
    selector.set_scene_depth(math.sqrt(settings.z_min_m * settings.z_max_m))
    return selector


def run(args) -> int:
    from tqdm import tqdm

    from focus_ros.depth.pictures import (depth_colors, depth_picture, event_image, with_confidence_scale,
                                          with_depth_colour_bar, write_png)
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
                                 median_filter_px=args.median, min_contrast=args.min_contrast,
                                 max_rival_ratio=args.max_rival_ratio, border_planes=args.border_planes,
                                 support_neighbours=args.support_neighbours,
                                 map_support_neighbours=args.map_support_neighbours,
                                 auto_depth_range=not args.fixed_depth_range, dsi_max_events=args.dsi_max_events)
        selector = keyframe_selector(args, settings)
        fused_map = FusedMap(args.map_depth_tolerance, args.map_min_keyframes, max_points=100_000_000)
    except ValueError as error:
        raise UserError(str(error).replace("use_polarity on", "--polarity").replace("use_polarity off", "no --polarity")) from None
    if args.max_keyframes is not None and args.max_keyframes < 1:
        raise UserError(f"--max-keyframes must be >= 1, got {args.max_keyframes}")
    calibration = sequence_calibration(sequence, args.calib, args.width, args.height, args.topic)
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
    with replaced_on_success(output / "keyframes.csv") as keyframes_csv, \
            open(keyframes_csv, "w", newline="") as handle, \
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
            depths = keyframe.depth_m[keyframe.pixels[:, 1], keyframe.pixels[:, 0]]
            if len(depths):
                selector.set_scene_depth(float(np.median(depths)))
            fused_map.add(keyframe.map_points_world, keyframe.world_from_camera, 1.0 / calibration.fx)
            z_near, z_far = keyframe.z_range_m
            colors = depth_colors(depths, z_near, z_far)
            write_ply(output / f"{name}_points.ply", keyframe.points_world, keyframe.point_confidence, colors)
            merged.append(keyframe.points_world, keyframe.point_confidence, colors)
            if not args.no_pictures:
                background = event_image(estimator.dsi.votes)
                write_png(output / f"{name}_depth.png",
                          with_depth_colour_bar(depth_picture(keyframe.depth_m, background, z_near, z_far),
                                                z_near, z_far))
                write_png(output / f"{name}_confidence.png", with_confidence_scale(keyframe.confidence))
            pose = keyframe.world_from_camera
            quaternion = matrix_to_quaternion(pose[:3, :3])
            writer.writerow([written, f"{keyframe.t_ref_ns / NANOSECONDS_PER_SECOND:.9f}",
                             *(f"{v:.6f}" for v in pose[:3, 3]), *(f"{v:.9f}" for v in quaternion),
                             keyframe.event_count, keyframe.vote_count, keyframe.point_count,
                             f"{keyframe.parallax_px:.2f}", f"{keyframe.pose_batch_error_px:.3f}",
                             f"{z_near:.3f}", f"{z_far:.3f}",
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
        for chunk in iter_sequence_events(sequence, args.topic, within=calibration):
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
    map_points, map_support = fused_map.points()
    origin = trajectory.interpolate([trajectory.t_range_ns[0]])[1][0]
    write_ply(output / "map.ply", map_points, map_support, _distance_colors(map_points, origin))
    if dropped:
        print(f"focus-ros depth: warning: dropped {dropped} events outside the poses' time span", file=sys.stderr)
    if written == 0:
        print(f"focus-ros depth: warning: {sequence} gave no keyframe (fewer than {settings.min_events} events "
              "with poses)", file=sys.stderr)
    if not args.quiet:
        print(f"wrote {written} keyframes ({warnings} without depth), {total_points} points, a map of "
              f"{len(map_points)} points, to {output}", file=sys.stderr)
    return 0
