"""Evaluation grids serial, on the local pool and on Ray (issue 35): wall time, CPU time, speed-up,
and Ray's overhead per task.

    .venv/bin/python benchmarks/bench_cluster.py [--runs 3] [--sim-end 1.0] [--quick]

Starts a Ray cluster on loopback (a head and a worker node of one CPU each, ``ray start`` in
subprocesses, test/ray_cluster.py; stopped at the end), then, ``--runs`` times, the same grid —
``focus-ros evaluate`` (2 seeded ``rotation_short`` sequences x 5 losses x both polarity modes)
then ``focus-ros evaluate-flow`` (the same sequences x 5 losses) — in four configurations,
interleaved so that a load from elsewhere perturbs all of them alike:

- serial: ``--workers 1`` (the jobs one after the other in the command's process);
- local pool: ``--workers 2``;
- Ray: ``--ray ADDRESS`` (workers memory-map the events from the output folder);
- Ray, shipped: ``--ray ADDRESS --ship-data`` (events through Ray's object store).

For each: the commands' wall time (simulation, jobs, tables, plots), the grids' wall time (the
jobs), the sum of the jobs' wall and CPU times, the driver's delivering and writing time, the
longest job (from each run's grid_run.json); medians and ranges. Then Ray's overhead: the round trip of an empty
task (median of 200), the rate of 1000 empty tasks submitted at once, ``ray.put`` of 10 M events.
Prints Markdown tables. ``--quick``: 1 run of a smaller grid (a check that it works, ~2 min).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "test"))

from ray_cluster import LoopbackRayCluster  # noqa: E402

LOSSES = "variance,mean_square,gradient_magnitude,laplacian_magnitude,area_exponential"


def grid_commands(sim_end: float, output: Path) -> list[list[str]]:
    """The grid: evaluate and evaluate-flow on the same two sequences."""
    sequences = ["--simulate", "rotation_short", "--sim-end", f"{sim_end:g}", "--seed", "0,1"]
    return [["evaluate", *sequences, "--losses", LOSSES, "--polarity", "both", "--plot-losses", "none", "--quiet",
             "-o", str(output / "evaluate")],
            ["evaluate-flow", *sequences, "--losses", LOSSES, "--max-windows", "10", "--quiet",
             "-o", str(output / "flow")]]


def run_grid(commands: list[list[str]], options: list[str]) -> dict:
    """Run the grid's commands with the executor options: wall time of the commands (s) and the
    sums over both commands of grid_run.json's figures."""
    figures = {"command_s": 0.0, "wall_s": 0.0, "job_s": 0.0, "cpu_s": 0.0, "deliver_s": 0.0, "save_s": 0.0,
               "jobs": 0, "longest_s": 0.0}
    for command in commands:
        started = time.perf_counter()
        completed = subprocess.run([sys.executable, "-m", "focus_ros.cli", *command, *options], capture_output=True,
                                   text=True, cwd=ROOT)
        figures["command_s"] += time.perf_counter() - started
        if completed.returncode:
            raise SystemExit(f"{' '.join(command + options)} failed:\n{completed.stderr[-2000:]}")
        record = json.loads((Path(command[command.index("-o") + 1]) / "grid_run.json").read_text())
        for name in ("wall_s", "job_s", "cpu_s", "deliver_s", "save_s"):
            figures[name] += record[name]
        figures["jobs"] += len(record["ran"])
        figures["longest_s"] = max([figures["longest_s"], *(job["wall_s"] for job in record["jobs"].values())])
    return figures


def ray_overhead(address: str) -> dict:
    """Empty-task round trip (ms, median and range of 200 sequential), the rate of 1000 empty
    tasks in flight at once (tasks/s), and ray.put of 10 M events (s, and MB)."""
    import numpy as np
    import ray

    ray.init(address=address, logging_level="ERROR", log_to_driver=False)
    try:
        @ray.remote(num_cpus=1)
        def empty():
            return None

        ray.get([empty.remote() for _ in range(20)])  # workers started
        trips = []
        for _ in range(200):
            started = time.perf_counter()
            ray.get(empty.remote())
            trips.append((time.perf_counter() - started) * 1e3)
        started = time.perf_counter()
        ray.get([empty.remote() for _ in range(1000)])
        rate = 1000 / (time.perf_counter() - started)
        count = 10_000_000
        events = (np.zeros(count, np.uint16), np.zeros(count, np.uint16), np.arange(count, dtype=np.int64),
                  np.ones(count, np.int8))
        started = time.perf_counter()
        reference = ray.put(events)
        put_s = time.perf_counter() - started
        del reference
        return {"trip_ms": trips, "rate": rate, "put_s": put_s, "put_mb": sum(a.nbytes for a in events) / 1e6}
    finally:
        ray.shutdown()


def _spread(values) -> str:
    return f"{statistics.median(values):.1f} ({min(values):.1f}–{max(values):.1f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--sim-end", type=float, default=1.0, help="seconds of each simulated sequence (default 1)")
    parser.add_argument("--quick", action="store_true", help="1 run of 0.3-s sequences")
    args = parser.parse_args()
    runs, sim_end = (1, 0.3) if args.quick else (args.runs, args.sim_end)
    with tempfile.TemporaryDirectory(prefix="bench_cluster_") as folder:
        folder = Path(folder)
        cluster = LoopbackRayCluster(folder / "ray", nodes=2, cpus=1).start()
        try:
            configurations = {"serial (--workers 1)": ["--workers", "1"], "local pool (--workers 2)": ["--workers", "2"],
                              "Ray, 2 nodes x 1 CPU": ["--ray", cluster.address],
                              "Ray, 2 nodes x 1 CPU, --ship-data": ["--ray", cluster.address, "--ship-data"]}
            results = {name: [] for name in configurations}
            for run in range(runs):
                for index, (name, options) in enumerate(configurations.items()):
                    output = folder / f"run{run}_{index}"
                    results[name].append(run_grid(grid_commands(sim_end, output), options))
                    print(f"run {run + 1}/{runs} {name}: {results[name][-1]}", file=sys.stderr)
            overhead = ray_overhead(cluster.address)
        finally:
            cluster.stop()
            left = cluster.alive()
            if left:
                print(f"warning: processes of the cluster still alive: {left}", file=sys.stderr)
    serial_wall = statistics.median(figures["wall_s"] for figures in results["serial (--workers 1)"])
    jobs = results["serial (--workers 1)"][0]["jobs"]
    print(f"Grid: 2 sequences of rotation_short ({sim_end:g} s each) x {LOSSES.count(',') + 1} losses: evaluate "
          f"(both polarity modes) and evaluate-flow (10 windows): {jobs} jobs; medians (ranges) of {runs} runs, s.\n")
    print("| configuration | commands' wall | grid wall | speed-up over serial (grid wall) | sum of job times | "
          "job CPU | job times / grid wall | idle slot time per job | driver: deliver + write |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name, series in results.items():
        slots = 1 if name.startswith("serial") else 2
        speedups = [serial_wall / figures["wall_s"] for figures in series]
        own = [figures["job_s"] / figures["wall_s"] for figures in series]
        idle = [(slots * figures["wall_s"] - figures["job_s"]) / figures["jobs"] for figures in series]
        print(f"| {name} | {_spread([f['command_s'] for f in series])} | {_spread([f['wall_s'] for f in series])} | "
              f"{statistics.median(speedups):.2f}x ({min(speedups):.2f}–{max(speedups):.2f}) | "
              f"{_spread([f['job_s'] for f in series])} | {_spread([f['cpu_s'] for f in series])} | "
              f"{statistics.median(own):.2f}x | {statistics.median(idle):.2f} | "
              f"{statistics.median(f['deliver_s'] for f in series):.2f} + "
              f"{statistics.median(f['save_s'] for f in series):.3f} |")
    trips = overhead["trip_ms"]
    longest = [figures["longest_s"] for figures in results["serial (--workers 1)"]]
    print(f"\nLongest job (serial runs): {_spread(longest)} s.")
    print(f"\nRay overhead: empty task round trip {statistics.median(trips):.2f} ms "
          f"(range {min(trips):.2f}–{max(trips):.2f}, 200 sequential); {overhead['rate']:.0f} empty tasks/s "
          f"with 1000 in flight; ray.put of 10 M events ({overhead['put_mb']:.0f} MB) {overhead['put_s']:.2f} s")


if __name__ == "__main__":
    main()
