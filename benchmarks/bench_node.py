"""End-to-end speed of angular_velocity_node (or, with --node optical_flow, optical_flow_node)
through ROS 2, with a driver-like publisher.

Three processes, as on a robot: the node as `ros2 run` starts it (its entry point, its
default parameters; its estimator in a process of its own unless --thread), a publisher
process that behaves like libcaer_driver, and this script listening to the results.

- Events: consecutive 30,000-event windows of the simulated rotation at its fastest
  (8.0-9.5 s of the `rotation` preset, seed 0, up to 700 deg/s per axis; --source slice:
  the real boxes_rotation slice repeated, every window the same).
- Latency (warm-up): the first windows one at a time from this script; time from
  publishing a window's last message to receiving its TwistStamped (median).
- Sustained: the publisher process sends the rest as pre-serialized dvs_msgs/EventArray
  messages, one every `--message-ms` ms (1 ms, as libcaer_driver) holding the events of that
  millisecond at the boxes_rotation peak rate (30,000 events per 5.5 ms: 5,455 per message),
  on time (it sleeps until each message is due, no busy wait), best-effort QoS like the
  drivers; it reports its own CPU use and how late it published. The node processes what
  it can (queue_policy newest) and reports in /diagnostics: windows completed, windows
  estimated, estimator ms per window (measured where the estimator runs: wall and CPU time),
  latency.
- Offline: the same windows through the same estimator in this process, one after the
  other (median ms per window): the in-node / offline ratio compares the two, in wall time
  and in CPU time (the work itself; on a loaded machine the wall times of the node run and
  of the offline run are taken under different loads, the CPU times much less so). Also
  offline at the peak's pace: one window every 5.5 ms at most, the process idling in
  between as the estimator process does when it keeps up (idle time costs the next window
  its warm caches: the CPU time per window rises with the pace alone).

    .venv/bin/python benchmarks/bench_node.py --losses variance --runs 5
    .venv/bin/python benchmarks/bench_node.py            # every loss once
    .venv/bin/python benchmarks/bench_node.py --losses variance --runs 5 --estimator-cpu 1 --alternate
    .venv/bin/python benchmarks/bench_node.py --node optical_flow --losses variance --runs 3 --rate-mev-s 1

--node optical_flow measures the patch optical flow node the same way (its outputs: the 32FC2
flow images on /optical_flow; offline: OpticalFlowEstimator with the node's defaults).
--rate-mev-s R publishes R Mev/s instead of the peak's 5.45 (1-ms messages of R x 1,000
events; a 30,000-event window every 30 / R ms).

--estimator-cpu N pins the node's estimator process to CPU N (its ``estimator_cpus``) and
this script, the publisher and the node to the other CPUs (as ``taskset -c`` would for the
driver and the node on a robot); with --alternate every run is made twice, unpinned then
pinned, so that the two are compared under the same load.

Prints one Markdown row per run and, with --runs > 1, a summary per loss (median and range).
State the machine's load when quoting numbers (`uptime` is printed at the start and end).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import pickle
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "test"))

SLICE = ROOT.parent / "shared" / "data" / "ec_slices" / "boxes_rotation"
WINDOW_EVENTS = 30000
PEAK_RATE = WINDOW_EVENTS / 5.5e-3  # events/s at the boxes_rotation peak
LATENCY_WINDOWS = 8
#: the CPUs this script may use, as started (--estimator-cpu narrows its own set run by run)
CPUS = frozenset(os.sched_getaffinity(0))


@dataclass(frozen=True)
class NodeUnderTest:
    """What differs between the nodes this benchmark runs: the executable, its parameter file,
    its estimate topic and message type (a module, a class), its estimator offline and how the
    node runs it on a window (this script subscribes to the estimates only: the angular velocity
    node then skips the covariance)."""

    executable: str
    params_file: str
    output_topic: str
    output_type: tuple[str, str]
    make_estimator: Callable[[str, bool], Any]
    estimate: Callable[[Any, Any], Any] = lambda estimator, window: estimator.estimate(window)
    arguments: tuple[str, ...] = ()  # node arguments beside the parameter file's


def _angular_velocity_estimator(loss: str, polarity: bool):
    from focus_ros.camera import Calibration
    from focus_ros.estimators.angular_velocity import AngularVelocityEstimator, real_time_settings
    return AngularVelocityEstimator(Calibration.davis240c(), real_time_settings(loss=loss, use_polarity=polarity))


def _optical_flow_estimator(loss: str, polarity: bool):
    from focus_ros.estimators.optical_flow import OpticalFlowEstimator, OpticalFlowSettings
    return OpticalFlowEstimator(240, 180, OpticalFlowSettings(loss=loss, use_polarity=polarity))


NODES = {
    "angular_velocity": NodeUnderTest("angular_velocity_node", "davis240c.yaml", "/angular_velocity",
                                      ("geometry_msgs.msg", "TwistStamped"), _angular_velocity_estimator,
                                      lambda estimator, window: estimator.estimate(window, covariance=False),
                                      ("-p", f"window_events:={WINDOW_EVENTS}")),
    "optical_flow": NodeUnderTest("optical_flow_node", "optical_flow.yaml", "/optical_flow",
                                  ("sensor_msgs.msg", "Image"), _optical_flow_estimator),
}


# ----------------------------------------------------------------------------- publisher process
def publish_when_due(message_class, topic: str, timed_messages, loop_s: float = 0.0, seconds: float = 0.0) -> dict:
    """The driver-like publisher (this process): wait for a subscriber, then publish each
    (due_s, message) of ``timed_messages`` when due (sleeping until then; best effort, 1000
    deep, as event camera drivers publish), looping the sequence (``loop_s`` long) for
    ``seconds`` when both are given; returns the report: messages, loops, wall_s, cpu_s,
    loop_starts (monotonic s), late_median_ms and late_max_ms (how late each message went out)."""
    import rclpy
    from rclpy.qos import HistoryPolicy, QoSProfile, ReliabilityPolicy

    rclpy.init()
    node = rclpy.create_node("bench_driver")
    qos = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=1000, reliability=ReliabilityPolicy.BEST_EFFORT)
    publisher = node.create_publisher(message_class, topic, qos)
    deadline = time.monotonic() + 30.0
    while publisher.get_subscription_count() == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(1.0)  # discovery settles both ways
    loops = max(1, math.ceil(seconds / loop_s)) if loop_s > 0 and seconds > 0 else 1
    cpu_start, wall_start = time.process_time(), time.monotonic()
    lateness, loop_starts = [], []
    for loop in range(loops):
        loop_start = wall_start + loop * loop_s
        loop_starts.append(loop_start)
        for due, message in timed_messages:
            due += loop_start
            delay = due - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            lateness.append(time.monotonic() - due)
            publisher.publish(message)
    wall = time.monotonic() - wall_start
    cpu = time.process_time() - cpu_start
    lateness.sort()
    node.destroy_node()
    rclpy.shutdown()
    return dict(messages=len(lateness), loops=loops, wall_s=wall, cpu_s=cpu, loop_starts=loop_starts,
                late_median_ms=1e3 * lateness[len(lateness) // 2], late_max_ms=1e3 * lateness[-1])


def publish(path: str, message_s: float) -> int:
    """The publisher process: the pickled EventArray messages on /dvs/events, one every
    message_s; prints the report of :func:`publish_when_due` as JSON."""
    from dvs_msgs.msg import EventArray

    with open(path, "rb") as file:
        messages = pickle.load(file)
    print(json.dumps(publish_when_due(EventArray, "/dvs/events",
                                      [(index * message_s, message) for index, message in enumerate(messages)])),
          flush=True)
    return 0


# ----------------------------------------------------------------------------- benchmark
def cpu_seconds(pid: int) -> float:
    """User + system CPU time (s) of a process so far (0 when unknown)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def slice_windows(count: int):
    from focus_ros.events import Events
    from focus_ros.sources.ecd import read_ecd_folder

    events = read_ecd_folder(SLICE).events
    span = int(events.t[-1] - events.t[0]) + 1000
    return [Events(events.x, events.y, events.t + k * span, events.p) for k in range(count)]


def simulated_windows():
    """Consecutive 30,000-event windows of the simulated rotation at its fastest."""
    from focus_ros.sources.simulator import make_preset
    from focus_ros.windows import count_windows

    recording = make_preset("rotation", 10.0, 0).simulate(start_s=8.0, end_s=9.5)
    return list(count_windows([recording.events], WINDOW_EVENTS))


def offline_ms_per_window(node: NodeUnderTest, windows, loss: str, polarity: bool,
                          period_s: float = 0.0) -> tuple[float, float]:
    """Median wall and CPU ms per window of the node's estimator settings on the windows, in
    this process: back to back, or with ``period_s`` one window every period_s at most (the
    process idles between windows, as the estimator process does when it keeps up)."""
    estimator = node.make_estimator(loss, polarity)
    node.estimate(estimator, windows[0])  # compiled code loaded
    estimator = node.make_estimator(loss, polarity)
    times, cpu_times = [], []
    next_start = time.perf_counter()
    for window in windows:
        time.sleep(max(0.0, next_start - time.perf_counter()))
        started, started_cpu = time.perf_counter(), time.thread_time()
        next_start = started + period_s
        node.estimate(estimator, window)
        times.append(time.perf_counter() - started)
        cpu_times.append(time.thread_time() - started_cpu)
    return 1e3 * statistics.median(times), 1e3 * statistics.median(cpu_times)


def measure(loss: str, polarity: bool, windows, message_s: float, log_dir: Path, thread: bool,
            estimator_cpu: int | None = None, under_test: NodeUnderTest = None, rate: float = PEAK_RATE) -> dict:
    """One run; with ``estimator_cpu`` the estimator process is pinned there and everything
    this script starts (node, publisher) runs on the other CPUs."""
    os.sched_setaffinity(0, CPUS - {estimator_cpu} if estimator_cpu is not None else CPUS)
    import importlib

    import rclpy
    from diagnostic_msgs.msg import DiagnosticArray
    from dvs_msgs.msg import EventArray
    from rclpy.executors import SingleThreadedExecutor

    from focus_ros import codecs
    from focus_ros.events import Events
    from ros_harness import NodeProcess, ros_environment, spin_until

    env = ros_environment()
    os.environ.update({k: env[k] for k in ("ROS_DOMAIN_ID", "ROS_AUTOMATIC_DISCOVERY_RANGE")})
    under_test = under_test or NODES["angular_velocity"]
    output_type = getattr(importlib.import_module(under_test.output_type[0]), under_test.output_type[1])
    node = NodeProcess([str(Path(sys.executable).parent / under_test.executable), "--ros-args", "--params-file",
                        str(ROOT / "config" / under_test.params_file), "-r", "events:=/dvs/events",
                        *under_test.arguments, "-p", "camera_info_timeout_s:=0.2", "-p", f"loss:={loss}",
                        "-p", f"use_polarity:={'true' if polarity else 'false'}",
                        *(["-p", "estimator_process:=false"] if thread else []),
                        *(["-p", f"estimator_cpus:={estimator_cpu}"] if estimator_cpu is not None else [])],
                       env, log_dir / f"node_{loss}_{polarity}.log")
    context = rclpy.Context()
    rclpy.init(context=context)
    client = rclpy.create_node("bench_client", context=context)
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(client)
    estimates, diagnostics = [], []
    client.create_subscription(output_type, under_test.output_topic, lambda m: estimates.append(
        (time.monotonic(), m.header.stamp.sec * 1_000_000_000 + m.header.stamp.nanosec)), 1000)
    client.create_subscription(DiagnosticArray, "/diagnostics", diagnostics.append, 10)
    publisher = client.create_publisher(EventArray, "/dvs/events", 1000)
    publisher_process = None
    try:
        if not spin_until(executor, lambda: publisher.get_subscription_count() > 0, 30):
            raise RuntimeError("node did not subscribe: " + node.log())
        spin_until(executor, lambda: False, 1.0)
        # warm-up (estimator process start, Numba cache) + latency, one window at a time
        latencies = []
        for index in range(LATENCY_WINDOWS + 2):
            count = len(estimates)
            window = windows[index]
            for start in range(0, len(window), 5000):
                publisher.publish(codecs.encode_event_array(window[start:start + 5000], 180, 240, "dvs"))
            sent = time.monotonic()
            if not spin_until(executor, lambda: len(estimates) > count, 60, step_s=0.0005):
                raise RuntimeError("no estimate: " + node.log())
            if index >= 2:
                latencies.append(estimates[-1][0] - sent)
        # sustained: the driver-like publisher in its own process
        sustained = Events.concatenate(windows[LATENCY_WINDOWS + 2:])
        per_message = int(round(rate * message_s))
        messages = [codecs.encode_event_array(sustained[start:start + per_message], 180, 240, "dvs")
                    for start in range(0, len(sustained), per_message)]
        path = log_dir / "messages.pickle"
        with open(path, "wb") as file:
            pickle.dump(messages, file)
        first_t, last_t = int(sustained.t[0]), int(sustained.t[-1])
        reports_before = len(diagnostics)

        def reported_pid():
            return int({kv.key: kv.value for kv in diagnostics[-1].status[0].values}.get("estimator_process_pid", 0))

        if not thread:  # a report naming the estimator process
            spin_until(executor, lambda: reported_pid() > 0, 3.0)
        worker_pid = reported_pid()
        cpu_before = {name: cpu_seconds(pid) for name, pid in (("node", node.process.pid), ("worker", worker_pid))}
        publisher_process = subprocess.Popen([sys.executable, __file__, "--publish", str(path),
                                              "--message-ms", str(message_s * 1e3)],
                                             env=env, stdout=subprocess.PIPE, text=True)
        while publisher_process.poll() is None:
            executor.spin_once(timeout_sec=0.05)
        cpu_used = {name: cpu_seconds(pid) - cpu_before[name]
                    for name, pid in (("node", node.process.pid), ("worker", worker_pid))}
        spin_until(executor, lambda: False, 1.5)  # the last windows and a diagnostics report
        publisher_report = json.loads(publisher_process.stdout.read().strip().splitlines()[-1])
        # CPU shares over the publishing phase (before it, the node only waited)
        cpu_used = {name: seconds / publisher_report["wall_s"] for name, seconds in cpu_used.items()}
        processed = sum(1 for _, stamp in estimates if first_t <= stamp <= last_t)
        published_windows = len(sustained) // WINDOW_EVENTS
        reports = [{kv.key: kv.value for kv in d.status[0].values} for d in diagnostics[reports_before:]
                   if d.status and d.status[0].name.startswith(under_test.executable)]
        before = {kv.key: kv.value for kv in diagnostics[reports_before - 1].status[0].values}
        after = reports[-1]
        # (a report without the key: another node on this ROS domain, e.g. a test run elsewhere)
        completed = int(after.get("windows_completed", 0)) - int(before.get("windows_completed", 0))

        def median_of(key):
            values = [float(r[key]) for r in reports if r.get(key, "nan") != "nan"]
            return statistics.median(values) if values else float("nan")

        if estimator_cpu is not None:  # offline on the estimator's CPU too (the node idles)
            os.sched_setaffinity(0, {estimator_cpu})
        offline, offline_cpu = offline_ms_per_window(under_test, windows[LATENCY_WINDOWS + 2:], loss, polarity)
        window_period_s = WINDOW_EVENTS / rate  # as the publisher delivers them
        _, paced_cpu = offline_ms_per_window(under_test, windows[LATENCY_WINDOWS + 2:], loss, polarity,
                                             window_period_s)
        os.sched_setaffinity(0, CPUS - {estimator_cpu} if estimator_cpu is not None else CPUS)
        in_node, in_node_cpu = median_of("processing_ms_per_window"), median_of("processing_cpu_ms_per_window")
        return dict(loss=loss, polarity=polarity, pinned=estimator_cpu is not None,
                    latency_ms=1e3 * statistics.median(latencies),
                    node_latency_ms=median_of("latency_ms"), processed=processed, completed=completed,
                    published=published_windows, ratio=processed / published_windows,
                    in_node_ms=in_node, round_trip_ms=median_of("round_trip_ms_per_window"),
                    offline_ms=offline, in_node_over_offline=in_node / offline,
                    in_node_cpu_ms=in_node_cpu, offline_cpu_ms=offline_cpu, cpu_ratio=in_node_cpu / offline_cpu,
                    paced_cpu_ms=paced_cpu, paced_cpu_ratio=in_node_cpu / paced_cpu,
                    publisher_cpu=publisher_report["cpu_s"] / publisher_report["wall_s"],
                    publisher_late_median_ms=publisher_report["late_median_ms"],
                    publisher_late_max_ms=publisher_report["late_max_ms"],
                    messages=publisher_report["messages"], node_cpu=cpu_used["node"],
                    worker_cpu=cpu_used["worker"])
    finally:
        if publisher_process is not None and publisher_process.poll() is None:
            publisher_process.kill()
        node.stop()
        executor.shutdown()
        client.destroy_node()
        rclpy.shutdown(context=context)


ROW = ("| {loss} | {mode} | {ratio:.2f} | {processed} / {published} ({completed}) | {in_node_ms:.2f} | "
       "{offline_ms:.2f} | {in_node_over_offline:.2f} | {in_node_cpu_ms:.2f} / {offline_cpu_ms:.2f} = "
       "{cpu_ratio:.2f} | {in_node_cpu_ms:.2f} / {paced_cpu_ms:.2f} = {paced_cpu_ratio:.2f} | "
       "{round_trip_ms:.2f} | {node_latency_ms:.1f} | "
       "{latency_ms:.1f} | {publisher_cpu:.0%} | {publisher_late_median_ms:.2f} / {publisher_late_max_ms:.1f} | "
       "{node_cpu:.0%} / {worker_cpu:.0%} |")
HEADER = ("| loss | polarity | ratio to peak | windows estimated / published (completed in node) | "
          "in-node estimator ms/window | offline ms/window | in-node / offline | CPU ms in-node / offline | "
          "CPU ms in-node / offline at the peak's pace | round trip ms | latency ms (node, sustained) | "
          "latency ms (one window) | publisher CPU | publisher late ms "
          "(median / max) | CPU node / estimator process |\n"
          "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")


def summary(results: list[dict]) -> str:
    def spread(key, digits=2):
        values = [r[key] for r in results]
        return f"{statistics.median(values):.{digits}f} ({min(values):.{digits}f}–{max(values):.{digits}f})"

    pinned = " (estimator on its own CPU)" if results[0]["pinned"] else ""
    return (f"| {results[0]['loss']}{pinned} | {len(results)} | {spread('ratio')} | {spread('in_node_ms')} | "
            f"{spread('offline_ms')} | {spread('in_node_over_offline')} | {spread('cpu_ratio')} | "
            f"{spread('paced_cpu_ratio')} | {spread('node_latency_ms', 1)} | {spread('publisher_cpu')} |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--losses", nargs="*", default=None, help="default: every loss")
    parser.add_argument("--runs", type=int, default=1, help="runs per loss; > 1 prints a median/range summary")
    parser.add_argument("--source", choices=("simulated", "slice"), default="simulated")
    parser.add_argument("--message-ms", type=float, default=1.0, help="publisher period (ms), 1 as libcaer_driver")
    parser.add_argument("--thread", action="store_true", help="node estimator in a thread (estimator_process false)")
    parser.add_argument("--node", choices=tuple(NODES), default="angular_velocity", help="the node to measure")
    parser.add_argument("--rate-mev-s", type=float, default=PEAK_RATE / 1e6,
                        help="events per second published (Mev/s); default the boxes_rotation peak")
    parser.add_argument("--estimator-cpu", type=int,
                        help="pin the estimator process to this CPU, the rest to the others")
    parser.add_argument("--alternate", action="store_true", help="with --estimator-cpu: each run unpinned, then pinned")
    parser.add_argument("--publish", help=argparse.SUPPRESS)  # internal: run as the publisher process
    args = parser.parse_args()
    if args.publish:
        return publish(args.publish, args.message_ms / 1e3)
    if args.estimator_cpu is not None and (args.estimator_cpu not in CPUS or len(CPUS) < 2):
        parser.error(f"--estimator-cpu {args.estimator_cpu}: needs one of this process's CPUs {sorted(CPUS)} and "
                     "another for the rest")
    if args.estimator_cpu is not None and args.thread:
        parser.error("--estimator-cpu pins the estimator process: not with --thread")
    pinnings = ([None, args.estimator_cpu] if args.alternate else [args.estimator_cpu]) \
        if args.estimator_cpu is not None else [None]
    from focus_ros.losses import LOSSES

    if args.source == "slice" and not (SLICE / "events.txt").exists():
        print(f"needs the real slice at {SLICE}")
        return 1
    windows = simulated_windows() if args.source == "simulated" else slice_windows(130)
    losses = args.losses or list(LOSSES)
    under_test = NODES[args.node]
    print(f"uptime: {os.popen('uptime').read().strip()}")
    print(f"{under_test.executable} (estimator in a {'thread' if args.thread else 'process'}), {len(windows)} "
          f"windows of 30,000 events ({args.source}); {args.rate_mev_s:.2f} Mev/s in {args.message_ms:g}-ms messages")
    print(HEADER, flush=True)
    results = {}
    with tempfile.TemporaryDirectory() as log_dir:
        for loss in losses:
            polarity = "without" not in LOSSES[loss].polarity_modes
            for _ in range(args.runs):
                for estimator_cpu in pinnings:
                    try:
                        result = measure(loss, polarity, windows, args.message_ms / 1e3, Path(log_dir), args.thread,
                                         estimator_cpu, under_test, args.rate_mev_s * 1e6)
                    except RuntimeError as error:
                        print(f"| {loss} | run failed: {str(error).splitlines()[0]} |", flush=True)
                        continue
                    results.setdefault((loss, estimator_cpu), []).append(result)
                    pinned = f" (estimator on CPU {estimator_cpu})" if estimator_cpu is not None else ""
                    print(ROW.format(mode="with" if polarity else "without", **dict(result, loss=loss + pinned)),
                          flush=True)
    if args.runs > 1:
        print("\n| loss | runs | ratio to peak | in-node ms/window | offline ms/window | in-node / offline | "
              "in-node / offline CPU | in-node / offline CPU at the peak's pace | latency ms | publisher CPU |\n"
              "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for runs in results.values():
            print(summary(runs))
    print(f"uptime: {os.popen('uptime').read().strip()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
