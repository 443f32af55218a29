"""The angular velocity half of `make demo`: a simulated rotation through ``angular_velocity_node``.

1. simulate a short DAVIS240C rotation sequence with ground truth (the simulator's
   ``rotation_short`` preset) and write it as a ROS 2 bag (mcap);
2. start ``angular_velocity_node`` as ``ros2 run`` would (entry point, params file);
3. replay the bag onto ROS 2 topics at the estimator's pace, collect the published
   ``TwistStamped`` angular velocities;
4. print the RMS error per axis against the ground truth (``focus_ros.evaluation``: the
   simulator's gyro, no delay) and write a plot of estimate vs ground truth and the image of
   warped events before/after compensation of the fastest window.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

from focus_ros.events import NANOSECONDS_PER_SECOND
from focus_ros.evaluation.ground_truth import from_imu
from focus_ros.evaluation.metrics import error_statistics
from focus_ros.ros.demos.session import CONFIG_FOLDER, DemoFailure, node_and_replayer


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


#: the longest wait (s), after the replay, for the node to have handled its last window (the
#: paced replay already waited until estimates stopped coming: this is a bound, not a pause)
SETTLE_TIMEOUT_S = 60.0
#: the topics of the bag the node reads
NODE_INPUTS = ["/dvs/events", "/dvs/camera_info"]


def run_node_and_replay(args, bag: Path, node_arguments: tuple[str, ...] = ()):
    """Start the node in a subprocess (``node_arguments``: more of its ROS arguments, e.g.
    ``("-p", "window_events:=30000")``), wait until it is ready, replay the bag paced by its
    estimates, wait until it has handled every window, collect the estimates."""
    from geometry_msgs.msg import TwistStamped

    share = CONFIG_FOLDER / "davis240c.yaml"
    node_log = args.output / "angular_velocity_node.log"
    executable = Path(sys.executable).parent / "angular_velocity_node"
    command = [str(executable), "--ros-args", "--params-file", str(share), "-r", "events:=/dvs/events",
               "-p", f"loss:={args.loss}", "-p", "qos_reliability:=reliable", "-p", "queue_policy:=all",
               *node_arguments]
    print(f"[2/4] starting the node: angular_velocity_node --ros-args --params-file {share.name} "
          f"-r events:=/dvs/events -p loss:={args.loss} -p queue_policy:=all")
    estimates = []
    with node_and_replayer(command, node_log, bag, rate=0.0, name="angular_velocity_node") as session:
        session.collector.create_subscription(TwistStamped, "/angular_velocity", estimates.append, 1000)
        session.wait_until_ready(NODE_INPUTS)
        print("[3/4] replaying the bag onto /dvs/events, /dvs/imu, /dvs/camera_info at the estimator's pace ...")
        wall = session.play()
        wait_for_last_window(session, session.replayer.published_events)
        print(f"      {session.replayer.published_events:,} events in {wall:.1f} s "
              f"({session.replayer.published_events / wall / 1e6:.2f} Mev/s through ROS), {len(estimates)} estimates")
    t_ns = np.array([m.header.stamp.sec * NANOSECONDS_PER_SECOND + m.header.stamp.nanosec for m in estimates])
    omega = np.array([[m.twist.angular.x, m.twist.angular.y, m.twist.angular.z] for m in estimates])
    return t_ns, omega.reshape(-1, 3), node_log


def wait_for_last_window(session, published_events: int, timeout_s: float = SETTLE_TIMEOUT_S) -> float:
    """Until the node's /diagnostics say it has every event and nothing left to estimate: no
    window waiting, and every window it completed handled (published, withheld as degenerate,
    dropped, lost or failed), the same over two reports. DemoFailure naming the counts after
    ``timeout_s`` (s)."""
    handled_keys = ("windows_processed", "degenerate_windows", "windows_dropped", "windows_lost", "windows_failed")

    def snapshot():
        received, pending, completed = (session.count(key) for key in
                                        ("events_received", "windows_pending", "windows_completed"))
        handled = [session.count(key) for key in handled_keys]
        if None in (received, pending, completed, *handled):
            return None
        if received < published_events or pending or completed != sum(handled):
            return None
        return completed, tuple(handled)

    def missing() -> str:
        counts = ", ".join(f"{key} {session.values.get(key, '?')}" for key in
                           ("events_received", "windows_completed", "windows_pending", *handled_keys))
        return (f"angular_velocity_node still had windows to estimate {timeout_s:.0f} s after the replay of "
                f"{published_events:,} events ({counts})")

    return session.spin_until(session.settled(snapshot, quiet_s=1.0), timeout_s, missing, "after the replay")


def report(args, recording, t_ns, omega, node_log) -> int:
    if len(t_ns) == 0:
        raise DemoFailure("no estimate came back from angular_velocity_node", node_log)
    ground_truth = from_imu(recording.imu, delay_ns=0)   # the simulator's gyro is exact and not delayed
    truth = ground_truth.at(t_ns)
    statistics = error_statistics(omega, truth, ground_truth.peak_deg_s())
    x, y, z = statistics.rms_per_axis
    print(f"[4/4] RMS error against ground truth over {statistics.used} windows (the node's auto windows; deg/s):")
    print(f"      x {x:.2f}   y {y:.2f}   z {z:.2f}   "
          f"(all axes {statistics.rms:.2f} = {statistics.rms_percent_of_peak:.2f} % of the peak "
          f"{ground_truth.peak_deg_s():.0f} deg/s)")
    plot = args.output / "angular_velocity.png"
    images = args.output / "iwe_before_after.png"
    write_plots(recording, t_ns, omega, truth, plot, images, args.loss)
    print(f"      plot of estimate vs ground truth: {plot}")
    print(f"      image of warped events before/after compensation: {images}")
    print(f"      node log: {node_log}")
    return 0


def write_plots(recording, t_ns, omega, truth, plot_path: Path, images_path: Path, loss: str) -> None:
    """Estimate vs ground truth over time, and the fastest window's IWE before and after
    compensation (estimated offline with the node's settings, warm-started at the node's estimate)."""
    from focus_ros.estimators.angular_velocity import AngularVelocityEstimator, AngularVelocitySettings
    from focus_ros.evaluation.plots import plot_estimate_vs_truth, plot_iwe_pair

    t_s = (t_ns - recording.events.t[0]) / 1e9
    plot_estimate_vs_truth(t_s, omega, truth, plot_path,
                           title=f"Angular velocity through the ROS 2 node ({loss}) vs ground truth")
    index = int(np.argmax(np.linalg.norm(omega, axis=1)))
    start = max(int(np.searchsorted(recording.events.t, t_ns[index])) - 15000, 0)
    window = recording.events[start:start + 30000]
    estimator = AngularVelocityEstimator(recording.calibration, AngularVelocitySettings(loss=loss))
    estimate = estimator.estimate(window, initial=omega[index])
    speed = np.degrees(np.linalg.norm(estimate.angular_velocity))
    plot_iwe_pair(estimator.objective.image(np.zeros(3)).image,
                  estimator.objective.image(estimate.angular_velocity).image, images_path,
                  titles=("before (ω = 0)", f"after (ω = {speed:.0f} deg/s)"),
                  title="Image of warped events, 30,000 events")


def run(args) -> int:
    """Simulate, replay through the node, report; 0 when estimates came back (DemoFailure, one
    line, otherwise)."""
    bag, recording = simulate(args)
    t_ns, omega, node_log = run_node_and_replay(args, bag)
    return report(args, recording, t_ns, omega, node_log)
