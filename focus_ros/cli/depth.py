"""Semi-dense depth maps and point clouds from events and known camera poses.

Reads an Event Camera Dataset folder (events.txt, calib.txt, groundtruth.txt) or a ROS 1 /
ROS 2 bag (events, camera_info, and the camera's poses: a geometry_msgs/PoseStamped or
nav_msgs/Odometry topic, or a robot's TF tree on /tf and /tf_static, the pose of the camera's
frame (--camera-frame, default the events' frame_id) in --world-frame (default the root of its
tree, e.g. odom or map), composed and interpolated as tf2 does) as a stream, cuts it into
keyframes by parallax (a keyframe ends when the camera has travelled a fraction of the scene
depth or turned too far; or every B metres, or at most K events),
builds the DSI of each keyframe's reference view (the pose at the middle of its events, its
planes over the depths the previous keyframe saw) and reads depth from the focus of the
chosen loss on 3x3 patches (or EMVS's max vote). The loop is depth_node's
(focus_ros.pipelines.depth), each keyframe estimated as it is cut.
Writes into OUTPUT, per keyframe NNNN: keyframe_NNNN_depth.npy (float32 m, NaN unknown,
on the undistorted pinhole grid), keyframe_NNNN_depth.png (near red, far blue, over the
event image), keyframe_NNNN_confidence.npy / .png, keyframe_NNNN_points.ply (world
frame, x y z float32 + confidence + depth_sigma, the depth's standard deviation in m); and
points.ply (all keyframes), map.ply (the fused map: the points of points.ply that another
keyframe confirms, within --map-depth-tolerance of their depth, confidence = how many keyframes
agree, depth_sigma; what depth_node publishes on depth/map) and
keyframes.csv (reference time, pose, counts, depth range, timing, warnings).
"""

from __future__ import annotations

import csv
import sys
from pathlib import Path

import numpy as np

from focus_ros.cli import UserError
from focus_ros.cli._output import replaced_on_success
from focus_ros.cli._settings import add_setting_options, settings_from_options
from focus_ros.estimators.depth import DepthSettings
from focus_ros.pipelines.depth import DepthPipeline, DepthPipelineSettings, offline_keyframes, point_depths_m
from focus_ros.poses.transforms import POSE_SOURCES

CSV_COLUMNS = ("keyframe", "t_ref", "px", "py", "pz", "qx", "qy", "qz", "qw", "events", "votes", "points",
               "parallax_px", "pose_batch_error_px", "z_min", "z_max", "seconds", "warning")
#: the fused map.ply's bound on points held: offline, every keyframe's points are kept
OFFLINE_MAP_MAX_POINTS = 100_000_000


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
                                                     "bag (default: the sequence's groundtruth.txt, pose topic or TF)")
    parser.add_argument("--pose-topic", default=None, help="bag pose topic, PoseStamped or Odometry "
                                                          "(default: the only one)")
    parser.add_argument("--pose-source", choices=POSE_SOURCES, default="auto",
                        help="where a bag's poses come from: 'topic' (PoseStamped or Odometry), 'tf' (/tf and "
                             "/tf_static), or 'auto' (default): the pose topic when the bag has one, else its TF; "
                             "TF first when --world-frame or --camera-frame is given")
    parser.add_argument("--world-frame", default=None,
                        help="TF poses: the frame the camera moves in and the outputs are in (default: the root "
                             "of the camera frame's tree, e.g. odom or map)")
    parser.add_argument("--camera-frame", default=None,
                        help="TF poses: the camera's (optical) frame (default: the header frame_id of the bag's "
                             "event messages)")
    parser.add_argument("--time-offset-ms", type=float, default=0.0,
                        help="added to pose times to put them on the events' clock (ms, default 0)")
    parser.add_argument("--camera-from-body", default=None,
                        help="text file with the fixed camera-from-body transform: 16 numbers (4x4, m) or "
                             "7 (px py pz qx qy qz qw); default: the poses are the camera's")
    add_setting_options(parser, DepthSettings)
    add_setting_options(parser, DepthPipelineSettings)
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
                    camera_from_body=None, pose_source: str = "auto", world_frame: str | None = None,
                    camera_frame: str | None = None, event_topic: str | None = None, say=None, warn=None):
    """The trajectory of a sequence, the one place that chooses the poses: ``poses``
    (groundtruth.txt or bag) or the sequence's own (its groundtruth.txt, or its bag's poses).
    A bag's poses: its pose topic or its TF, by ``pose_source`` (see
    :func:`~focus_ros.sources.trajectory_readers.bag_pose_source`); from TF, the pose of
    ``camera_frame`` (default: the frame_id of the sequence's event messages on ``event_topic``)
    in ``world_frame`` (None or '': the root of its tree). ``say``: told in one line where a bag's
    poses came from; ``warn``: of transforms the TF buffer ignored. One-line errors when there are
    no poses."""
    from focus_ros.sources.sequence import ECD, sequence_format
    from focus_ros.sources.trajectory_readers import (
        bag_pose_source, read_bag_tf_trajectory, read_bag_trajectory, read_groundtruth_trajectory)

    say, warn = say or (lambda text: None), warn or (lambda text: None)
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
    if pose_topic is not None and pose_source == "tf":
        raise UserError("--pose-topic names a pose topic: it does not go with --pose-source tf")
    frames_given = world_frame is not None or camera_frame is not None
    chosen = bag_pose_source(source, "topic" if pose_topic is not None else pose_source, prefer_tf=frames_given)
    if chosen == "topic":
        trajectory = read_bag_trajectory(source, pose_topic, camera_from_body, offset_ns)
    else:
        camera_frame = camera_frame or _event_frame(sequence, event_topic)
        trajectory = read_bag_tf_trajectory(source, world_frame or "", camera_frame, camera_from_body, offset_ns,
                                            on_problem=warn)
    say(f"poses from {trajectory.source} ({len(trajectory)} poses)")
    return trajectory


def _event_frame(sequence: Path, event_topic: str | None) -> str:
    """The camera's TF frame: the frame_id of the sequence's first event message; UserError when
    the sequence is no bag or its messages name no frame."""
    from focus_ros.sources.bags import event_frame_id
    from focus_ros.sources.sequence import ECD, sequence_format

    if sequence_format(sequence) == ECD:
        raise UserError(f"{sequence}: events without a frame_id: give --camera-frame for the poses from TF")
    frame = event_frame_id(sequence, event_topic)
    if not frame:
        raise UserError(f"{sequence}: the event messages name no frame (empty header.frame_id): give --camera-frame")
    return frame


def _stderr_line(prefix: str):
    """A function printing one line, ``prefix`` + its text, on stderr."""
    return lambda text: print(prefix + text, file=sys.stderr)


def _distance_colors(points: np.ndarray, origin: np.ndarray) -> np.ndarray:
    """Map colours: near red, far blue by distance (m) from ``origin`` over the 2-98 % range seen."""
    from focus_ros.depth.pictures import depth_colors

    if not len(points):
        return np.empty((0, 3), np.uint8)
    distance = np.linalg.norm(points - origin, axis=1)
    near, far = np.quantile(distance, [0.02, 0.98])
    return depth_colors(distance, max(float(near), 1e-3), max(float(far), float(near) * 1.01 + 1e-3))


def settings_from_arguments(args) -> tuple[DepthSettings, DepthPipelineSettings]:
    """The estimator's and the pipeline's settings of the options; UserError saying which is refused."""
    try:
        depth = settings_from_options(DepthSettings, args)
        pipeline = settings_from_options(DepthPipelineSettings, args,
                                         DepthPipelineSettings(map_max_points=OFFLINE_MAP_MAX_POINTS))
    except ValueError as error:
        raise UserError(str(error).replace("use_polarity on", "--polarity")
                        .replace("use_polarity off", "no --polarity")) from None
    return depth, pipeline


def run(args) -> int:
    from tqdm import tqdm

    from focus_ros.depth.ply import write_ply
    from focus_ros.estimators.depth import DepthEstimator
    from focus_ros.sources.sequence import iter_sequence_events, sequence_calibration

    sequence = Path(args.sequence)
    settings, pipeline_settings = settings_from_arguments(args)
    if args.max_keyframes is not None and args.max_keyframes < 1:
        raise UserError(f"--max-keyframes must be >= 1, got {args.max_keyframes}")
    calibration = sequence_calibration(sequence, args.calib, args.width, args.height, args.topic)
    camera_from_body = _read_transform(args.camera_from_body) if args.camera_from_body else None
    trajectory = load_trajectory(sequence, args.poses, args.pose_topic, args.time_offset_ms, camera_from_body,
                                 args.pose_source, args.world_frame, args.camera_frame, args.topic,
                                 say=None if args.quiet else _stderr_line("focus-ros depth: "),
                                 warn=_stderr_line("focus-ros depth: warning: "))
    estimator = DepthEstimator(calibration, settings)
    pipeline = DepthPipeline(pipeline_settings, settings, calibration=calibration, trajectory=trajectory)
    first_pose_ns, last_pose_ns = trajectory.t_range_ns

    output = Path(args.output)
    output.mkdir(parents=True, exist_ok=True)
    dropped = 0
    with replaced_on_success(output / "keyframes.csv") as keyframes_csv, \
            KeyframeWriter(output, keyframes_csv, not args.no_pictures) as writer, \
            tqdm(unit="ev", unit_scale=True, disable=args.quiet, file=sys.stderr, desc="events") as progress:

        def chunks():
            """The sequence's events as read, counted on the progress bar, trimmed to the poses' span
            with --trim-to-poses."""
            nonlocal dropped
            for chunk in iter_sequence_events(sequence, args.topic, within=calibration):
                progress.update(len(chunk))
                if args.trim_to_poses and len(chunk):
                    inside = (chunk.t >= first_pose_ns) & (chunk.t <= last_pose_ns)
                    dropped += int(len(chunk) - np.count_nonzero(inside))
                    chunk = chunk[inside]
                yield chunk

        # the whole trajectory, not each job's segment: the same poses, and an error naming the whole
        # span the poses cover
        for keyframe in offline_keyframes(pipeline, estimator, trajectory, chunks()):
            writer.write(keyframe, estimator.dsi.votes)
            if keyframe.warning:
                progress.write(f"focus-ros depth: warning: keyframe {writer.written - 1}: {keyframe.warning}",
                               file=sys.stderr)
            progress.set_postfix(keyframes=writer.written, points=writer.total_points)
            if args.max_keyframes is not None and writer.written >= args.max_keyframes:
                break
    map_points, map_support, map_sigma = pipeline.map.points(with_sigma=True)
    origin = trajectory.interpolate([trajectory.t_range_ns[0]])[1][0]
    write_ply(output / "map.ply", map_points, map_support, _distance_colors(map_points, origin), map_sigma)
    if dropped:
        print(f"focus-ros depth: warning: dropped {dropped} events outside the poses' time span", file=sys.stderr)
    if writer.written == 0:
        print(f"focus-ros depth: warning: {sequence} gave no keyframe (fewer than {settings.min_events} events "
              "with poses)", file=sys.stderr)
    if not args.quiet:
        print(f"wrote {writer.written} keyframes ({writer.warnings} without depth), {writer.total_points} points, a "
              f"map of {len(map_points)} points, to {output}", file=sys.stderr)
    return 0


class KeyframeWriter:
    """Writes each keyframe's files (module docstring), its row of keyframes.csv and its points into
    points.ply; counts what it wrote."""

    def __init__(self, output: Path, csv_path: Path, pictures: bool):
        self.output, self.csv_path, self.pictures = output, csv_path, pictures
        self.written = self.total_points = self.warnings = 0

    def __enter__(self) -> "KeyframeWriter":
        from focus_ros.depth.ply import PlyAppender

        self._handle = open(self.csv_path, "w", newline="")
        self._rows = csv.writer(self._handle)
        self._rows.writerow(CSV_COLUMNS)
        self._merged = PlyAppender(self.output / "points.ply", with_colors=True, with_sigma=True).__enter__()
        return self

    def __exit__(self, *exception) -> None:
        try:
            self._merged.__exit__(*exception)
        finally:
            self._handle.close()

    def write(self, keyframe, votes: np.ndarray) -> None:
        """One keyframe's files; ``votes``: the DSI's votes, the pictures' background."""
        from focus_ros.depth.pictures import (depth_colors, depth_picture, event_image, with_confidence_scale,
                                              with_depth_colour_bar, write_png)
        from focus_ros.depth.ply import write_ply
        from focus_ros.events import NANOSECONDS_PER_SECOND
        from focus_ros.poses import matrix_to_quaternion

        output, name = self.output, f"keyframe_{self.written:04d}"
        np.save(output / f"{name}_depth.npy", keyframe.depth_m)
        np.save(output / f"{name}_confidence.npy", keyframe.confidence)
        z_near, z_far = keyframe.z_range_m
        colors = depth_colors(point_depths_m(keyframe), z_near, z_far)
        sigma = keyframe.point_sigma_m  # m; an empty keyframe has none
        sigma = sigma if len(sigma) == keyframe.point_count else np.full(keyframe.point_count, np.nan, np.float32)
        write_ply(output / f"{name}_points.ply", keyframe.points_world, keyframe.point_confidence, colors, sigma)
        self._merged.append(keyframe.points_world, keyframe.point_confidence, colors, sigma)
        if self.pictures:
            write_png(output / f"{name}_depth.png",
                      with_depth_colour_bar(depth_picture(keyframe.depth_m, event_image(votes), z_near, z_far),
                                            z_near, z_far))
            write_png(output / f"{name}_confidence.png", with_confidence_scale(keyframe.confidence))
        pose = keyframe.world_from_camera
        self._rows.writerow([self.written, f"{keyframe.t_ref_ns / NANOSECONDS_PER_SECOND:.9f}",
                             *(f"{v:.6f}" for v in pose[:3, 3]),
                             *(f"{v:.9f}" for v in matrix_to_quaternion(pose[:3, :3])),
                             keyframe.event_count, keyframe.vote_count, keyframe.point_count,
                             f"{keyframe.parallax_px:.2f}", f"{keyframe.pose_batch_error_px:.3f}",
                             f"{z_near:.3f}", f"{z_far:.3f}", f"{keyframe.timing_s.get('total', 0.0):.3f}",
                             keyframe.warning])
        self._handle.flush()
        self.written += 1
        self.total_points += keyframe.point_count
        self.warnings += bool(keyframe.warning)
