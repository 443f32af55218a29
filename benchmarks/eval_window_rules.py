"""Which windows make the angular velocity estimate best, per sensor and motion: the table that
chose the auto windows' rule (issue 32; EVALUATION.md, docs/evaluation/window_rules.md).

- Sequences: the simulated rotation of benchmarks/bench_sensors.py (the sensor's size,
  intrinsics and lens distortion, a textured panorama, an oscillation at a constant amplitude:
  the peak on every axis) for each sensor preset and a slow, a medium and a fast peak; two sets
  of seeds, one to choose the rule on (``--set tune``), one to report it on (``--set report``),
  different scenes and motion profiles. Simulated once into ``--cache``.
- Candidates: auto windows (:class:`focus_ros.windows.WindowRule`) with the fields a candidate
  names changed, and fixed windows of N events every S events, N from a ladder of events per
  IWE pixel; each run through :class:`focus_ros.pipelines.angular_velocity.AngularVelocityPipeline`
  offline, as ``focus-ros estimate`` runs it (the node's estimator settings, the IWE binned as the
  node chooses, auto windows thinned to ``WindowRule.max_events``).
- Printed per sequence and candidate: the RMS error (deg/s, pooled over the axes) of the
  published estimates after the first 0.1 s, its ratio to the best fixed window's on that
  sequence, the windows published / withheld, the median window length (ms) and the median time
  between estimates (ms; the output period); then per candidate the worst ratio over the set.

    .venv/bin/python benchmarks/eval_window_rules.py --set tune
    .venv/bin/python benchmarks/eval_window_rules.py --set report --sensors davis240c davis346
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_sensors import cached_recording, simulate_rotation  # noqa: E402

from focus_ros.estimators.angular_velocity import AngularVelocityEstimator  # noqa: E402
from focus_ros.pipelines.angular_velocity import AngularVelocityPipeline, WindowSettings, real_time_defaults  # noqa: E402
from focus_ros.windows import WindowRule  # noqa: E402

#: per sensor preset: the slow, medium and fast peaks (deg/s per axis) and the simulated seconds
MOTIONS = {
    "davis240c": ((120.0, 250.0, 500.0), 1.5),
    "davis346": ((80.0, 160.0, 300.0), 1.5),
    "dvxplorer": ((60.0, 120.0, 200.0), 1.0),
    "imx636": ((40.0, 80.0, 150.0), 0.6),
}
#: the seeds of each set: scenes and motion profiles; the rule is chosen on "tune" only
SEEDS = {"tune": (11,), "report": (23,)}
#: the start of each sequence left out: the first windows, planned before any estimate
COLD_S = 0.1
#: the auto windows' rule before issue 32 (3 deg of rotation, at least 0.3 events per IWE pixel,
#: 1 ms to 0.1 s, one window per output period)
BEFORE = WindowRule(rotation_deg=3.0, events_per_pixel=0.3, min_duration_s=0.001, max_duration_s=0.1,
                    stride_share=1.0)
#: a fixed window counts as the best only if it publishes at least this share of its windows
PUBLISHED_SHARE = 0.9
#: fixed windows: events per IWE pixel of the ladder
FIXED_EVENTS_PER_PIXEL = (0.35, 0.7, 1.4, 2.8)


@dataclass(frozen=True)
class Candidate:
    name: str
    rule: WindowRule | None = None          # auto windows with this rule
    events_per_pixel: float = 0.0           # or fixed windows of this many events per IWE pixel
    overlap: int = 1                        # ... every 1/overlap of them


def candidates() -> list[Candidate]:
    """The auto rules tried and the fixed windows they are measured against."""
    rules = [Candidate("auto (before issue 32)", BEFORE), Candidate("auto (the defaults)", WindowRule())]
    for floor_s in (0.001, 0.015):  # the defaults' shortest window (20 ms) lower
        rules.append(Candidate(f"auto, the defaults with windows from {floor_s * 1e3:g} ms",
                               replace(WindowRule(), min_duration_s=floor_s)))
    for events_per_pixel in (0.5, 0.7, 1.0):
        for max_duration_s in (0.025, 0.035):
            rule = replace(BEFORE, events_per_pixel=events_per_pixel, stride_share=0.5, max_duration_s=max_duration_s)
            if rule != replace(WindowRule(), min_duration_s=0.001):  # measured once, by that name (above)
                rules.append(Candidate(f"auto, >= {events_per_pixel:g} ev/px, 3 deg, stride 0.5, <= "
                                       f"{max_duration_s * 1e3:g} ms", rule))
    fixed = [Candidate(f"fixed {events_per_pixel:g} ev/px" + (f" /{overlap}" if overlap > 1 else ""),
                       events_per_pixel=events_per_pixel, overlap=overlap)
             for events_per_pixel in FIXED_EVENTS_PER_PIXEL for overlap in (1, 2)]
    return rules + fixed


def sequence(sensor: str, peak_deg_s: float, seconds: float, seed: int, cache: Path):
    """The sensor's rotation at this peak and seed, simulated once into ``cache``."""
    return cached_recording(cache / f"{sensor}_{peak_deg_s:g}_{seconds:g}_{seed}.pickle",
                            lambda: simulate_rotation(sensor, peak_deg_s, seconds, seed),
                            f"{seconds:g} s of {sensor} at {peak_deg_s:g} deg/s, seed {seed}")


def evaluate(recording, candidate: Candidate) -> dict:
    """One candidate on one recording (offline, as focus-ros estimate)."""
    calibration, events = recording.calibration, recording.events
    settings = real_time_defaults()
    probe = AngularVelocityPipeline(calibration, settings)
    pixels = -(-calibration.width // probe.binning) * -(-calibration.height // probe.binning)
    if candidate.rule is not None:
        pipeline = AngularVelocityPipeline(calibration, settings, WindowSettings(), candidate.rule)
    else:
        count = int(round(candidate.events_per_pixel * pixels))
        pipeline = AngularVelocityPipeline(calibration, settings,
                                           WindowSettings(window_events=count,
                                                          window_stride_events=count // candidate.overlap))
    estimator = AngularVelocityEstimator(calibration, pipeline.settings)
    start_ns = int(events.t[0]) + int(COLD_S * 1e9)
    stamps, omegas, lengths, withheld = [], [], [], 0
    for job, outcome in pipeline.run([events], estimator.estimate, reset=estimator.reset):
        estimate = outcome.estimate
        if estimate.t_ref_ns < start_ns:
            continue
        lengths.append(job.duration_s * 1e3)
        if outcome.publish:
            stamps.append(estimate.t_ref_ns)
            omegas.append(estimate.angular_velocity)
        else:
            withheld += 1
    gyro = recording.imu
    truth = np.stack([np.interp(stamps, gyro.t, gyro.angular_velocity[:, axis]) for axis in range(3)], axis=1)
    errors = np.rad2deg(np.asarray(omegas) - truth)
    return dict(rms=float(np.sqrt(np.mean(errors ** 2))) if len(errors) else float("nan"), published=len(stamps),
                withheld=withheld, length_ms=float(np.median(lengths)) if lengths else float("nan"),
                period_ms=float(np.median(np.diff(stamps)) * 1e-6) if len(stamps) > 1 else float("nan"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--set", choices=sorted(SEEDS), default="tune")
    parser.add_argument("--sensors", nargs="+", choices=sorted(MOTIONS), default=list(MOTIONS))
    parser.add_argument("--motions", nargs="+", choices=("slow", "medium", "fast"), default=["slow", "medium", "fast"])
    parser.add_argument("--only", nargs="*", default=None, help="candidates whose name contains one of these")
    parser.add_argument("--cache", default="/tmp/focus_ros_window_rules")
    args = parser.parse_args()
    chosen = [candidate for candidate in candidates()
              if args.only is None or candidate.name.startswith("fixed")
              or any(part in candidate.name for part in args.only)]
    worst: dict[str, float] = {}
    for sensor in args.sensors:
        peaks, seconds = MOTIONS[sensor]
        for motion, peak in zip(("slow", "medium", "fast"), peaks):
            if motion not in args.motions:
                continue
            for seed in SEEDS[args.set]:
                recording = sequence(sensor, peak, seconds, seed, Path(args.cache))
                rate = len(recording.events) / seconds / 1e6
                print(f"\n{sensor}, {motion} ({peak:g} deg/s peak per axis, {rate:.2f} Mev/s, seed {seed})",
                      flush=True)
                results = {}
                for candidate in chosen:
                    started = time.perf_counter()
                    results[candidate.name] = evaluate(recording, candidate)
                    results[candidate.name]["took_s"] = time.perf_counter() - started
                # the best fixed window among those that publish at least 90 % of their windows (a
                # window too long for the motion is withheld: its few published ones are no result)
                best = min(value["rms"] for name, value in results.items() if name.startswith("fixed")
                           and value["published"] >= PUBLISHED_SHARE * (value["published"] + value["withheld"]))
                for name, value in results.items():
                    ratio = value["rms"] / best
                    worst[name] = max(worst.get(name, 0.0), ratio)
                    print(f"  {name:44s} RMS {value['rms']:6.2f} deg/s  x{ratio:4.2f}  windows "
                          f"{value['published']:4d} (+{value['withheld']} withheld)  length "
                          f"{value['length_ms']:6.1f} ms  every {value['period_ms']:5.1f} ms  [{value['took_s']:.0f} s]",
                          flush=True)
    print("\nworst ratio to the best fixed window over the set:")
    for name, ratio in sorted(worst.items(), key=lambda item: item[1]):
        print(f"  {name:44s} x{ratio:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
