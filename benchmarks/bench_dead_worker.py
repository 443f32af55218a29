"""How soon an estimator process killed while no job flows is noticed: by its runner, and on the
angular velocity node's /diagnostics.

The procedures are the tests' (test/test_worker.py
``test_a_worker_killed_while_no_job_flows_is_noticed_and_restarted_at_once`` and
test/test_ros_outputs.py ``test_an_estimator_killed_while_no_events_flow_is_reported_at_once``:
the tests assert that it is noticed and restarted; this prints how soon):

- runner: an :class:`~focus_ros.runtime.EstimatorRunner` (angular velocity, DAVIS240C, its
  estimator in a process of its own) configured, left idle 0.5 s, its process SIGKILLed; the
  time until ``counts["restarts"]`` is 1 (polled every 5 ms). The runner's thread looks at an
  idle engine every ``WATCH_PERIOD_S`` (0.5 s), so about 0-0.5 s is expected;
- node: ``angular_velocity_node`` started as ``ros2 run`` does (davis240c.yaml), idle 1 s after
  its first report naming the estimator's pid, that process SIGKILLed; the time until a
  /diagnostics report counts ``worker_restarts`` >= 1 (the runner's watch, then the next report:
  /diagnostics comes once a second, so up to about 1.5 s is expected).

Printed per run, then the median and range of each.

    .venv/bin/python benchmarks/bench_dead_worker.py --runs 5
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "test"))

from ros_harness import NodeProcess, client_node, executable, spin_until  # noqa: E402


class _Quiet:
    """The runner's logger and warn_once, keeping nothing."""

    def info(self, text):
        pass

    warning = error = info

    def warn_once(self, key, text):
        pass


def runner_once() -> float:
    """Seconds from the SIGKILL of an idle runner's estimator process to the restart counted."""
    from focus_ros.camera import Calibration
    from focus_ros.estimators.angular_velocity import real_time_settings
    from focus_ros.runtime import EstimatorRunner

    log = _Quiet()
    runner = EstimatorRunner("angular_velocity", Calibration.davis240c(), real_time_settings(), in_process=True,
                             on_result=lambda job, result: None, logger=log, warn_once=log.warn_once,
                             capacity_events=5000)
    try:
        runner.configure(Calibration.davis240c(), real_time_settings())
        deadline = time.monotonic() + 60.0
        while runner.pid == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        if runner.pid == 0:
            raise RuntimeError("the runner's estimator process did not start within 60 s")
        time.sleep(0.5)  # the configuration taken: the runner's thread idles
        os.kill(runner.pid, signal.SIGKILL)
        killed = time.monotonic()
        while runner.counts["restarts"] == 0 and time.monotonic() < killed + 10.0:
            time.sleep(0.005)
        if runner.counts["restarts"] == 0:
            raise RuntimeError("the killed estimator was not noticed within 10 s")
        return time.monotonic() - killed
    finally:
        runner.stop()


def _values(report) -> dict:
    return {pair.key: pair.value for status in report.status for pair in status.values}


def node_once(folder: Path) -> float:
    """Seconds from the SIGKILL of an idle node's estimator process to a /diagnostics report
    counting the restart."""
    from diagnostic_msgs.msg import DiagnosticArray

    with client_node("dead_worker_bench") as (env, client, executor):
        reports = []
        client.create_subscription(DiagnosticArray, "/diagnostics", reports.append, 10)
        node = NodeProcess([executable("angular_velocity_node"), "--ros-args", "--params-file",
                            str(ROOT / "config" / "davis240c.yaml"), "-r", "events:=/dvs/events",
                            "-p", "camera_info_timeout_s:=0.3"], env, folder / "node.log")

        def latest() -> dict:
            return _values(reports[-1]) if reports else {}

        try:
            if not spin_until(executor, lambda: int(latest().get("estimator_process_pid", 0)) > 0, 60.0, 0.005):
                raise RuntimeError(f"no report naming the estimator process within 60 s; log: {folder / 'node.log'}")
            pid = int(latest()["estimator_process_pid"])
            spin_until(executor, lambda: False, 1.0, 0.005)  # the node idles: nothing in flight, nothing queued
            os.kill(pid, signal.SIGKILL)
            killed = time.monotonic()
            if not spin_until(executor, lambda: int(latest().get("worker_restarts", 0)) >= 1, 10.0, 0.005):
                raise RuntimeError(f"the restart was not reported within 10 s; log: {folder / 'node.log'}")
            return time.monotonic() - killed
        finally:
            node.stop(timeout=5.0)


def summary(name: str, times: list[float]) -> str:
    return f"{name}: median {statistics.median(times):.2f} s [{min(times):.2f}-{max(times):.2f}] over {len(times)} runs"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--only", choices=["runner", "node"], default=None, help="measure one of the two only")
    args = parser.parse_args()
    print("load:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    results = {}
    if args.only in (None, "runner"):
        results["runner: kill -> restart counted"] = times = []
        for run in range(args.runs):
            times.append(runner_once())
            print(f"runner run {run + 1}: noticed {times[-1]:.3f} s after the kill", flush=True)
    if args.only in (None, "node"):
        results["node: kill -> restart on /diagnostics"] = times = []
        with tempfile.TemporaryDirectory() as temporary:
            for run in range(args.runs):
                case = Path(temporary) / f"run_{run}"
                case.mkdir()
                times.append(node_once(case))
                print(f"node run {run + 1}: reported {times[-1]:.3f} s after the kill", flush=True)
    for name, times in results.items():
        print(summary(name, times))
    print("load:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    return 0


if __name__ == "__main__":
    sys.exit(main())
