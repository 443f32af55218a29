"""`make demo`: the whole system on embedded defaults, in about two minutes.

Angular velocity:

1. simulate a short DAVIS240C rotation sequence with ground truth (the simulator's
   ``rotation_short`` preset) and write it as a ROS 2 bag (mcap);
2. start ``angular_velocity_node`` as ``ros2 run`` would (entry point, params file);
3. replay the bag onto ROS 2 topics at the estimator's pace, collect the published
   ``TwistStamped`` angular velocities;
4. print the RMS error per axis against the ground truth, and write a plot of estimate
   vs ground truth and an image of warped events before/after compensation.

Depth:

5. simulate the ``slider`` preset (camera sliding at 0.25 m/s in front of panels, with
   depth ground truth) and write it as a ROS 2 bag (events, camera_info, poses);
6. start ``depth_node`` as ``ros2 run`` would;
7. replay the bag onto ROS 2 topics in real time, collect the published point clouds
   (``depth/points``) and depth maps (``depth/image_color``);
8. print the clouds' depth error against the ground truth (median relative error, share
   within 5 %, points) and write a rendered view of the clouds and a depth map picture.

    python -m focus_ros.ros.demo [--part all|rotation|depth] [--duration 1.5] [--output demo_output]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from focus_ros.events import NANOSECONDS_PER_SECOND


def parse_arguments(argv=None):
    parser = argparse.ArgumentParser(prog="focus_ros demo", description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=float, default=1.5, help="simulated seconds (default 1.5)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--loss", default="variance", help="focus loss (default variance)")
    parser.add_argument("--output", type=Path, default=Path("demo_output"), help="output folder")
    parser.add_argument("--part", choices=("all", "rotation", "depth"), default="all",
                        help="angular velocity, depth or both (default)")
    parser.add_argument("--slider-duration", type=float, default=2.0, help="simulated seconds of the slider (default 2)")
    parser.add_argument("--keyframe-events", type=int, default=300_000,
                        help="events per depth keyframe (default 300000: ~0.75 s, 0.19 m of the simulated slider)")
    return parser.parse_args(argv)


def ros_environment() -> dict:
    """This process's environment for ROS 2 on loopback, in a domain of the demo's own
    (the nodes it starts get the same)."""
    environment = dict(os.environ)
    environment.setdefault("ROS_DOMAIN_ID", str(60 + os.getpid() % 40))
    environment.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    os.environ.update({key: environment[key] for key in ("ROS_DOMAIN_ID", "ROS_AUTOMATIC_DISCOVERY_RANGE")})
    return environment


def simulate(args) -> tuple[Path, object]:
    from focus_ros.sources.bags import write_bag
    from focus_ros.sources.simulator import simulate_preset

    bag = args.output / "rotation_short.mcap_bag"
    print(f"[1/4] simulating {args.duration} s of a DAVIS240C rotating in a textured room (seed {args.seed}) ...")
    started = time.monotonic()
    recording = simulate_preset("rotation_short", duration_s=args.duration, seed=args.seed)
    peak = np.degrees(np.abs(recording.imu.angular_velocity).max())
    print(f"      {len(recording.events):,} events, peak |ω| {peak:.0f} deg/s, "
          f"{time.monotonic() - started:.1f} s wall")
    if bag.exists():
        import shutil
        shutil.rmtree(bag)
    write_bag(bag, recording, version=2, storage="mcap")
    print(f"      written as a ROS 2 bag: {bag}")
    return bag, recording


@contextlib.contextmanager
def node_and_replayer(command: list[str], log_path: Path, bag: Path, rate: float):
    """Start a node as ``ros2 run`` would (``command``, output to ``log_path``) and, in this
    process, a collector node and a bag replayer (``rate``: 0 = at the estimator's pace) on
    one executor; yields (collector, replayer, executor); stops the node and ROS after."""
    import rclpy
    from rclpy.executors import SingleThreadedExecutor

    from focus_ros.ros.replay_node import BagReplayer

    environment = ros_environment()
    with open(log_path, "wb") as log:
        process = subprocess.Popen(command, env=environment, stdout=log, stderr=subprocess.STDOUT)
        rclpy.init()
        try:
            collector = rclpy.create_node("focus_ros_demo")
            replayer = BagReplayer(bag=str(bag), rate=rate)
            executor = SingleThreadedExecutor()
            executor.add_node(collector)
            executor.add_node(replayer)
            yield collector, replayer, executor
        finally:
            process.terminate()
            process.wait(timeout=10)
            rclpy.try_shutdown()


def run_node_and_replay(args, bag: Path):
    """Start the node in a subprocess, replay the bag paced by its estimates, collect them."""
    from geometry_msgs.msg import TwistStamped

    share = Path(__file__).resolve().parents[2] / "config" / "davis240c.yaml"
    node_log = args.output / "angular_velocity_node.log"
    executable = Path(sys.executable).parent / "angular_velocity_node"
    command = [str(executable), "--ros-args", "--params-file", str(share), "-r", "events:=/dvs/events",
               "-p", f"loss:={args.loss}", "-p", "qos_reliability:=reliable", "-p", "queue_policy:=all"]
    print(f"[2/4] starting the node: angular_velocity_node --ros-args --params-file {share.name} "
          f"-r events:=/dvs/events -p loss:={args.loss} -p queue_policy:=all")
    estimates = []
    with node_and_replayer(command, node_log, bag, rate=0.0) as (collector, replayer, executor):
        collector.create_subscription(TwistStamped, "/angular_velocity", estimates.append, 1000)
        print("[3/4] replaying the bag onto /dvs/events, /dvs/imu, /dvs/camera_info at the estimator's pace ...")
        started = time.monotonic()
        replayer.play(executor)
        wall = time.monotonic() - started
        print(f"      {replayer.published_events:,} events in {wall:.1f} s "
              f"({replayer.published_events / wall / 1e6:.2f} Mev/s through ROS), {len(estimates)} estimates")
    t_ns = np.array([m.header.stamp.sec * NANOSECONDS_PER_SECOND + m.header.stamp.nanosec for m in estimates])
    omega = np.array([[m.twist.angular.x, m.twist.angular.y, m.twist.angular.z] for m in estimates])
    return t_ns, omega.reshape(-1, 3), node_log


def report(args, recording, t_ns, omega, node_log) -> int:
    if len(t_ns) == 0:
        print(f"no estimate came back from the node: see {node_log}")
        return 1
    truth = np.column_stack([np.interp(t_ns, recording.imu.t, recording.imu.angular_velocity[:, axis])
                             for axis in range(3)])
    error_deg_s = np.degrees(omega - truth)
    rms = np.sqrt(np.mean(error_deg_s ** 2, axis=0))
    peak = np.degrees(np.abs(recording.imu.angular_velocity).max())
    print(f"[4/4] RMS error against ground truth over {len(t_ns)} windows of 30,000 events (deg/s):")
    print(f"      x {rms[0]:.2f}   y {rms[1]:.2f}   z {rms[2]:.2f}   "
          f"(all axes {np.sqrt(np.mean(error_deg_s ** 2)):.2f} = "
          f"{100 * np.sqrt(np.mean(error_deg_s ** 2)) / peak:.2f} % of the peak {peak:.0f} deg/s)")
    plot = args.output / "angular_velocity.png"
    images = args.output / "iwe_before_after.png"
    write_plots(recording, t_ns, omega, plot, images, args.loss)
    print(f"      plot of estimate vs ground truth: {plot}")
    print(f"      image of warped events before/after compensation: {images}")
    print(f"      node log: {node_log}")
    return 0


def write_plots(recording, t_ns, omega, plot_path: Path, images_path: Path, loss: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from focus_ros.estimators.angular_velocity import AngularVelocityEstimator, AngularVelocitySettings
    from focus_ros.visualization import iwe_to_rgb, saturation_scale

    t0 = recording.events.t[0]
    figure, axes = plt.subplots(3, 1, sharex=True, figsize=(9, 7))
    for axis, name in enumerate("xyz"):
        axes[axis].plot((recording.imu.t - t0) / 1e9, np.degrees(recording.imu.angular_velocity[:, axis]),
                        color="0.3", lw=1.2, label="ground truth")
        axes[axis].plot((t_ns - t0) / 1e9, np.degrees(omega[:, axis]), ".", color="tab:red", ms=3,
                        label=f"focus_ros ({loss})")
        axes[axis].set_ylabel(f"ω{name} (deg/s)")
        axes[axis].grid(alpha=0.3)
    axes[0].legend(loc="upper left")
    axes[-1].set_xlabel("time (s)")
    figure.suptitle("Angular velocity: estimate through the ROS 2 node vs ground truth")
    figure.tight_layout()
    figure.savefig(plot_path, dpi=110)
    plt.close(figure)

    # the window with the fastest motion, compensated offline with the same settings
    index = int(np.argmax(np.linalg.norm(omega, axis=1)))
    start = int(np.searchsorted(recording.events.t, t_ns[index])) - 15000
    window = recording.events[max(start, 0):max(start, 0) + 30000]
    estimator = AngularVelocityEstimator(recording.calibration, AngularVelocitySettings(loss=loss))
    estimate = estimator.estimate(window, initial=omega[index])
    before = estimator.objective.image(np.zeros(3)).image
    after = estimator.objective.image(estimate.angular_velocity).image
    scale = saturation_scale(after)  # one scale for both pictures
    figure, axes = plt.subplots(1, 2, figsize=(10, 4))
    for ax, image, title in ((axes[0], before, "before (ω = 0)"),
                             (axes[1], after, f"after (ω = {np.degrees(np.linalg.norm(estimate.angular_velocity)):.0f} deg/s)")):
        ax.imshow(iwe_to_rgb(image, scale=scale))
        ax.set_title(title)
        ax.axis("off")
    figure.suptitle("Image of warped events, 30,000 events")
    figure.tight_layout()
    figure.savefig(images_path, dpi=110)
    plt.close(figure)


def main(argv=None) -> int:
    args = parse_arguments(argv)
    args.output.mkdir(parents=True, exist_ok=True)
    status = 0
    if args.part in ("all", "rotation"):
        bag, recording = simulate(args)
        t_ns, omega, node_log = run_node_and_replay(args, bag)
        status = report(args, recording, t_ns, omega, node_log)
    if args.part in ("all", "depth"):
        from focus_ros.ros import depth_demo

        status = depth_demo.run(args) or status
    return status


if __name__ == "__main__":
    sys.exit(main())
