"""Time the event-camera simulator: simulated seconds per wall second, events per second, per sensor.

Runs each (preset, sensor) after a warm-up (JIT compilation / cache loading; scene generation
and orientation integration are timed separately as "setup"), one thread, ``--repeats`` times
(median and range of the wall time). Prints a Markdown table: setup time, render steps,
events, mean and peak event rate (10-ms bins), wall time of ``simulate``, simulated s per wall
s, events per wall s, and ns per pixel and render step (what a larger sensor costs).

    .venv/bin/python benchmarks/bench_simulator.py [--presets rotation_short rotation six_dof]
    .venv/bin/python benchmarks/bench_simulator.py --sensors davis240c davis346 dvxplorer imx636 \\
        --span 0.02 --repeats 3          # 20 ms from t = 1 s of each preset, every sensor

``--span S`` simulates [1 s, 1 s + S] of the preset's trajectory instead of all of it (a
1280x720 sensor renders 21x the pixels of a DAVIS240C at 4.4x the steps: keep it short).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from focus_ros.camera import SENSORS
from focus_ros.sources.simulator import PRESETS, make_preset

#: start (s) of the excerpt that --span simulates
SPAN_START_S = 1.0


def warm_up() -> None:
    """Compile (or load from the numba cache) every kernel on a tiny excerpt."""
    for name in ("rotation_short", "six_dof"):
        make_preset(name, duration_s=0.05).simulate()


def measure(name: str, seed: int, sensor: str, span_s: float | None, repeats: int) -> dict:
    started = time.perf_counter()
    simulator = make_preset(name, seed=seed, camera=sensor)
    setup_s = time.perf_counter() - started
    start_s = 0.0 if span_s is None else SPAN_START_S
    end_s = simulator.trajectory.duration_s if span_s is None else SPAN_START_S + span_s
    steps = len(simulator.step_times(start_s, end_s)) - 1
    walls = []
    for _ in range(repeats):
        started = time.perf_counter()
        recording = simulator.simulate(start_s, end_s)
        walls.append(time.perf_counter() - started)
    events = recording.events
    duration_s = end_s - start_s
    per_bin = np.bincount((events.t - events.t[0]) // 10_000_000) if len(events) else np.zeros(1)
    wall_s = float(np.median(walls))
    return dict(preset=name, sensor=sensor, duration_s=duration_s, setup_s=setup_s, steps=steps, events=len(events),
                mean_rate=len(events) / duration_s, peak_rate=per_bin.max() / 0.01, wall_s=wall_s,
                wall_range=(min(walls), max(walls)), pixels=simulator.calibration.width * simulator.calibration.height,
                peak_deg_s=float(np.rad2deg(np.abs(recording.imu.angular_velocity).max())))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--presets", nargs="+", choices=sorted(PRESETS), default=["rotation_short", "rotation"])
    parser.add_argument("--sensors", nargs="+", choices=list(SENSORS), default=["davis240c"])
    parser.add_argument("--span", type=float, metavar="S", help=f"simulate [{SPAN_START_S:g}, {SPAN_START_S:g} + S] s "
                        "of each preset instead of the whole trajectory")
    parser.add_argument("--repeats", type=int, default=1, help="timed runs per row (median and range)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    started = time.perf_counter()
    warm_up()
    print(f"warm-up (JIT or cache load): {time.perf_counter() - started:.1f} s\n")
    print("| preset | sensor | simulated s | setup s | render steps | events | mean Mev/s | peak Mev/s (10 ms) "
          "| peak |ω| deg/s | wall s (median, range) | simulated s / wall s | Mev / wall s | ns per pixel-step |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for name in args.presets:
        for sensor in args.sensors:
            r = measure(name, args.seed, sensor, args.span, args.repeats)
            print(f"| {r['preset']} | {r['sensor']} | {r['duration_s']:g} | {r['setup_s']:.1f} | {r['steps']:,} "
                  f"| {r['events']:,} | {r['mean_rate'] / 1e6:.2f} | {r['peak_rate'] / 1e6:.2f} | {r['peak_deg_s']:.0f} "
                  f"| {r['wall_s']:.2f} ({r['wall_range'][0]:.2f}-{r['wall_range'][1]:.2f}) "
                  f"| {r['duration_s'] / r['wall_s']:.4f} | {r['events'] / r['wall_s'] / 1e6:.2f} "
                  f"| {r['wall_s'] / max(r['steps'] * r['pixels'], 1) * 1e9:.1f} |", flush=True)


if __name__ == "__main__":
    main()
