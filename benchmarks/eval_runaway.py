"""The runaway check of the auto windows, measured: how far honest estimates run ahead of the speed
their window was planned for, how far the weak losses' do, and what the check withholds (issue 32;
docs/evaluation/runaway.md; the rule: focus_ros.pipelines.angular_velocity.RunawayWatch).

- Sequences (DAVIS240C unless named; simulated once into ``--cache``): the simulator's ``rotation``
  (up to 700 deg/s per axis, ramping from 5 %) and ``rotation_short`` (up to 300 deg/s) presets
  simulated for 1 s; benchmarks/bench_sensors.py's oscillation at a constant amplitude, 0.5 s, on a
  DAVIS240C (200 deg/s) and a DAVIS346 (220 deg/s); and two jerks: the camera turning at 20 deg/s
  about a fixed axis jumps to 600 deg/s at 0.2 s within 30 ms (``jerk30``, a peak angular
  acceleration of 510 rad/s^2) or 15 ms (``jerk15``, 1,020 rad/s^2), and back down at 0.6 s.
- Every loss (with polarity where it needs it) through
  :class:`~focus_ros.pipelines.angular_velocity.AngularVelocityPipeline` offline, as
  ``focus-ros estimate`` runs it (the node's estimator settings, the default auto windows, each
  planned from the previous estimate), with the runaway check off; a
  :class:`~focus_ros.pipelines.angular_velocity.RunawayWatch` with the defaults watches alongside,
  and where it would have withheld an estimate the sequence is run again with the check on (the
  loop is deterministic: where the check never fires, on and off are the same run).
- Table 1, per sequence, the check off: the peak true speed; for the variance, for the other losses
  but the entropy, and for the entropy: the largest ratio of the true speed (the simulator's gyro at
  the window's reference time) to the planned speed, of the estimated speed to the planned speed,
  the longest run of consecutive windows ahead of their plans (estimate above ``runaway_ratio`` times
  the planned speed), and the fastest growth of the speed over ``runaway_windows`` windows ahead in a
  row (rad/s^2, from the plan of the first of them: what the check compares with
  max_angular_acceleration), ending in a right estimate (within 25 % of the true speed) and in a
  wrong one.
- Table 2, per loss, pooled over the sequences: windows, withheld (all reasons) and withheld as
  ``runaway`` (and of those, right estimates), and the RMS error (deg/s, pooled over the axes, the
  published estimates after the first 0.05 s) with the check off and on; then the entropy per sequence.

    .venv/bin/python benchmarks/eval_runaway.py                                  # both tables, every loss
    .venv/bin/python benchmarks/eval_runaway.py --losses variance entropy --sequences rotation jerk30
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_sensors import cached_recording, simulate_rotation  # noqa: E402

from focus_ros.estimators.angular_velocity import AngularVelocityEstimator  # noqa: E402
from focus_ros.losses import LOSSES  # noqa: E402
from focus_ros.pipelines.angular_velocity import (AngularVelocityPipeline, RunawayWatch, WindowSettings,  # noqa: E402
                                                  real_time_defaults)

SEQUENCES = ("rotation", "rotation_short", "davis240c_200", "davis346_220", "jerk30", "jerk15")
#: the check's defaults: a window is ahead above RATIO times its planned speed; growth over WINDOWS of them
DEFAULTS = WindowSettings()
RATIO, WINDOWS = DEFAULTS.runaway_ratio, DEFAULTS.runaway_windows
#: the start of each sequence left out of the errors: the cold start
COLD_S = 0.05
#: an estimate within this share of the true speed is right (an honest estimate, if late within a jerk)
RIGHT_SHARE = 0.25


class Jerk:
    """|omega| about a fixed axis: ``low`` rad/s, rising to ``high`` from ``at_s`` within ``rise_s``
    (a smoothstep: peak angular acceleration 1.5 (high - low) / rise_s) and back down from
    ``back_s`` the same way; a callable angular velocity profile (times s -> (N, 3) rad/s)."""

    def __init__(self, low: float, high: float, at_s: float, rise_s: float, back_s: float,
                 axis=(0.6, -0.48, 0.64)):
        self.low, self.high, self.at_s, self.rise_s, self.back_s = low, high, at_s, rise_s, back_s
        self.axis = np.asarray(axis, np.float64) / np.linalg.norm(axis)

    def __call__(self, t_s):
        t_s = np.atleast_1d(np.asarray(t_s, np.float64))
        up, down = (np.clip((t_s - start) / self.rise_s, 0.0, 1.0) for start in (self.at_s, self.back_s))
        speed = self.low + (self.high - self.low) * (up * up * (3 - 2 * up) - down * down * (3 - 2 * down))
        return speed[:, None] * self.axis[None]


def simulate(name: str):
    """One sequence of SEQUENCES (see the module docstring)."""
    from focus_ros.camera import sensor_model
    from focus_ros.sources.scenes import PanoramaScene
    from focus_ros.sources.simulator import EventSimulator, SensorConfig, Trajectory, simulate_preset

    if name in ("rotation", "rotation_short"):
        return simulate_preset(name, duration_s=1.0, seed=0)
    if name.startswith("jerk"):
        profile = Jerk(np.deg2rad(20.0), np.deg2rad(600.0), 0.2, float(name[4:]) * 1e-3, 0.6)
        return EventSimulator(PanoramaScene.generate(0), Trajectory(profile, 1.0),
                              sensor_model("davis240c").calibration(), SensorConfig(), 0).simulate()
    sensor, peak = name.split("_")
    return simulate_rotation(sensor, float(peak), 0.5, 0)


def sequence(name: str, cache: Path):
    """One sequence of SEQUENCES, simulated once into ``cache``."""
    return cached_recording(cache / f"{name}.pickle", lambda: simulate(name), name)


def run(recording, loss: str, check: bool) -> tuple[list[dict], bool]:
    """Every window of the recording with one loss, the runaway check on or off: per window its
    plan, the estimate's speed (before the check), the truth and the outcome; and whether a
    RunawayWatch with the defaults would have withheld one of them (check off)."""
    polarity = "without" not in LOSSES[loss].polarity_modes
    settings = replace(real_time_defaults(), loss=loss, use_polarity=polarity)
    windows = WindowSettings() if check else WindowSettings(max_angular_acceleration=0.0)
    pipeline = AngularVelocityPipeline(recording.calibration, settings, windows)
    estimator = AngularVelocityEstimator(recording.calibration, pipeline.settings)
    shadow = RunawayWatch(RATIO, WINDOWS, DEFAULTS.max_angular_acceleration)
    gyro, events = recording.imu, recording.events
    start_ns = int(events.t[0])
    rows, fired = [], False

    def estimate(window_events):
        estimate.last = estimator.estimate(window_events)
        return estimate.last

    for job, outcome in pipeline.run([events], estimate, estimator.reset):
        raw = estimate.last
        fired |= bool(shadow.check(job.plan, raw))
        truth = np.array([np.interp(raw.t_ref_ns, gyro.t, gyro.angular_velocity[:, axis]) for axis in range(3)])
        rows.append(dict(t_s=(raw.t_ref_ns - start_ns) * 1e-9,
                         plan_s=None if job.plan is None else (job.plan[0] - start_ns) * 1e-9,
                         planned=None if job.plan is None else job.plan[1],
                         speed=None if raw.degenerate else float(np.linalg.norm(raw.angular_velocity)),
                         truth=float(np.linalg.norm(truth)), withheld=outcome.withheld,
                         error=(np.rad2deg(outcome.estimate.angular_velocity - truth).tolist() if outcome.publish
                                else None)))
    return rows, fired


def right(row: dict) -> bool:
    """The window's estimate (before the check) is within RIGHT_SHARE of the true speed."""
    return row["speed"] is not None and abs(row["speed"] - row["truth"]) <= RIGHT_SHARE * row["truth"]


def ahead_runs(rows: list[dict]) -> tuple[int, float, float]:
    """The longest run of windows ahead of their plans, and the fastest growth (rad/s^2) over
    WINDOWS of them in a row, as RunawayWatch measures it, ending in a right estimate and in a
    wrong one; on a run with the check off."""
    longest, fastest, plans = 0, {True: 0.0, False: 0.0}, []
    for row in rows:
        if row["planned"] and row["speed"] is not None and row["speed"] > RATIO * row["planned"]:
            plans.append((row["plan_s"], row["planned"]))
            longest = max(longest, len(plans))
            if len(plans) >= WINDOWS:
                origin_s, origin_speed = plans[-WINDOWS]
                growth = (row["speed"] - origin_speed) / (row["t_s"] - origin_s)
                fastest[right(row)] = max(fastest[right(row)], growth)
        else:
            plans = []
    return longest, fastest[True], fastest[False]


def ratios(rows: list[dict]) -> tuple[float, float]:
    """The largest true / planned and estimated / planned speed ratios of the windows planned from a speed."""
    planned = [row for row in rows if row["planned"]]
    return (max((row["truth"] / row["planned"] for row in planned), default=math.nan),
            max((row["speed"] / row["planned"] for row in planned if row["speed"] is not None), default=math.nan))


def rms(rows: list[dict]) -> tuple[float, int]:
    errors = [row["error"] for row in rows if row["error"] is not None and row["t_s"] >= COLD_S]
    return (float(np.sqrt(np.mean(np.square(errors)))) if errors else math.nan), len(errors)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sequences", nargs="+", choices=SEQUENCES, default=list(SEQUENCES))
    parser.add_argument("--losses", nargs="+", choices=list(LOSSES), default=list(LOSSES))
    parser.add_argument("--cache", type=Path, default=Path("/tmp/focus_ros_runaway"))
    parser.add_argument("--rows", type=Path, help="also write every window (check off and on) here, JSON lines")
    args = parser.parse_args()
    off: dict = {}
    on: dict = {}
    for name in args.sequences:
        recording = sequence(name, args.cache)
        for loss in args.losses:
            started = time.perf_counter()
            off[name, loss], fired = run(recording, loss, check=False)
            on[name, loss] = run(recording, loss, check=True)[0] if fired else off[name, loss]
            if args.rows:
                with open(args.rows, "a") as file:
                    for check, rows in (("off", off[name, loss]), ("on", on[name, loss])):
                        file.write(json.dumps(dict(sequence=name, loss=loss, check=check, rows=rows)) + "\n")
            print(f"  {name} {loss}: {len(off[name, loss])} windows{', the check fired' if fired else ''} "
                  f"[{time.perf_counter() - started:.0f} s]", file=sys.stderr, flush=True)

    print(f"\n#### Table 1: ahead of the plan, the check off (ratio > {RATIO:g}; growth over {WINDOWS} windows "
          f"ahead in a row, rad/s^2)\n")
    print("| sequence | peak speed (rad/s) | losses | max true / planned | max estimated / planned | "
          "longest run ahead (windows) | fastest growth, right estimates | fastest growth, wrong ones |\n"
          "|---|---:|---|---:|---:|---:|---:|---:|")
    groups = (("variance", lambda loss: loss == "variance"),
              ("the others but the entropy", lambda loss: loss not in ("variance", "entropy")),
              ("entropy", lambda loss: loss == "entropy"))
    for name in args.sequences:
        peak = max((row["truth"] for loss in args.losses for row in off[name, loss]), default=math.nan)
        for label, member in groups:
            runs = [off[name, loss] for loss in args.losses if member(loss)]
            if not runs:
                continue
            true_ratio = max(ratios(rows)[0] for rows in runs)
            estimated_ratio = max(ratios(rows)[1] for rows in runs)
            measured = [ahead_runs(rows) for rows in runs]
            longest, fastest_right, fastest_wrong = (max(values) for values in zip(*measured))
            print(f"| {name} | {peak:.1f} | {label} | {true_ratio:.2f} | {estimated_ratio:.2f} | {longest} | "
                  f"{fastest_right:.0f} | {fastest_wrong:.0f} |")

    print(f"\n#### Table 2: per loss, over {len(args.sequences)} sequences: the check off and on\n")
    print("| loss | windows | withheld, off | withheld, on | of which runaway | runaway but right | RMS deg/s, off | "
          "RMS deg/s, on |\n|---|---:|---:|---:|---:|---:|---:|---:|")
    for loss in args.losses:
        before = [row for name in args.sequences for row in off[name, loss]]
        after = [row for name in args.sequences for row in on[name, loss]]
        print(f"| {loss} | {len(after)} | {sum(bool(row['withheld']) for row in before)} | "
              f"{sum(bool(row['withheld']) for row in after)} | "
              f"{sum(row['withheld'] == 'runaway' for row in after)} | "
              f"{sum(row['withheld'] == 'runaway' and right(row) for row in after)} | {rms(before)[0]:.2f} | "
              f"{rms(after)[0]:.2f} |")
    entropy = [(name, off[name, "entropy"], on[name, "entropy"]) for name in args.sequences if "entropy" in args.losses]
    if entropy:
        print("\n#### The entropy per sequence\n")
        print("| sequence | windows, off / on | withheld as runaway | RMS deg/s, off | RMS deg/s, on |\n"
              "|---|---:|---:|---:|---:|")
        for name, before, after in entropy:
            print(f"| {name} | {len(before)} / {len(after)} | {sum(row['withheld'] == 'runaway' for row in after)} | "
                  f"{rms(before)[0]:.1f} | {rms(after)[0]:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
