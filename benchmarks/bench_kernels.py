"""Compiling the kernels: a whole precompile, and what each node kind compiles at a cold start.

    .venv/bin/python benchmarks/bench_kernels.py [--runs 3] [--kind-runs 3]

Every run is a fresh process with an empty NUMBA_CACHE_DIR (a temporary folder, removed after):

1. ``python -m focus_ros.kernels`` (what ``make setup`` and the colcon install run), timed from
   outside (process start to exit: imports included) and per group (its own progress lines);
2. per estimator kind, what its node compiles before its first result: the estimator built with
   the node's default settings on a DAVIS240C and one job run
   (:func:`focus_ros.kernels.precompile.run_like_a_node`), timed inside the process (imports
   excluded): the figure of :func:`focus_ros.kernels.expected_compile_s`;
3. ``missing_kernels()`` on the filled cache (every module imported beforehand, as in a node).

Prints Markdown tables with the median and range, and ``uptime`` before and after: the
machine is shared, compare within one run.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

from focus_ros.kernels import GROUPS, KINDS

NODE_START = """
import json, sys, time
from focus_ros.camera import SENSORS
from focus_ros.kernels.precompile import run_like_a_node
import focus_ros.runtime.kinds
started = time.perf_counter()
run_like_a_node(sys.argv[1], SENSORS["davis240c"].lens)
print(json.dumps(time.perf_counter() - started))
"""

CHECK = """
import json, time
from focus_ros.kernels import missing_kernels, modules_of
from focus_ros.kernels.cache import compiled_kernels
compiled_kernels(modules_of())
started = time.perf_counter()
missing = missing_kernels()
print(json.dumps([time.perf_counter() - started, len(missing)]))
"""


def python(arguments: list[str], cache_dir: str) -> tuple[str, float]:
    """(stdout, wall s) of the interpreter run with ``arguments`` and its numba cache in ``cache_dir``."""
    started = time.perf_counter()
    completed = subprocess.run([sys.executable, *arguments], env=dict(os.environ, NUMBA_CACHE_DIR=cache_dir),
                               capture_output=True, text=True, check=True, cwd=cache_dir)
    return completed.stdout, time.perf_counter() - started


def summary(values: list[float]) -> str:
    return f"{statistics.median(values):.1f} ({min(values):.1f}-{max(values):.1f})"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="cold precompiles")
    parser.add_argument("--kind-runs", type=int, default=3, help="cold node starts per kind")
    args = parser.parse_args()
    print(f"uptime: {subprocess.run(['uptime'], capture_output=True, text=True).stdout.strip()}")

    totals, groups, checks = [], {name: [] for name in GROUPS}, []
    for run in range(args.runs):
        with tempfile.TemporaryDirectory(prefix="numba_cache_") as cache_dir:
            output, wall = python(["-m", "focus_ros.kernels"], cache_dir)
            totals.append(wall)
            for name in GROUPS:
                groups[name].append(float(re.search(rf"^\s+{name}\s+([\d.]+) s", output, re.M).group(1)))
            checks.append(json.loads(python(["-c", CHECK], cache_dir)[0].strip().splitlines()[-1]))
        print(f"precompile run {run + 1}: {wall:.1f} s", flush=True)
    print("\n| cold `python -m focus_ros.kernels` | median (range), s |\n|---|---|")
    print(f"| whole command (process start to exit) | {summary(totals)} |")
    for name, values in groups.items():
        print(f"| group {name} | {summary(values)} |")
    print(f"\nmissing_kernels() on the filled cache: {summary([1000 * c[0] for c in checks])} ms, "
          f"{max(c[1] for c in checks)} missing")

    print("\n| node kind: build + first job from an empty cache (DAVIS240C, node defaults) | median (range), s |")
    print("|---|---|")
    for kind in KINDS:
        times = []
        for _ in range(args.kind_runs):
            with tempfile.TemporaryDirectory(prefix="numba_cache_") as cache_dir:
                times.append(json.loads(python(["-c", NODE_START, kind], cache_dir)[0].strip().splitlines()[-1]))
        print(f"| {kind} | {summary(times)} |", flush=True)
    print(f"\nuptime: {subprocess.run(['uptime'], capture_output=True, text=True).stdout.strip()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
