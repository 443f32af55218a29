"""Evaluation benchmark: wall time of an all-loss ``focus-ros evaluate`` of a simulated sequence,
and the per-loss timing column it measures.

    .venv/bin/python benchmarks/bench_evaluation.py [--duration 10] [--every 1] [--output DIR]

Simulates the ``rotation`` preset (seed 0) for --duration seconds, evaluates all losses in
both polarity modes over every --every-th window of 30,000 events on all cores, and prints
the wall time (simulation included and excluded) and a Markdown table of µs per
value+gradient evaluation and µs per loss evaluation (medians, from the run's table.csv).
The full benchmark (--duration 10 --every 1) takes tens of minutes on 2 cores; --every 10
gives the per-loss timings and a wall time to scale in a few minutes. Timings vary ±30 %.
"""

from __future__ import annotations

import argparse
import csv
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from focus_ros.cli import main  # noqa: E402


def run(duration_s: float, every: int, output: Path, workers: int | None) -> None:
    from focus_ros.evaluation.sequence import simulate_sequence

    started = time.perf_counter()
    recording = simulate_sequence("rotation", duration_s, 0)
    simulated_s = time.perf_counter() - started
    arguments = ["evaluate", "--simulate", "rotation", "--duration", str(duration_s), "--seed", "0",
                 "--every", str(every), "-o", str(output), "--quiet", "--plot-losses", "none"]
    if workers:
        arguments += ["--workers", str(workers)]
    started = time.perf_counter()
    code = main(arguments)
    total_s = time.perf_counter() - started
    if code != 0:
        raise SystemExit(f"evaluate failed with exit code {code}")
    windows = len(recording.events) // 30_000
    print(f"rotation preset, {duration_s:g} s, {len(recording.events):,} events, {windows} windows, "
          f"every {every}: evaluate wall time {total_s:.1f} s (of which simulation about {simulated_s:.1f} s)")
    print()
    print("| loss | polarity | µs per value+gradient | µs per loss evaluation |")
    print("|---|---|---:|---:|")
    with open(output / "table.csv", newline="") as handle:
        for row in csv.DictReader(handle):
            if row["status"] == "ok":
                print(f"| {row['title']} | {row['polarity']} | {float(row['us_per_evaluation']):.0f} | "
                      f"{float(row['us_per_loss_evaluation']):.1f} |")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=10.0, help="simulated seconds (default 10)")
    parser.add_argument("--every", type=int, default=1, help="evaluate every K-th window (default 1)")
    parser.add_argument("--workers", type=int, default=None, help="processes (default: all cores)")
    parser.add_argument("--output", type=Path, default=None, help="output folder (default: a temporary one)")
    arguments = parser.parse_args()
    if arguments.output is not None:
        run(arguments.duration, arguments.every, arguments.output, arguments.workers)
    else:
        with tempfile.TemporaryDirectory() as folder:
            run(arguments.duration, arguments.every, Path(folder), arguments.workers)
