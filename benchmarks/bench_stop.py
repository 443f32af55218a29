"""How long each estimating node takes to stop after SIGINT or SIGTERM, in each state.

The states and the procedure are test/node_states.py's (the test asserts the 5-s bound; this
prints the times): each node is started as ``ros2 run`` does, brought into the state (idle,
compiling with an empty Numba cache, estimating a replayed bag, its worker stopped, its
worker killed), signalled, and timed until it has exited; "left" counts processes of its own
still alive 2 s after. Printed per (node, state, signal): median and range over --runs.

    .venv/bin/python benchmarks/bench_stop.py --runs 3
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "test"))

from node_states import NODES, STATES, stop_in_state, write_bags  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--nodes", nargs="*", default=list(NODES), choices=list(NODES))
    parser.add_argument("--states", nargs="*", default=list(STATES), choices=list(STATES))
    parser.add_argument("--signals", nargs="*", default=["SIGINT", "SIGTERM"], choices=["SIGINT", "SIGTERM"])
    args = parser.parse_args()
    print("load:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    with tempfile.TemporaryDirectory() as temporary:
        folder = Path(temporary)
        bags = write_bags(folder)
        print(f"{'node':<22} {'state':<15} {'signal':<8} {'stop s (median [range])':<26} not stopped  left")
        for node in args.nodes:
            for state in args.states:
                for signal_name in args.signals:
                    times, not_stopped, left = [], 0, 0
                    for run in range(args.runs):
                        case = folder / f"{node}_{state}_{signal_name}_{run}"
                        case.mkdir()
                        stopped = stop_in_state(node, state, signal_name, bags, case, bound_s=10.0)
                        if stopped.took_s is None:
                            not_stopped += 1
                        else:
                            times.append(stopped.took_s)
                        left += len(stopped.left)
                    figure = (f"{statistics.median(times):.2f} [{min(times):.2f}-{max(times):.2f}]" if times else "-")
                    print(f"{node:<22} {state:<15} {signal_name:<8} {figure:<26} {not_stopped:<12} {left}", flush=True)
    print("load:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    return 0


if __name__ == "__main__":
    sys.exit(main())
