"""optical_flow_node on the larger sensors through real ROS 2 topics: the output rate it keeps.

    .venv/bin/python benchmarks/bench_flow_node.py [--sensors imx636 dvxplorer davis346] [--seconds 4]
        [--node-arg=-p --node-arg=pixel_binning:=1]

The sequences, the driver-like publisher process (pre-serialized 1-ms EventPacket messages in the
driver's encoding, each sent when due at real time, best effort) and the cache are those of
``benchmarks/bench_sensors.py`` (a rotation of each sensor in the textured panorama, simulated
once). The node runs as `ros2 run focus_ros optical_flow_node` starts it, told only the topic,
the message type and the intrinsics; its defaults choose the window (30,000 events at 240x180,
scaled by the pixel count), the pixel binning and the event bound from the sensor; with
``queue_policy: newest`` it skips to the newest complete window when busy.

Measured per run, over the publishing time: flow images received per second (the output rate),
windows completed per second (the windows the stream brings), the share estimated, the node's
``latency_ms`` and ``processing_ms_per_window`` (medians of its /diagnostics reports), the valid
share of the patches with events, and the node + estimator RSS (MiB, max). Speed is measured here,
not asserted in tests; quote the load average printed at the start and the end.
"""

from __future__ import annotations

import argparse
import os
import pickle
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "test"))

import bench_sensors  # noqa: E402  (the sequences, the publisher, process probes)


def node_command(sensor: str, extra: list[str]) -> list[str]:
    """optical_flow_node as `ros2 run` starts it, with the topic, message type and intrinsics."""
    command = bench_sensors.node_command(sensor, extra)
    command[0] = str(Path(command[0]).parent / "optical_flow_node")
    return command


def measure(sensor: str, messages_path: Path, seconds: float, log_dir: Path, extra: list[str]) -> dict:
    import rclpy
    from diagnostic_msgs.msg import DiagnosticArray
    from rclpy.executors import SingleThreadedExecutor
    from sensor_msgs.msg import Image

    from ros_harness import NodeProcess, ros_environment, spin_until

    env = ros_environment()
    os.environ.update({k: env[k] for k in ("ROS_DOMAIN_ID", "ROS_AUTOMATIC_DISCOVERY_RANGE")})
    node = NodeProcess(node_command(sensor, extra), env, log_dir / f"flow_node_{sensor}_{time.strftime('%H%M%S')}.log")
    context = rclpy.Context()
    rclpy.init(context=context)
    client = rclpy.create_node("bench_flow_client", context=context)
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(client)
    flows, reports = [], []
    client.create_subscription(Image, "/optical_flow", lambda m: flows.append((time.monotonic(), m)), 1000)
    client.create_subscription(DiagnosticArray, "/diagnostics", lambda d: reports.extend(
        dict({kv.key: kv.value for kv in status.values}, arrival_s=time.monotonic()) for status in d.status
        if status.name.startswith("optical_flow_node")), 10)
    publisher = None
    rss = []
    try:
        if not spin_until(executor, lambda: reports and int(reports[-1].get("estimator_process_pid", 0) or 0) > 0,
                          120.0):
            raise RuntimeError("the node's estimator never started: " + node.log()[-2000:])
        first_report = dict(reports[-1])
        publisher = subprocess.Popen([sys.executable, str(ROOT / "benchmarks" / "bench_sensors.py"), "--publish",
                                      str(messages_path), "--seconds", str(seconds)], env=env, text=True,
                                     stdout=subprocess.PIPE)
        began = None
        next_sample = time.monotonic()
        while publisher.poll() is None:
            executor.spin_once(timeout_sec=0.05)
            if began is None and flows:
                began = flows[0][0]
            if time.monotonic() >= next_sample and reports:
                worker = int(reports[-1].get("estimator_process_pid", 0) or 0)
                rss.append(bench_sensors.rss_mib(node.process.pid) + (bench_sensors.rss_mib(worker) if worker else 0))
                next_sample += 1.0
            if not node.alive():
                raise RuntimeError("node died: " + node.log()[-2000:])
        ended = time.monotonic()
        spin_until(executor, lambda: False, 1.5)  # the last reports
    finally:
        if publisher is not None and publisher.poll() is None:
            publisher.kill()
        node.stop()
        client.destroy_node()
        rclpy.shutdown(context=context)
    during = [r for r in reports if began is not None and began <= r["arrival_s"] <= ended + 1.5]
    if not flows or not during:
        raise RuntimeError("no flow received: " + node.log()[-2000:])
    last = during[-1]
    span = ended - began
    received = sum(1 for arrival, _ in flows if arrival <= ended + 0.5)
    completed = int(last.get("windows_completed", 0) or 0) - int(first_report.get("windows_completed", 0) or 0)
    median = lambda key: statistics.median(float(r[key]) for r in during if key in r)  # noqa: E731
    valid = [float(r["valid_patch_share"]) for r in during if r.get("valid_patch_share", "nan") != "nan"]
    return dict(sensor=sensor, flows_per_s=received / span, windows_per_s=completed / span,
                estimated_share=received / completed if completed else float("nan"),
                latency_ms=median("latency_ms"), processing_ms=median("processing_ms_per_window"),
                valid_share=float(np.median(valid)) if valid else float("nan"), rss_max=max(rss) if rss else 0.0,
                window_events=last.get("window_events", "?"), binning=last.get("pixel_binning", "?"),
                max_window_events=last.get("max_window_events", "?"))


HEADER = ("| sensor | window events | binning | events bound | flows/s published | windows/s completed | "
          "estimated share | latency ms | processing ms/window | valid share | RSS max MiB |\n"
          "|---|---|---|---|---|---|---|---|---|---|---|")
ROW = ("| {sensor} | {window_events} | {binning} | {max_window_events} | {flows_per_s:.1f} | {windows_per_s:.1f} | "
       "{estimated_share:.2f} | {latency_ms:.0f} | {processing_ms:.0f} | {valid_share:.2f} | {rss_max:.0f} |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sensors", nargs="*", default=["imx636"], choices=list(bench_sensors.RUNS))
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--seconds", type=float, default=4.0, help="publishing time per run (s)")
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "focus_ros_bench_sensors")
    parser.add_argument("--node-arg", action="append", default=[], help="extra node argument after --ros-args")
    args = parser.parse_args()
    from focus_ros.camera import sensor_model

    print(f"uptime: {os.popen('uptime').read().strip()}")
    print(HEADER, flush=True)
    with tempfile.TemporaryDirectory() as temporary:
        for sensor in args.sensors:
            run = bench_sensors.RUNS[sensor]
            recording = bench_sensors.cached_sequence(run, args.cache)
            messages = bench_sensors.driver_messages(recording.events, recording.calibration,
                                                     sensor_model(sensor).encoding)
            path = Path(temporary) / f"{sensor}_messages.pickle"
            with open(path, "wb") as file:
                pickle.dump((run.duration_s, messages), file)
            del messages, recording
            for _ in range(args.runs):
                try:
                    print(ROW.format(**measure(sensor, path, args.seconds, Path(temporary), args.node_arg)),
                          flush=True)
                except RuntimeError as error:
                    print(f"| {sensor} | run failed: {str(error).splitlines()[0]} |", flush=True)
    print(f"uptime: {os.popen('uptime').read().strip()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
