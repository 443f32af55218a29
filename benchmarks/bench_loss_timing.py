"""The two timings of an evaluation job (``focus-ros evaluate``'s µs/eval and µs/loss columns):
one value+gradient evaluation of the whole objective (warp + IWE + loss + adjoint) and the loss
step alone, with the ratio of the two.

The job is the test's (test/test_evaluation.py ``test_area_with_polarity_is_a_job_and_its_loss_is_timed``,
which asserts that both are measured; this prints them): 0.3 s of the simulator's
``rotation_short`` (seed 0), 2 windows of 20,000 events, the IWE blurred by 1 px, through
``focus_ros.evaluation.angular_velocity.run_job`` with its timing (--timing-windows windows,
--repeats repetitions each, the median). Each run is a new job in a new folder; printed per
(loss, polarity): median and range over --runs of both timings and of their ratio. The whole
evaluation includes the loss step, so the ratio is expected above 1.

    .venv/bin/python benchmarks/bench_loss_timing.py --runs 5
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def figure(values: list[float], digits: int) -> str:
    return f"{statistics.median(values):.{digits}f} [{min(values):.{digits}f}-{max(values):.{digits}f}]"


def main() -> int:
    from focus_ros.evaluation import angular_velocity
    from focus_ros.sources.simulator import simulate_preset

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--losses", default="area_exponential,variance", help="comma-separated (default: "
                        "area_exponential,variance)")
    parser.add_argument("--timing-windows", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    print("load:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    recording = simulate_preset("rotation_short", None, 0, end_s=0.3)
    windows = angular_velocity.build_windows(recording.events.t, 20_000, max_windows=2)
    options = angular_velocity.EstimatorOptions(blur_sigma_px=1.0)
    summary = angular_velocity.event_summary(recording.events)
    jobs = [job for job in angular_velocity.plan_jobs(args.losses.split(",")) if job.status == "ok"]
    print(f"{len(windows)} windows of 20,000 events, timing over {args.timing_windows} window(s) x "
          f"{args.repeats} repeats; median [range] over {args.runs} runs")
    print(f"{'job':<28} {'µs per evaluation':<24} {'µs per loss step':<24} whole / loss")
    with tempfile.TemporaryDirectory() as temporary:
        for job in jobs:
            whole, alone, ratio = [], [], []
            for run in range(args.runs):
                output = Path(temporary) / f"{job.name}_{run}"
                fingerprint = angular_velocity.job_fingerprint(job, windows, options, summary)
                angular_velocity.run_job(job, recording.events, recording.calibration, windows, options, output,
                                         fingerprint, timing_windows=args.timing_windows,
                                         timing_repeats=args.repeats)
                result = angular_velocity.read_job_result(output, job)
                whole.append(result.us_per_evaluation)
                alone.append(result.us_per_loss_evaluation)
                ratio.append(result.us_per_evaluation / result.us_per_loss_evaluation)
            print(f"{job.name:<28} {figure(whole, 0):<24} {figure(alone, 1):<24} {figure(ratio, 1)}", flush=True)
    print("load:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    return 0


if __name__ == "__main__":
    sys.exit(main())
