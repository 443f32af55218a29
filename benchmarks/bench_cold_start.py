"""Ready from the first event? A bag played the moment angular_velocity_node starts.

Each run starts the node as `ros2 run` does (its entry point, config/davis240c.yaml with the Event
Camera Dataset's 30,000-event windows, ``-p window_events:=30000``, the live
queue policy "newest") and, as soon as this script's subscription to its estimates has found
the node, `focus-ros replay BAG --rate 1` (playing as soon as the node has subscribed:
--wait-for-subscribers 60; before that wait, a discovery slower than the node's start lost every
estimate to this script in some runs: 0 received of 70 published) of a 1-s simulated rotation
(rotation_short, seed 5, DAVIS240C, 4,000-event messages, with camera_info; written once to a
temporary folder). Printed per run: the windows in the bag, the windows the node completed (cut
from the events it received), dropped and estimated (its /diagnostics; estimated = published +
degenerate), the seconds from starting the node to its "estimator running in process" line
(process spawn, imports, building and warming the estimator) and from there to the report
saying every window is done (reports come once a second); then the median and range.

Also printed: the share of the bag's event time (first to last event) within 10 ms of the
stamp of an estimate the node published (``covered``: focus_ros.evaluation.timing.covered_share,
1.0 when an estimate comes at least every 20 ms, the auto windows' output period). With
30,000-event windows (about 27 ms each here) at most about 0.74 can be
covered; ``--auto-windows`` starts the node with its default windows instead (auto: at most
20 ms), as ``ros2 run`` without that file would. ``--cold`` gives every run an empty
NUMBA_CACHE_DIR of its own (node, estimator and replay compile as after an install); without it
every run uses the environment's cache (set NUMBA_CACHE_DIR to an empty folder yourself and only
the first run is cold).

    .venv/bin/python benchmarks/bench_cold_start.py --runs 5
    .venv/bin/python benchmarks/bench_cold_start.py --runs 3 --cold --auto-windows

State the machine's load when quoting numbers (`uptime` is printed at the start and end).
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def write_bag(folder: Path) -> tuple[Path, int, tuple[int, int]]:
    from focus_ros.sources.bags import write_bag as write
    from focus_ros.sources.simulator import simulate_preset

    recording = simulate_preset("rotation_short", duration_s=1.0, seed=5)
    path = folder / "one_second.bag2"
    write(path, recording, version=2, storage="mcap", events_per_message=4000)
    return path, len(recording.events) // 30000, (int(recording.events.t[0]), int(recording.events.t[-1]))


#: the period (s) within half of which an estimate covers the event time (the auto windows' output period)
PERIOD_S = 0.02


def run_once(bag: Path, windows: int, span_ns: tuple[int, int], folder: Path, domain: int, cold: bool,
             auto_windows: bool) -> dict:
    import rclpy
    from diagnostic_msgs.msg import DiagnosticArray
    from geometry_msgs.msg import TwistStamped

    env = dict(os.environ, ROS_DOMAIN_ID=str(domain), ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST", PYTHONUNBUFFERED="1")
    if cold:
        env["NUMBA_CACHE_DIR"] = tempfile.mkdtemp(prefix="numba_cache_", dir=folder)
    os.environ.update(ROS_DOMAIN_ID=str(domain), ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST")
    context = rclpy.Context()
    rclpy.init(context=context)
    client = rclpy.create_node("cold_start_bench", context=context)
    from rclpy.executors import SingleThreadedExecutor
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(client)
    reports, estimates = [], []
    client.create_subscription(DiagnosticArray, "/diagnostics", reports.append, 10)
    estimate_subscription = client.create_subscription(TwistStamped, "/angular_velocity", estimates.append, 1000)
    log = open(folder / f"node_{domain}.log", "w")
    started_s = time.time()
    parameters = ([] if auto_windows else ["--params-file", str(REPOSITORY / "config" / "davis240c.yaml"),
                                           "-p", "window_events:=30000"])
    node = subprocess.Popen([str(BIN / "angular_velocity_node"), "--ros-args", *parameters, "-r", "events:=/dvs/events",
                             "-p", "qos_reliability:=reliable"], env=env, stdout=log, stderr=subprocess.STDOUT)
    # the bag plays once this client receives the node's estimates: were discovery slower than the
    # node's start (it can be, by seconds), every estimate would be published before anyone listened
    deadline = time.monotonic() + 60.0
    while estimate_subscription.get_publisher_count() == 0 and time.monotonic() < deadline:
        executor.spin_once(timeout_sec=0.01)
    replay = subprocess.Popen([str(BIN / "focus-ros"), "replay", str(bag), "--rate", "1",
                               "--wait-for-subscribers", "60"],
                              env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def values():
        return {kv.key: kv.value for kv in reports[-1].status[0].values} if reports else {}

    try:
        deadline = time.monotonic() + 120.0
        while replay.poll() is None and time.monotonic() < deadline:
            executor.spin_once(timeout_sec=0.1)
        deadline = time.monotonic() + 60.0

        def caught_up():  # every window of the bag cut, none waiting, each estimated or dropped
            v = {key: int(value) for key, value in values().items() if key.startswith(("windows_", "degenerate_"))}
            accounted = sum(v.get(key, 0) for key in ("windows_processed", "degenerate_windows", "windows_dropped",
                                                        "windows_lost", "windows_failed"))
            return (v.get("windows_completed", 0) >= (1 if auto_windows else windows)
                    and v.get("windows_pending", 1) == 0 and accounted >= v.get("windows_completed", 0))

        while time.monotonic() < deadline and not caught_up():
            executor.spin_once(timeout_sec=0.1)
        done_s = time.time()
        end = time.monotonic() + 2.5
        while time.monotonic() < end:
            executor.spin_once(timeout_sec=0.1)
        result = values()
    finally:
        node.terminate()
        node.wait(timeout=15)
        replay.kill()
        replay.wait()
        executor.shutdown()
        client.destroy_node()
        rclpy.shutdown(context=context)
        log.close()
    text = (folder / f"node_{domain}.log").read_text()
    running = re.search(r"\[(\d+\.\d+)\] \[angular_velocity_node\]: estimator running in process", text)
    ready_s = float(running.group(1)) - started_s if running else float("nan")
    estimated = int(result.get("windows_processed", 0)) + int(result.get("degenerate_windows", 0))
    from focus_ros.evaluation.timing import covered_share

    stamps = [m.header.stamp.sec * 10**9 + m.header.stamp.nanosec for m in estimates]
    return dict(windows=windows, covered=covered_share(stamps, *span_ns, int(PERIOD_S * 1e9)),
                received=len(estimates),
                calibration=result.get("calibration_source", "none"),
                completed=int(result.get("windows_completed", 0)),
                dropped=int(result.get("windows_dropped", 0)), estimated=estimated, ready_s=ready_s,
                caught_up_s=done_s - float(running.group(1)) if running else float("nan"))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--cold", action="store_true", help="every run with an empty NUMBA_CACHE_DIR of its own")
    parser.add_argument("--auto-windows", action="store_true",
                        help="the node's default (auto) windows, without config/davis240c.yaml, instead of "
                             "30,000-event windows")
    options = parser.parse_args(argv)
    print(subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    with tempfile.TemporaryDirectory() as folder:
        folder = Path(folder)
        bag, windows, span_ns = write_bag(folder)
        print("| run | windows in the bag | completed by the node | dropped | estimated | estimates received | "
              "covered | "
              "calibration | node start -> estimator ready (s) | ready -> caught up (s) |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        rows = []
        for run in range(options.runs):
            row = run_once(bag, windows, span_ns, folder, domain=150 + os.getpid() % 50 + run, cold=options.cold,
                           auto_windows=options.auto_windows)
            rows.append(row)
            print(f"| {run + 1} | {row['windows']} | {row['completed']} | {row['dropped']} | {row['estimated']} | "
                  f"{row['received']} | {row['covered']:.2f} | {row['calibration']} | {row['ready_s']:.2f} | "
                  f"{row['caught_up_s']:.2f} |", flush=True)
    for key in ("estimated", "covered", "ready_s", "caught_up_s"):
        values = [row[key] for row in rows]
        print(f"{key}: median {statistics.median(values):.2f}, range {min(values):.2f}-{max(values):.2f}")
    print(subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    return 0


if __name__ == "__main__":
    sys.exit(main())
