"""Time the event-camera simulator: simulated seconds per wall second, events per second.

Runs each preset once after a warm-up (JIT compilation / cache loading, scene
generation and orientation integration are timed separately as "setup"), one thread.
Prints a Markdown table: setup time, render steps, events, mean and peak event rate
(10-ms bins), wall time of ``simulate``, simulated s per wall s, events per wall s.

    .venv/bin/python benchmarks/bench_simulator.py [--presets rotation_short rotation six_dof]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from focus_ros.sources.simulator import PRESETS, make_preset


def warm_up() -> None:
    """Compile (or load from the numba cache) every kernel on a tiny excerpt."""
    for name in ("rotation_short", "six_dof"):
        make_preset(name, duration_s=0.05).simulate()


def measure(name: str, seed: int) -> dict:
    started = time.perf_counter()
    simulator = make_preset(name, seed=seed)
    setup_s = time.perf_counter() - started
    duration_s = simulator.trajectory.duration_s
    steps = len(simulator.step_times(0.0, duration_s)) - 1
    started = time.perf_counter()
    recording = simulator.simulate()
    wall_s = time.perf_counter() - started
    events = recording.events
    per_bin = np.bincount(events.t // 10_000_000)
    return dict(preset=name, duration_s=duration_s, setup_s=setup_s, steps=steps, events=len(events),
                mean_rate=len(events) / duration_s, peak_rate=per_bin.max() / 0.01, wall_s=wall_s,
                peak_deg_s=float(np.rad2deg(np.abs(recording.imu.angular_velocity).max())))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--presets", nargs="+", choices=sorted(PRESETS), default=["rotation_short", "rotation"])
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    started = time.perf_counter()
    warm_up()
    print(f"warm-up (JIT or cache load): {time.perf_counter() - started:.1f} s\n")
    print("| preset | simulated s | setup s | render steps | events | mean Mev/s | peak Mev/s (10 ms) "
          "| peak |ω| deg/s | wall s | simulated s / wall s | Mev / wall s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for name in args.presets:
        r = measure(name, args.seed)
        print(f"| {r['preset']} | {r['duration_s']:g} | {r['setup_s']:.1f} | {r['steps']:,} | {r['events']:,} "
              f"| {r['mean_rate'] / 1e6:.2f} | {r['peak_rate'] / 1e6:.2f} | {r['peak_deg_s']:.0f} "
              f"| {r['wall_s']:.1f} | {r['duration_s'] / r['wall_s']:.3f} | {r['events'] / r['wall_s'] / 1e6:.2f} |",
              flush=True)


if __name__ == "__main__":
    main()
