"""What an angular velocity window costs, and what each of the estimator's checks adds (issue 32, item 5).

The same consecutive 30,000-event windows (the simulated `rotation` at its fastest, 8.0-9.5 s,
seed 0, DAVIS240C; --preset rotation_short --start 0 --end 2 for the other) are estimated in order
with the node's settings (``real_time_settings()``), each variant in a process of its own, the
variants alternating round by round (A B C A B C ...: the machine's load hits all alike):

- other checkouts of focus_ros (``--code LABEL=PATH``, e.g. a worktree of 770b663, before issue 21's
  checks), each with a Numba cache of its own, estimate() called as it is by default (``PATH@on`` /
  ``PATH@off``: with ``covariance=True`` / ``False``, where that checkout has the option);
- this tree with ``estimate(covariance=True)`` (what ``estimate()`` did by default before issue 32;
  the node asks for it while imu or twist has a subscriber);
- this tree, ``estimate()`` as its callers call it.

Per variant: wall and CPU ms per window (each round's mean over the windows; median and range
over the rounds), CPU time over the first variant's in the same round, evaluations and optimizer
iterations per window, and whether its estimates equal the first variant's (largest |omega|
difference, withheld decisions that differ). Then, in one more pass of this tree with the
covariance, where a window's time goes: the optimizer's solve, the score at omega = 0, the
recovery, the constant-velocity check, the withholding tests, the covariance, the rest (each step
timed where estimate() calls it).

    git worktree add /tmp/old770 770b663 && git worktree add /tmp/head89 89a394b
    .venv/bin/python benchmarks/bench_estimator_checks.py --rounds 7 --code 770b663=/tmp/old770 \
        --code 89a394b=/tmp/head89 --code "89a394b, covariance=False=/tmp/head89@off"
"""

from __future__ import annotations

import argparse
import collections
import inspect
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("NUMBA_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
WINDOW_EVENTS = 30_000


def load_windows(path: str):
    """(calibration, windows) from the file ``simulate`` wrote, with whichever focus_ros is imported."""
    from focus_ros.camera import Calibration
    from focus_ros.events import Events
    data = np.load(path)
    c = data["calibration"]
    calibration = Calibration(int(c[0]), int(c[1]), *map(float, c[2:6]), tuple(map(float, c[6:])))
    events = Events(data["x"], data["y"], data["t"], data["p"])
    return calibration, [events[i:i + WINDOW_EVENTS] for i in range(0, len(events), WINDOW_EVENTS)]


def simulate(args, path: str) -> int:
    from focus_ros.sources.simulator import make_preset
    recording = make_preset(args.preset, None, 0, camera="davis240c").simulate(start_s=args.start, end_s=args.end)
    events, c = recording.events, recording.calibration
    count = len(events) // WINDOW_EVENTS * WINDOW_EVENTS
    np.savez(path, x=events.x[:count], y=events.y[:count], t=events.t[:count], p=events.p[:count],
             calibration=np.array([c.width, c.height, c.fx, c.fy, c.cx, c.cy, *c.distortion], dtype=np.float64))
    return count // WINDOW_EVENTS


def worker(path: str, covariance: bool | None, breakdown: bool) -> None:
    """One pass over the windows (after one untimed pass: kernels loaded), printed as JSON."""
    from focus_ros.estimators.angular_velocity import AngularVelocityEstimator, real_time_settings
    calibration, windows = load_windows(path)
    options = {} if covariance is None else {"covariance": covariance}
    if "covariance" not in inspect.signature(AngularVelocityEstimator.estimate).parameters:
        options = {}  # code from before the covariance: it has none to compute
    steps = timed_steps() if breakdown else None
    for _ in range(2):  # the first pass loads the kernels
        if steps is not None:
            steps.clear()
        estimator = AngularVelocityEstimator(calibration, real_time_settings())
        wall, cpu = time.perf_counter(), time.process_time()
        estimates = [estimator.estimate(window, **options) for window in windows]
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    print(json.dumps(dict(
        source=str(Path(inspect.getfile(AngularVelocityEstimator)).resolve()),
        wall_ms=1e3 * wall / len(windows), cpu_ms=1e3 * cpu / len(windows),
        evaluations=float(np.mean([e.evaluations for e in estimates])),
        iterations=float(np.mean([e.iterations for e in estimates])),
        omega=[[float(v) for v in e.angular_velocity] for e in estimates],
        withheld=[getattr(e, "withheld", "") or ("degenerate" if e.degenerate else "") for e in estimates],
        steps=None if steps is None else {k: 1e3 * v / len(windows) for k, v in steps.items()})))


def timed_steps() -> dict:
    """Time each step where estimate() calls it (a step nested in another counts in that one's)."""
    import focus_ros.estimators.angular_velocity as module
    from focus_ros.objective import Objective
    totals, stack = collections.defaultdict(float), []

    def wrap(owner, name, label, depth=1):
        function = getattr(owner, name)

        def timed(*args, **kwargs):
            counted = len(stack) == depth
            stack.append(label)
            start = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                stack.pop()
                if counted:
                    totals[label] += time.perf_counter() - start
        setattr(owner, name, timed)

    estimator = module.AngularVelocityEstimator
    for owner, name, label in ((Objective, "set_events", "the window's events prepared (set_events)"),
                               (estimator, "_solve", "the optimizer's solve"),
                               (Objective, "value", "the score at omega = 0 (one value)"),
                               (estimator, "_recover", "recovery (cold or doubtful windows)"),
                               (estimator, "_check_constant_velocity", "constant-velocity check"),
                               (estimator, "_doubtful", "doubtful-optimum test"),
                               (estimator, "image_motion_px", "image motion (beyond sensor, little motion)"),
                               (module, "angular_velocity_covariance", "covariance (3 gradients)")):
        if hasattr(owner, name):
            wrap(owner, name, label)
    wrap(estimator, "estimate", "whole estimate()", depth=0)
    return totals


def summary(values) -> str:
    return f"{np.median(values):.2f} ({min(values):.2f}-{max(values):.2f})"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--code", action="append", default=[], metavar="LABEL=PATH[@on|@off]",
                        help="another checkout of focus_ros (its root), e.g. a worktree of 770b663; repeatable")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--preset", default="rotation")
    parser.add_argument("--start", type=float, default=8.0, help="simulated from (s)")
    parser.add_argument("--end", type=float, default=9.5, help="simulated to (s)")
    parser.add_argument("--worker", nargs=3, metavar=("WINDOWS", "COVARIANCE", "BREAKDOWN"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        path, covariance, breakdown = args.worker
        worker(path, None if covariance == "default" else covariance == "on", breakdown == "yes")
        return 0
    with tempfile.TemporaryDirectory(prefix="bench_estimator_checks_") as folder:
        path = os.path.join(folder, "windows.npz")
        count = simulate(args, path)
        variants = []
        for text in args.code:
            label, _, code = text.rpartition("=")
            code, _, covariance = code.partition("@")
            variants.append((label, code, covariance or "default"))
        variants += [("this tree, covariance=True", str(ROOT), "on"), ("this tree, estimate()", str(ROOT), "default")]
        print(f"{args.preset} {args.start:g}-{args.end:g} s, seed 0, DAVIS240C: {count} windows of {WINDOW_EVENTS} "
              f"events, real_time_settings(); {args.rounds} rounds of {', '.join(v[0] for v in variants)}")
        results = collections.defaultdict(list)
        for _ in range(args.rounds + 1):  # one more round with the step timers (not in the table)
            breakdown = len(results[variants[-1][0]]) == args.rounds
            for index, (label, code, covariance) in enumerate(variants):
                if breakdown and index != len(variants) - 2:
                    continue
                environment = dict(os.environ, PYTHONPATH=code)
                if code != str(ROOT):  # another checkout's kernels in a cache of their own
                    environment["NUMBA_CACHE_DIR"] = os.path.join(folder, f"numba_{Path(code).name}")
                output = subprocess.run([sys.executable, __file__, "--worker", path, covariance,
                                         "yes" if breakdown else "no"], env=environment, cwd=folder,
                                        capture_output=True, text=True, check=True).stdout
                result = json.loads(output.splitlines()[-1])
                if not result["source"].startswith(str(Path(code).resolve()) + os.sep):
                    raise SystemExit(f"{label}: focus_ros came from {result['source']}, not from {code}")
                results["steps" if breakdown else label].append(result)
        first = results[variants[0][0]][0]
        print("\n| code, estimate() | wall ms/window | CPU ms/window | CPU / first row's, per round "
              "| evaluations/window | iterations/window | largest abs(omega) difference to the first row, rad/s "
              "| withheld decisions that differ |")
        print("|---|---|---|---|---|---|---|---|")
        for label, _, _ in variants:
            runs = results[label]
            omega, other = np.array(runs[0]["omega"]), np.array(first["omega"])
            published = ~(np.isnan(omega).any(axis=1) | np.isnan(other).any(axis=1))
            largest = float(np.max(np.abs(omega - other)[published], initial=0.0))
            differ = sum(a != b for a, b in zip(runs[0]["withheld"], first["withheld"]))
            ratios = [r["cpu_ms"] / f["cpu_ms"] for r, f in zip(runs, results[variants[0][0]])]
            print(f"| {label} | {summary([r['wall_ms'] for r in runs])} | {summary([r['cpu_ms'] for r in runs])} | "
                  f"{summary(ratios)} | {runs[0]['evaluations']:.2f} | {runs[0]['iterations']:.2f} | {largest:.3g} "
                  f"| {differ} |")
        steps = results["steps"][0]["steps"]
        whole = steps.pop("whole estimate()")
        print("\n| step of estimate() (this tree, with the covariance; one pass) | ms/window |\n|---|---|")
        for label, value in steps.items():
            print(f"| {label} | {value:.3f} |")
        print(f"| the rest (bookkeeping, the withheld message, the estimate) | {whole - sum(steps.values()):.3f} |")
        print(f"| whole estimate() | {whole:.3f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
