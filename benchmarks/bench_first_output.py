"""How soon a node's first output comes after it starts, with Numba's cache filled (after `make
setup`): the angular velocity node's first estimate, the depth node's first cloud.

Each run starts the node as ``ros2 run`` does and, at the same moment, ``focus-ros replay BAG
--rate 1 --wait-for-subscribers 60`` (test/node_states.py's bags: a 3-s simulated rotation, a
2-s simulated slider with poses; the depth node with its params file and 300,000-event
keyframes, as in `make demo`). Printed per run: seconds from starting the node to its first
``/angular_velocity`` message (issue 30's target: <= 3 s when events flow), and for the depth
node the seconds to its first ``/depth/points`` cloud, both when the node published them (its
log's "first ... published" line: a subscriber that discovers the topic late, by up to about 2 s
with Fast DDS here, would measure discovery instead), and that keyframe's own latency (from its
last event received to its outputs published: ``latency_max_ms`` of the node's next
/diagnostics report; target: <= 2 s), for the angular velocity node the share of the bag's
windows it estimated at real time (live policy ``newest``: what it cannot estimate in time is
dropped; the windows cut before its estimator was ready are all estimated, which
test_ros_outputs.py checks); then the median and range.

    .venv/bin/python benchmarks/bench_first_output.py --runs 5
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "test"))

from node_states import CONFIG, NodeProcess, executable, start_replay, write_bags  # noqa: E402
from ros_harness import client_node, spin_until  # noqa: E402

NODES = {
    "angular_velocity_node": (["--params-file", str(CONFIG / "davis240c.yaml"), "-r", "events:=/dvs/events",
                               "-p", "qos_reliability:=reliable", "-p", "window_events:=30000"], "rotation_short",
                              "/angular_velocity"),
    "depth_node": (["--params-file", str(CONFIG / "depth_davis240c.yaml"), "-r", "events:=/dvs/events",
                    "-r", "pose:=/optitrack/davis", "-p", "qos_reliability:=reliable",
                    "-p", "keyframe_events:=300000"], "slider", "/depth/points"),
}


def run_once(node_name: str, bag: Path, folder: Path) -> tuple[float, float]:
    """(s from the node's start to its first output, that output's latency in s, or for the
    angular velocity node the share of the bag's windows estimated)."""
    from diagnostic_msgs.msg import DiagnosticArray
    from geometry_msgs.msg import TwistStamped
    from sensor_msgs.msg import PointCloud2

    arguments, _, topic = NODES[node_name]
    with client_node("first_output_bench") as (env, client, executor):
        first, reports = [], []
        message_type = TwistStamped if topic == "/angular_velocity" else PointCloud2
        client.create_subscription(message_type, topic, lambda message: first.append(time.monotonic()), 10)
        client.create_subscription(DiagnosticArray, "/diagnostics", reports.append, 10)
        started = time.time()  # the node's log stamps are the system clock's
        node = NodeProcess([executable(node_name), "--ros-args", *arguments], env, folder / "node.log")
        replay = start_replay(bag, env)
        try:
            deadline = time.monotonic() + 60.0
            if not spin_until(executor, lambda: first, 60.0, 0.01):
                raise RuntimeError(f"no output on {topic} within 60 s; node log: {folder / 'node.log'}")
            spin_until(executor, lambda: " published" in node.log(), 5.0)  # the log line may come a moment later
            first_s = first_output_logged(node.log()) - started
            latency_s = float("nan")
            if node_name == "angular_velocity_node":
                return first_s, estimated_share(executor, replay, reports, deadline)
            if node_name == "depth_node":
                seen = len(reports)
                spin_until(executor, lambda: len(reports) >= seen + 2, deadline - time.monotonic())
                for report in reversed(reports):
                    values = {pair.key: pair.value for status in report.status for pair in status.values}
                    if values.get("latency_max_ms", "nan") != "nan":
                        latency_s = float(values["latency_max_ms"]) / 1e3
                        break
            return first_s, latency_s
        finally:
            replay.kill()
            replay.wait()
            node.stop(timeout=5.0)


def first_output_logged(log: str) -> float:
    """The system time (s) of the node's "first ... published" log line."""
    found = re.search(r"\[INFO\] \[(\d+\.\d+)\] \[\w+\]: first \w+ published", log)
    if found is None:
        raise RuntimeError(f"no 'first ... published' line in the node's log:\n{log}")
    return float(found.group(1))


def estimated_share(executor, replay, reports, deadline: float) -> float:
    """The share of the windows cut that were estimated (withheld as degenerate counts as
    estimated), once the replay has ended and every window is accounted for on /diagnostics."""
    def values() -> dict:
        return {pair.key: pair.value for status in reports[-1].status for pair in status.values} if reports else {}

    def accounted() -> bool:
        current = values()
        counted = sum(int(current.get(key, 0)) for key in ("windows_processed", "degenerate_windows", "windows_dropped",
                                                            "windows_lost", "windows_failed"))
        return replay.poll() is not None and int(current.get("windows_completed", 0)) > 0 and \
            counted == int(current["windows_completed"]) and int(current.get("windows_pending", 1)) == 0

    if not spin_until(executor, accounted, deadline - time.monotonic()):
        raise RuntimeError(f"the replay's windows not accounted for on /diagnostics: {values()}")
    final = values()
    return (int(final["windows_processed"]) + int(final["degenerate_windows"])) / int(final["windows_completed"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    print("load:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    with tempfile.TemporaryDirectory() as temporary:
        folder = Path(temporary)
        bags = write_bags(folder)
        for node_name, (_, preset, topic) in NODES.items():
            firsts, seconds = [], []
            for run in range(args.runs):
                case = folder / f"{node_name}_{run}"
                case.mkdir()
                first_s, second = run_once(node_name, bags[preset], case)
                firsts.append(first_s)
                seconds.append(second)
                print(f"{node_name} run {run + 1}: first {topic} {first_s:.2f} s after the start, "
                      + (f"{100 * second:.0f} % of the windows estimated" if node_name == "angular_velocity_node"
                         else f"its latency {second:.2f} s"), flush=True)
            label, scale, unit = (("windows estimated", 100, " %") if node_name == "angular_velocity_node"
                                  else ("latency", 1, " s"))
            print(f"{node_name}: first output median {statistics.median(firsts):.2f} s "
                  f"[{min(firsts):.2f}-{max(firsts):.2f}], {label} median {scale * statistics.median(seconds):.2f}"
                  f"{unit} [{scale * min(seconds):.2f}-{scale * max(seconds):.2f}]")
    print("load:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    return 0


if __name__ == "__main__":
    sys.exit(main())
