"""The depth half of `make demo`: the simulated slider through ``depth_node`` over real topics.

1. simulate the ``slider`` preset (a DAVIS240C sliding right at 0.25 m/s in front of
   textured panels at 0.55–2 m and a wall at 2.3 m, with depth ground truth) and write
   events, camera_info and poses as a ROS 2 bag;
2. start ``depth_node`` as ``ros2 run`` would (entry point, params file);
3. replay the bag onto ROS 2 topics in real time (``focus_ros.ros.replay_node``), collect
   the published ``depth/points`` clouds, the fused ``depth/map`` and ``depth/image_color`` pictures;
4. print the clouds' and the map's depth error against the ground truth
   (``focus_ros.evaluation.depth``) and write
   ``depth_cloud.png`` (a rendered view of all clouds, coloured by depth) and
   ``depth_map.png`` (one keyframe's depth map as the node publishes it, beside the
   ground truth).

``python -m focus_ros.ros.demos --part depth``
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

from focus_ros.camera import Calibration
from focus_ros.events import NANOSECONDS_PER_SECOND
from focus_ros.evaluation.depth import cloud_error_summary, cloud_relative_errors, map_relative_errors
from focus_ros.poses import Trajectory
from focus_ros.ros.demos.session import CONFIG_FOLDER, DemoFailure, node_and_replayer
from focus_ros.sources.depth_maps import DepthGroundTruth

#: the depth range (m) of the picture colours: the engine's default planes (the simulated
#: slider's panels and wall lie at 0.55–2.3 m)
Z_MIN_M, Z_MAX_M = 0.45, 2.4


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


#: the longest wait (s), after the replay, for the last keyframe's cloud and map: generous, for
#: a node that compiles a stage on its first keyframe; a bound, not a pause (the demo goes on as
#: soon as they are in)
FLUSH_TIMEOUT_S = 120.0
#: the topics of the bag the node reads
NODE_INPUTS = ["/dvs/events", "/dvs/camera_info", "/optitrack/davis"]
#: the node's keyframe_flush_idle_s (config/depth_davis240c.yaml): events collected since the last
#: keyframe make one more after this long without events (s)
FLUSH_IDLE_S = 1.0


def run_depth_node_and_replay(args, bag: Path):
    """Start depth_node, wait until it is ready, replay the bag in real time, wait for the last
    keyframe's cloud and map (:func:`wait_for_last_keyframe`), collect clouds, maps and colour
    depth maps."""
    from sensor_msgs.msg import Image, PointCloud2

    params = CONFIG_FOLDER / "depth_davis240c.yaml"
    node_log = args.output / "depth_node.log"
    overrides = [f"keyframe_events:={args.keyframe_events}", "qos_reliability:=reliable",
                 "max_pending_keyframes:=100", f"keyframe_flush_idle_s:={FLUSH_IDLE_S}"]
    command = [str(Path(sys.executable).parent / "depth_node"), "--ros-args", "--params-file", str(params),
               "-r", "events:=/dvs/events", "-r", "pose:=/optitrack/davis"]
    for override in overrides:
        command += ["-p", override]
    print(f"[depth 2/4] starting the node: depth_node --ros-args --params-file {params.name} "
          f"-r events:=/dvs/events -r pose:=/optitrack/davis -p {' -p '.join(overrides)}")
    clouds, maps, pictures = [], [], []
    with node_and_replayer(command, node_log, bag, rate=1.0, name="depth_node") as session:
        session.collector.create_subscription(PointCloud2, "/depth/points", clouds.append, 100)
        session.collector.create_subscription(PointCloud2, "/depth/map", maps.append, 10)
        session.collector.create_subscription(Image, "/depth/image_color", pictures.append, 100)
        session.wait_until_ready(NODE_INPUTS)
        print("[depth 3/4] replaying the bag onto /dvs/events, /dvs/camera_info, /optitrack/davis in real time ...")
        started = time.monotonic()
        session.play()
        published = session.replayer.published_events
        wait_for_last_keyframe(session, clouds, maps, published)
        print(f"      {published:,} events in {time.monotonic() - started:.1f} s, "
              f"{len(clouds)} point clouds back ({keyframes_made(session)})")
    return clouds, maps, pictures, node_log


def stamp_ns(message) -> int:
    return message.header.stamp.sec * NANOSECONDS_PER_SECOND + message.header.stamp.nanosec


#: depth_node's /diagnostics counts of what became of the keyframes it completed
HANDLED_KEYS = ("keyframes_done", "keyframes_dropped", "keyframes_lost", "keyframes_failed")


def wait_for_last_keyframe(session, clouds: list, maps: list, published_events: int,
                           timeout_s: float = FLUSH_TIMEOUT_S) -> float:
    """After the replay: until the last keyframe is flushed and its cloud and the map it updated
    are here. Judged from depth_node's /diagnostics, not from a count of keyframes expected (the
    node cuts keyframes by parallax too, and merges them when busy): it has every event; then,
    FLUSH_IDLE_S later (when the events since its last keyframe make one more), it reports no
    keyframe waiting and every keyframe it completed handled (done, dropped, lost, failed), the
    same in two reports in a row (:meth:`DemoSession.settled`: a merged keyframe waits up to
    0.1 s to be queued); and this process has as many clouds as it published, the last map
    stamped as the last cloud. DemoFailure saying what was missing after ``timeout_s`` (s)."""
    all_in: dict = {}

    def maps_caught_up() -> bool:
        return not clouds or (bool(maps) and stamp_ns(maps[-1]) == stamp_ns(clouds[-1]))

    def snapshot():
        received, pending, completed, published = (session.count(key) for key in (
            "events_received", "keyframes_pending", "keyframes_completed", "keyframes_published"))
        handled = [session.count(key) for key in HANDLED_KEYS]
        if None in (received, pending, completed, published, *handled) or received < published_events:
            return None
        all_in.setdefault("s", time.monotonic())  # the node had every event when it sent this report
        if (time.monotonic() - all_in["s"] < FLUSH_IDLE_S + 0.5 or pending or completed != sum(handled)
                or published != len(clouds) or not maps_caught_up()):
            return None
        return completed, tuple(handled), published

    def missing() -> str:
        counts = ", ".join(f"{key} {session.values.get(key, '?')}" for key in
                           ("events_received", "keyframes_completed", "keyframes_pending", *HANDLED_KEYS,
                            "keyframes_published"))
        last_map = "" if maps_caught_up() else ", the map of the last cloud missing"
        return (f"{len(clouds)} point clouds back {timeout_s:.0f} s after the replay of {published_events:,} "
                f"events{last_map} (depth_node: {counts})")

    return session.spin_until(session.settled(snapshot, quiet_s=0.0), timeout_s, missing, "after the replay")


def keyframes_made(session) -> str:
    """What depth_node says it made of the stream, from its latest report: 'of N keyframes
    depth_node made' and, those not zero, how many were merged, had no depth, were dropped, lost
    or failed."""
    keys = ("keyframes_merged", "keyframes_without_depth", "keyframes_dropped", "keyframes_lost", "keyframes_failed")
    said = [f"{key.split('_', 1)[1].replace('_', ' ')} {session.values[key]}" for key in keys
            if session.values.get(key, "0") != "0"]
    return (f"of {session.values.get('keyframes_offered', '?')} keyframes depth_node made"
            + (f"; {', '.join(said)}" if said else ""))


def report(args, recording, clouds, maps, pictures, node_log) -> int:
    from focus_ros.evaluation.depth_report import plot_cloud  # matplotlib: only when there is something to draw
    from focus_ros.ros import depth_messages

    if not clouds:
        raise DemoFailure("no point cloud came back from depth_node", node_log)
    ground_truth = DepthGroundTruth.from_recording(recording)
    trajectory = Trajectory.from_poses(recording.poses)
    all_points, all_depths, all_errors, stamps = [], [], [], []
    for cloud in clouds:
        fields = depth_messages.decode_point_cloud(cloud)
        points = np.column_stack([fields["x"], fields["y"], fields["z"]])
        t_ref_ns = stamp_ns(cloud)
        all_errors.append(cloud_relative_errors(points, t_ref_ns, ground_truth, trajectory, recording.calibration))
        stamps.append(t_ref_ns)
        all_points.append(points)
        all_depths.append(fields["depth"])
    summary = cloud_error_summary(np.concatenate(all_errors))
    print(f"[depth 4/4] depth error against ground truth over {len(clouds)} keyframes (at most "
          f"{args.keyframe_events:,} events each): median relative error "
          f"{100 * summary['median_relative_error']:.2f} %, "
          f"{100 * summary['within_5_percent']:.1f} % of points within 5 %, {summary['points']:,} points")
    if maps:  # the last map holds every point the keyframes agree on so far
        fields = depth_messages.decode_point_cloud(maps[-1])
        map_points = np.column_stack([fields["x"], fields["y"], fields["z"]])
        fused = cloud_error_summary(map_relative_errors(map_points, stamps, ground_truth, trajectory,
                                                        recording.calibration))
        print(f"      fused map (depth/map, points another keyframe confirms): median relative error "
              f"{100 * fused['median_relative_error']:.2f} %, {100 * fused['within_5_percent']:.1f} % of points "
              f"within 5 %, {fused['points']:,} points")
    cloud_picture = args.output / "depth_cloud.png"
    map_picture = args.output / "depth_map.png"
    middle_ns = stamps[len(stamps) // 2]
    plot_cloud(np.concatenate(all_points), np.concatenate(all_depths), trajectory.world_from_camera(middle_ns),
               cloud_picture, Z_MIN_M, Z_MAX_M,
               "depth_node point clouds, world frame, seen from beside the camera's path")
    write_depth_map_picture(pictures, ground_truth, recording.calibration, map_picture)
    print(f"      rendered point cloud (world frame, coloured by depth): {cloud_picture}")
    print(f"      depth map of one keyframe as published on depth/image_color, beside the ground truth: {map_picture}")
    print(f"      node log: {node_log}")
    return 0


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
    """Simulate, replay through the node, report; 0 when clouds came back (DemoFailure, one line,
    otherwise)."""
    bag, recording = simulate_slider(args)
    clouds, maps, pictures, node_log = run_depth_node_and_replay(args, bag)
    return report(args, recording, clouds, maps, pictures, node_log)
