"""The executor's CPU per event message: rclpy's take, decoding, stream checks, windowing.

At the boxes_rotation peak a driver publishes 1,000 dvs_msgs/EventArray messages a second,
5,455 events each (30,000 events per 5.5 ms). Everything the node's executor thread does per
message is CPU the estimator process cannot have on a 2-core machine. Two measurements:

1. In one process, on pre-serialized messages (no ROS): the calls the executor makes per
   message, CPU µs per message (``time.thread_time``), step by step and all together:
   ``EventMessageDecoder`` (the node's decoder), ``StreamGuard.check``,
   ``CountWindowCutter.push`` (30,000-event windows).
2. Through ROS 2: a subscriber process (a real rclpy node, SingleThreadedExecutor) and the
   driver-like publisher of ``bench_node.py`` (its own process, one message per ms, on
   time, best effort). The subscriber process's CPU per message received (all its threads:
   the executor's, DDS's, the input's own), with: ``bare`` a raw subscription whose callback
   does nothing (rclpy's own cost: wait set, take, dispatch), ``input`` the node's event
   input (:class:`focus_ros.ros.event_input.EventInput`: take, decode, guard) feeding a
   ``CountWindowCutter`` as the angular velocity node does, on the executor's thread;
   ``input-thread`` the same with ``EventInput(own_thread=True)`` (its own wait set, no executor).

    .venv/bin/python benchmarks/bench_event_input.py --runs 5

Prints Markdown tables (median and range over --runs); state the machine's load
(``uptime`` is printed at the start and end).
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "test"))
sys.path.insert(0, str(ROOT / "benchmarks"))

WINDOW_EVENTS = 30000
EVENTS_PER_MESSAGE = 5455  # 1 ms at the boxes_rotation peak (30,000 events per 5.5 ms)


def peak_messages(count: int) -> list[bytes]:
    """``count`` CDR dvs_msgs/EventArray messages of 5,455 DAVIS240C-like events (1 ms each)."""
    from bench_codecs import synthetic_events

    from focus_ros import codecs

    events = synthetic_events(EVENTS_PER_MESSAGE * count)
    return [codecs.encode_event_array(events[start:start + EVENTS_PER_MESSAGE], 180, 240, "dvs")
            for start in range(0, len(events), EVENTS_PER_MESSAGE)]


# ----------------------------------------------------------------------------- in one process
def in_process_us_per_message(messages: list[bytes], runs: int) -> dict:
    """CPU µs per message of each step and of the whole chain (median and range over runs)."""
    from focus_ros import codecs
    from focus_ros.stream import StreamGuard
    from focus_ros.windows import CountWindowCutter

    def chain(decode: bool, guard: bool, window: bool):
        decoder = codecs.EventMessageDecoder("dvs_msgs/EventArray")
        checker = StreamGuard(240, 180)
        cutter = CountWindowCutter(WINDOW_EVENTS)
        decoded = [decoder(m)[0] for m in messages[:3]]  # inputs of the later steps alone
        started = time.thread_time()
        for index, message in enumerate(messages):
            events = decoder(message)[0] if decode else decoded[index % 3]
            if guard:
                events = checker.check(events, 240, 180).events
            if window:
                cutter.push(events)
        return (time.thread_time() - started) / len(messages) * 1e6

    steps = {"decode (EventMessageDecoder)": (True, False, False), "stream checks (StreamGuard)": (False, True, False),
             "windowing (CountWindowCutter, 30,000)": (False, False, True), "all three": (True, True, True)}
    # (the later steps alone reuse three decoded messages: their times restart; the guard sees
    # them as in order within a message, which is what costs; the cutter copies them as any)
    chain(True, True, True)  # warm up (Numba)
    results = {name: [] for name in steps}
    for _ in range(runs):
        for name, flags in steps.items():
            results[name].append(chain(*flags))
    return results


# ----------------------------------------------------------------------------- through ROS 2
def subscribe(mode: str, expected: int) -> int:
    """The subscriber process: spin until ``expected`` messages or 3 s without one; print the
    executor thread's CPU per message as JSON."""
    import rclpy
    from dvs_msgs.msg import EventArray
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.task import Future
    from rclpy.parameter import Parameter
    from rclpy.qos import HistoryPolicy, QoSProfile, ReliabilityPolicy

    from focus_ros.windows import CountWindowCutter

    rclpy.init()
    state = dict(messages=0, events=0, windows=0, first_cpu=None, first_wall=None, last=time.monotonic())
    overrides = [Parameter(name, value=value) for name, value in (
        ("camera_info_timeout_s", 0.0), ("calibration.width", 240), ("calibration.height", 180),
        ("calibration.fx", 200.0), ("calibration.fy", 200.0), ("calibration.cx", 120.0), ("calibration.cy", 90.0))]
    node = rclpy.create_node("bench_event_input", parameter_overrides=overrides if mode != "bare" else [],
                             cli_args=["--ros-args", "-r", "events:=/dvs/events"])
    cutter = CountWindowCutter(WINDOW_EVENTS)

    def first():
        if state["first_cpu"] is None:
            state["first_cpu"], state["first_wall"] = time.process_time(), time.monotonic()

    if mode == "bare":
        def on_message(serialized):
            first()
            state["messages"] += 1
            state["last"] = time.monotonic()

        qos = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=1000, reliability=ReliabilityPolicy.BEST_EFFORT)
        node.create_subscription(EventArray, "events", on_message, qos, raw=True)
    else:
        from focus_ros.ros.event_input import EventInput

        def on_events(batch):
            first()
            state["events"] += len(batch.events)
            state["windows"] += len(cutter.push(batch.events))
            state["last"] = time.monotonic()

        event_input = EventInput(node, on_events, **({"own_thread": True} if mode == "input-thread" else {}))
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    done = Future()
    started = time.monotonic()

    def check_done():  # spun as rclpy.spin spins a node (no timeout per spin); this timer ends it
        if mode != "bare":
            state["messages"] = event_input.diagnostics()["messages_received"]
        idle = time.monotonic() - state["last"]
        if (state["messages"] >= expected or (state["first_cpu"] is not None and idle > 3)
                or (state["first_cpu"] is None and time.monotonic() - started > 30)):
            done.set_result(True)

    node.create_timer(0.25, check_done)
    print("ready", flush=True)
    executor.spin_until_future_complete(done)
    cpu = time.process_time() - (state["first_cpu"] or 0.0)
    wall = state["last"] - (state["first_wall"] or 0.0)
    print(json.dumps(dict(messages=state["messages"], windows=state["windows"], cpu_s=cpu, wall_s=wall)), flush=True)
    node.destroy_node()
    rclpy.shutdown()
    return 0


def through_ros(mode: str, path: Path, count: int) -> dict:
    from ros_harness import ros_environment

    env = ros_environment()
    subscriber = subprocess.Popen([sys.executable, __file__, "--subscribe", mode, "--messages", str(count)],
                                  env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert subscriber.stdout.readline().strip() == "ready"
        publisher = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_node.py"), "--publish", str(path),
                                    "--message-ms", "1"], env=env | {"ROS_DOMAIN_ID": env["ROS_DOMAIN_ID"]},
                                   capture_output=True, text=True, timeout=120)
        publisher_report = json.loads(publisher.stdout.strip().splitlines()[-1])
        report = json.loads(subscriber.communicate(timeout=120)[0].strip().splitlines()[-1])
    finally:
        if subscriber.poll() is None:
            subscriber.kill()
    report["us_per_message"] = report["cpu_s"] / max(report["messages"], 1) * 1e6
    report["core_share"] = report["cpu_s"] / max(report["wall_s"], 1e-9)
    report["publisher_late_median_ms"] = publisher_report["late_median_ms"]
    return report


def spread(values, digits=1) -> str:
    return f"{statistics.median(values):,.{digits}f} ({min(values):,.{digits}f}–{max(values):,.{digits}f})"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--messages", type=int, default=3000, help="messages per run through ROS 2 (1 per ms)")
    parser.add_argument("--skip-ros", action="store_true", help="only the in-process measurement")
    parser.add_argument("--modes", nargs="*", default=["bare", "input", "input-thread"],
                        choices=("bare", "input", "input-thread"), help="subscribers to measure through ROS 2")
    parser.add_argument("--subscribe", choices=("bare", "input", "input-thread"), help=argparse.SUPPRESS)  # internal
    args = parser.parse_args()
    if args.subscribe:
        if os.environ.get("BENCH_PROFILE"):  # cProfile of the subscriber process into this file
            import cProfile

            cProfile.runctx("subscribe(args.subscribe, args.messages)", globals(), locals(), os.environ["BENCH_PROFILE"])
            return 0
        return subscribe(args.subscribe, args.messages)
    print(f"uptime: {os.popen('uptime').read().strip()}")
    messages = peak_messages(args.messages)
    print(f"\nIn one process: {len(messages)} messages of {EVENTS_PER_MESSAGE} events, CPU µs per message, "
          f"median (range) of {args.runs} runs\n\n| step | µs per message |\n|---|---:|")
    for name, values in in_process_us_per_message(messages, args.runs).items():
        print(f"| {name} | {spread(values)} |", flush=True)
    if not args.skip_ros:
        print(f"\nThrough ROS 2: {len(messages)} messages at 1 kHz from the driver-like publisher process; the "
              f"subscriber process, median (range) of {args.runs} runs\n\n"
              "| subscriber | µs CPU per message | share of a core | messages received | publisher late ms (median) "
              "|\n|---|---:|---:|---:|---:|")
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / "messages.pickle"
            path.write_bytes(pickle.dumps(messages))
            results = {mode: [] for mode in args.modes}
            for _ in range(args.runs):
                for mode in results:  # alternating: both see the same load
                    results[mode].append(through_ros(mode, path, len(messages)))
        for mode, runs in results.items():
            label = {"bare": "bare raw subscription (rclpy's executor alone)",
                     "input": "EventInput + CountWindowCutter (the node's executor thread)",
                     "input-thread": "EventInput(own_thread=True) + CountWindowCutter"}[mode]
            print(f"| {label} | {spread([r['us_per_message'] for r in runs])} | "
                  f"{spread([100 * r['core_share'] for r in runs], 0)} % | "
                  f"{spread([r['messages'] for r in runs], 0)} | "
                  f"{spread([r['publisher_late_median_ms'] for r in runs], 2)} |")
    print(f"\nuptime: {os.popen('uptime').read().strip()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
