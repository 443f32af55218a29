"""The depth half of `make demo`: the simulated slider through ``depth_node`` over real topics.

1. simulate the ``slider`` preset (a DAVIS240C sliding right at 0.25 m/s in front of
   textured panels at 0.55–2 m and a wall at 2.3 m, with depth ground truth) and write
   events, camera_info and poses as a ROS 2 bag;
2. start ``depth_node`` as ``ros2 run`` would (entry point, params file);
3. replay the bag onto ROS 2 topics in real time (``focus_ros.ros.replay_node``), collect
   the published ``depth/points`` clouds and ``depth/image_color`` pictures;
4. print the clouds' depth error against the ground truth and write
   ``depth_cloud.png`` (a rendered view of all clouds, coloured by depth) and
   ``depth_map.png`` (one keyframe's depth map as the node publishes it, beside the
   ground truth).

``python -m focus_ros.ros.demo --part depth``
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

from focus_ros.camera import Calibration
from focus_ros.events import NANOSECONDS_PER_SECOND
from focus_ros.poses import Trajectory
from focus_ros.sources.depth_maps import DepthGroundTruth

#: the depth range (m) of the picture colours: the engine's default planes (the simulated
#: slider's panels and wall lie at 0.55–2.3 m)
Z_MIN_M, Z_MAX_M = 0.45, 2.4


def cloud_depth_errors(points_world: np.ndarray, t_ref_ns: int, ground_truth: DepthGroundTruth,
                       trajectory: Trajectory, calibration: Calibration) -> np.ndarray:
    """Relative depth error |Z − Z_true| / Z_true of each world point (M, 3) m, as the depth
    evaluation counts it (:func:`focus_ros.evaluation.depth.relative_errors`: ground truth
    resampled onto the undistorted grid, a point on a depth edge right for either side).

    A published cloud's reference time lies between ground-truth maps (every 20 ms), so the
    points are seen from the camera of the map nearest to ``t_ref_ns`` (its pose at that
    map's time: exact, no interpolation between maps): Z is their depth along that camera's
    optical axis, their pixel the pinhole projection. NaN for points outside that view or
    without ground truth.
    """
    from focus_ros.evaluation.depth import ground_truth_on_reference_grid, relative_errors

    index = ground_truth.nearest_index(int(t_ref_ns))
    world_from_camera = trajectory.world_from_camera(int(ground_truth.t[index]))
    camera = (np.asarray(points_world, np.float64) - world_from_camera[:3, 3]) @ world_from_camera[:3, :3]
    errors = np.full(len(camera), np.nan)
    in_front = np.flatnonzero(camera[:, 2] > 1e-6)
    pixels = np.round(calibration.project(camera[in_front], distort=False)).astype(np.int64)
    inside = ((pixels[:, 0] >= 0) & (pixels[:, 0] < calibration.width) &
              (pixels[:, 1] >= 0) & (pixels[:, 1] < calibration.height))
    truth = ground_truth_on_reference_grid(ground_truth.depth_m[index], calibration)
    errors[in_front[inside]], _ = relative_errors(camera[in_front[inside], 2], pixels[inside], truth)
    return errors


def error_summary(errors: np.ndarray) -> dict:
    """median relative error, share within 5 % (of the points with ground truth), points."""
    known = errors[np.isfinite(errors)]
    return {"points": int(len(errors)), "with_ground_truth": int(len(known)),
            "median_relative_error": float(np.median(known)) if len(known) else float("nan"),
            "within_5_percent": float(np.mean(known < 0.05)) if len(known) else float("nan")}


def expected_keyframes(event_count: int, keyframe_events: int, min_events: int = 1000) -> int:
    """Keyframes of a stream cut every ``keyframe_events`` events, the rest (≥ min_events)
    making one more at the end (``focus-ros depth``, and depth_node once the stream idles)."""
    return event_count // keyframe_events + (1 if event_count % keyframe_events >= min_events else 0)


def simulate_slider(args):
    from focus_ros.sources.bags import write_bag
    from focus_ros.sources.simulator import simulate_preset

    bag = args.output / "slider.mcap_bag"
    print(f"[depth 1/4] simulating {args.slider_duration} s of a DAVIS240C sliding at 0.25 m/s in front of "
          "textured panels at 0.55-2.3 m ...")
    started = time.monotonic()
    recording = simulate_preset("slider", duration_s=args.slider_duration, seed=args.seed)
    print(f"      {len(recording.events):,} events, {len(recording.poses):,} poses, "
          f"{len(recording.depth_times)} ground-truth depth maps, {time.monotonic() - started:.1f} s wall")
    if bag.exists():
        import shutil
        shutil.rmtree(bag)
    ground_truth = (recording.depth_times, recording.depth_maps)
    recording.depth_times = recording.depth_maps = None   # the bag carries what a robot has: no ground truth
    write_bag(bag, recording, version=2, storage="mcap")
    recording.depth_times, recording.depth_maps = ground_truth
    print(f"      written as a ROS 2 bag (events, camera_info, poses): {bag}")
    return bag, recording


def run_depth_node_and_replay(args, bag: Path, expected: int):
    """Start depth_node, replay the bag in real time, collect clouds and colour depth maps."""
    from sensor_msgs.msg import Image, PointCloud2

    from focus_ros.ros.demo import node_and_replayer

    params = Path(__file__).resolve().parents[2] / "config" / "depth_davis240c.yaml"
    node_log = args.output / "depth_node.log"
    overrides = [f"keyframe_events:={args.keyframe_events}", "qos_reliability:=reliable",
                 "max_pending_keyframes:=100"]
    command = [str(Path(sys.executable).parent / "depth_node"), "--ros-args", "--params-file", str(params),
               "-r", "events:=/dvs/events", "-r", "pose:=/optitrack/davis"]
    for override in overrides:
        command += ["-p", override]
    print(f"[depth 2/4] starting the node: depth_node --ros-args --params-file {params.name} "
          f"-r events:=/dvs/events -r pose:=/optitrack/davis -p {' -p '.join(overrides)}")
    clouds, pictures = [], []
    with node_and_replayer(command, node_log, bag, rate=1.0) as (collector, replayer, executor):
        collector.create_subscription(PointCloud2, "/depth/points", clouds.append, 100)
        collector.create_subscription(Image, "/depth/image_color", pictures.append, 100)
        print("[depth 3/4] replaying the bag onto /dvs/events, /dvs/camera_info, /optitrack/davis in real time ...")
        started = time.monotonic()
        replayer.play(executor)
        deadline = time.monotonic() + 30.0   # the last keyframes: computed, then flushed after 1 s idle
        while len(clouds) < expected and time.monotonic() < deadline:
            executor.spin_once(timeout_sec=0.1)
        print(f"      {replayer.published_events:,} events in {time.monotonic() - started:.1f} s, "
              f"{len(clouds)} point clouds back (of {expected} keyframes)")
    return clouds, pictures, node_log


def report(args, recording, clouds, pictures, node_log) -> int:
    from focus_ros.ros import depth_messages

    if not clouds:
        print(f"no point cloud came back from depth_node: see {node_log}")
        return 1
    ground_truth = DepthGroundTruth.from_recording(recording)
    trajectory = Trajectory.from_poses(recording.poses)
    all_points, all_depths, all_errors, stamps = [], [], [], []
    for cloud in clouds:
        fields = depth_messages.decode_point_cloud(cloud)
        points = np.column_stack([fields["x"], fields["y"], fields["z"]])
        t_ref_ns = cloud.header.stamp.sec * NANOSECONDS_PER_SECOND + cloud.header.stamp.nanosec
        all_errors.append(cloud_depth_errors(points, t_ref_ns, ground_truth, trajectory, recording.calibration))
        stamps.append(t_ref_ns)
        all_points.append(points)
        all_depths.append(fields["depth"])
    summary = error_summary(np.concatenate(all_errors))
    print(f"[depth 4/4] depth error against ground truth over {len(clouds)} keyframes of "
          f"{args.keyframe_events:,} events: median relative error {100 * summary['median_relative_error']:.2f} %, "
          f"{100 * summary['within_5_percent']:.1f} % of points within 5 %, {summary['points']:,} points")
    cloud_picture = args.output / "depth_cloud.png"
    map_picture = args.output / "depth_map.png"
    middle_ns = stamps[len(stamps) // 2]
    write_cloud_picture(np.concatenate(all_points), np.concatenate(all_depths),
                        trajectory.world_from_camera(middle_ns), cloud_picture)
    write_depth_map_picture(pictures, ground_truth, recording.calibration, map_picture)
    print(f"      rendered point cloud (world frame, coloured by depth): {cloud_picture}")
    print(f"      depth map of one keyframe as published on depth/image_color, beside the ground truth: {map_picture}")
    print(f"      node log: {node_log}")
    return 0


def write_cloud_picture(points: np.ndarray, depth_m: np.ndarray, world_from_reference: np.ndarray,
                        path: Path) -> None:
    """All clouds (world frame, m) seen by a virtual camera turned about the middle keyframe's
    view (the depth evaluation's rendering), near red, far blue."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from focus_ros.depth.pictures import depth_colors
    from focus_ros.evaluation.depth_report import render_cloud

    picture = render_cloud(points, depth_colors(depth_m, Z_MIN_M, Z_MAX_M), world_from_reference,
                           size=(360, 480))
    figure, axes = plt.subplots(figsize=(8, 6))
    axes.imshow(picture)
    axes.axis("off")
    axes.set_title(f"depth_node point clouds, world frame, seen from beside the camera's path\n"
                   f"({len(points):,} points; red {Z_MIN_M} m ... blue {Z_MAX_M} m)")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def write_depth_map_picture(pictures, ground_truth: DepthGroundTruth, calibration: Calibration, path: Path) -> None:
    """The middle keyframe's depth/image_color beside the ground-truth depth map nearest its time."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from focus_ros.depth.pictures import depth_picture

    figure, axes = plt.subplots(1, 2, figsize=(10, 4))
    if pictures:
        message = pictures[len(pictures) // 2]
        rgb = np.frombuffer(bytes(message.data), np.uint8).reshape(message.height, message.width, 3)
        t_ns = message.header.stamp.sec * NANOSECONDS_PER_SECOND + message.header.stamp.nanosec
        axes[0].imshow(rgb)
        axes[0].set_title(f"depth_node, depth/image_color at {t_ns / 1e9:.2f} s")
        truth = ground_truth.depth_m[ground_truth.nearest_index(t_ns)]
        axes[1].imshow(depth_picture(np.where(np.isfinite(truth), truth, np.nan), None, Z_MIN_M, Z_MAX_M))
        axes[1].set_title("ground truth (simulator, distorted sensor grid)")
    for ax in axes:
        ax.axis("off")
    figure.suptitle(f"Semi-dense depth, red {Z_MIN_M} m ... blue {Z_MAX_M} m")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def run(args) -> int:
    bag, recording = simulate_slider(args)
    expected = expected_keyframes(len(recording.events), args.keyframe_events)
    clouds, pictures, node_log = run_depth_node_and_replay(args, bag, expected)
    return report(args, recording, clouds, pictures, node_log)
