"""Evaluate every focus loss on a sequence against ground truth: the paper's Table 2, with plots.

The sequence is an Event Camera Dataset folder, a bag, or the simulator (--simulate PRESET,
seeded). The same windows (30,000 events by default) are estimated for every loss and
polarity mode, in parallel over the machine's cores or, with --ray, as Ray tasks on a cluster
(same results); results go to OUTPUT/estimates/ and an interrupted run resumes without redoing
finished jobs. Several sequences (paths, or --simulate PRESET[,PRESET] with --seed N[,N]) make
one grid of jobs, each sequence's files in OUTPUT/NAME/. Ground truth: the IMU gyro delayed by
--imu-delay (2.4 ms for recorded data, 0 for the simulator) or mocap orientations; an
automatic check of axis signs and time offset warns when the data disagrees (--align auto
corrects it). Writes OUTPUT/table.md, OUTPUT/table.csv, OUTPUT/comparison.csv and PNG plots.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from focus_ros.cli import UserError
from focus_ros.cli._options import add_estimator_arguments
from focus_ros.cli._sources import (add_source_arguments, angular_velocity_ground_truth, load_source, loss_names,
                                    source_choices)
from focus_ros.estimators.angular_velocity import AngularVelocitySettings
from focus_ros.evaluation.grid import add_executor_arguments
from focus_ros.events import NANOSECONDS_PER_SECOND

DEFAULT_PLOT_LOSSES = ("gradient_magnitude", "variance")


# ---------------------------------------------------------------------------- arguments


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_source_arguments(parser, several=True)
    parser.add_argument("-o", "--output", required=True, type=Path,
                        help="output folder (resumable); with several sequences, one subfolder each")
    parser.add_argument("--losses", default="all", help="'all' (default) or comma-separated loss names")
    parser.add_argument("--polarity", choices=("with", "without", "both"), default="both")
    parser.add_argument("--ground-truth", choices=("auto", "imu", "mocap", "none"), default="auto",
                        help="auto: the IMU when present, else mocap, else none")
    parser.add_argument("--imu-delay", type=float, metavar="MS", default=None,
                        help="gyro delay (ms): default 2.4 for recorded data, 0 for the simulator")
    parser.add_argument("--align", choices=("auto", "none"), default="none",
                        help="apply the sign/offset correction found by the check (default: only warn)")
    parser.add_argument("--max-lag", type=float, default=50.0, metavar="MS", help="lag range of the check (±ms)")
    parser.add_argument("--reference-omega", type=float, nargs=3, metavar=("WX", "WY", "WZ"),
                        help="without ground truth: compare with this ω (rad/s) instead of the losses' median")
    parser.add_argument("--window-events", type=int, default=30_000, help="events per window (default 30000)")
    parser.add_argument("--every", type=int, default=1, metavar="K", help="evaluate every K-th window")
    parser.add_argument("--max-windows", type=int, metavar="M", help="at most M windows")
    parser.add_argument("--time-range", type=float, nargs=2, metavar=("START", "END"),
                        help="only events in [START, END) s of the sequence's clock")
    add_estimator_arguments(parser, AngularVelocitySettings())  # the paper's method
    add_executor_arguments(parser)
    parser.add_argument("--plot-losses", default=",".join(DEFAULT_PLOT_LOSSES),
                        help="losses to plot (comma-separated; 'none' for no plots)")
    parser.add_argument("--box-interval", type=float, default=15.0, metavar="S",
                        help="box-plot interval (s, default 15 as in the paper; shorter sequences use a quarter)")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")


# ---------------------------------------------------------------------------- run


@dataclass
class SequencePlan:
    """One sequence of the grid: where its files go, its recording and ground truth, its windows
    and its jobs (all sequences share the jobs' losses, polarity modes and estimator options)."""

    name: str
    output: Path
    recording: object
    description: str
    ground_truth: object
    windows: np.ndarray
    grid_jobs: list


def run(args) -> int:
    from focus_ros.evaluation import angular_velocity, grid

    losses = loss_names(args.losses)
    modes = ("without", "with") if args.polarity == "both" else (args.polarity,)
    if not args.box_interval > 0:
        raise UserError(f"--box-interval must be positive (s), got {args.box_interval}")
    jobs = angular_velocity.plan_jobs(losses, modes)
    options = angular_velocity.EstimatorOptions(kernel=args.kernel, t_ref=args.t_ref, warp=args.warp,
                                                optimizer=args.optimizer, blur_sigma_px=args.blur_sigma_px,
                                                warm_start=args.warm_start, value_tolerance=args.value_tolerance)
    started = time.perf_counter()
    choices = source_choices(args)
    plans = []

    def plan():
        plans.extend(_plan_sequence(args, choice, len(choices) > 1, jobs, options) for choice in choices)
        inputs = {plan.name: grid.SequenceInput.of_windows(plan.name, plan.recording, plan.windows, plan.output)
                  for plan in plans}
        return [job for plan in plans for job in plan.grid_jobs], inputs

    report = grid.run_command(args, "evaluate", plan)
    for plan in plans:
        _write_sequence_report(args, plan, jobs, modes, report, started)
    return 1 if report.failed else 0


def _plan_sequence(args, choice, several: bool, jobs, options) -> SequencePlan:
    """Load one sequence, its ground truth and windows, and plan its jobs (UserError when it has no window)."""
    from focus_ros.evaluation import angular_velocity

    recording, simulated, description = load_source(choice.args)
    ground_truth = angular_velocity_ground_truth(choice.args, recording, simulated)
    events = recording.events
    time_range = None if args.time_range is None else tuple(
        int(round(v * NANOSECONDS_PER_SECOND)) for v in args.time_range)
    windows = angular_velocity.build_windows(events.t, args.window_events, args.every, args.max_windows, time_range)
    if len(windows) == 0:
        raise UserError(f"no complete window of {args.window_events} events in the selected range "
                        f"({len(events)} events)" + (f" of {choice.name}" if several else ""))
    output = args.output / choice.name if several else args.output
    grid_jobs = angular_velocity.grid_jobs(jobs, events, windows, options, output, choice.name)
    return SequencePlan(choice.name, output, recording, description, ground_truth, windows, grid_jobs)


def _write_sequence_report(args, plan: SequencePlan, jobs, modes, report, started: float) -> None:
    """One sequence's table.md, table.csv, comparison.csv, plots and run.json from its jobs' results
    (UserError when none has one)."""
    from focus_ros.evaluation import assemble, tables

    results = report.part(f"{plan.name}/angular_velocity/").results
    if not results:
        raise UserError("no job produced results" + (f" for {plan.name}" if plan.output != args.output else ""))
    output, events, windows, ground_truth = plan.output, plan.recording.events, plan.windows, plan.ground_truth
    result_list = list(results.values())
    if ground_truth is not None:
        comparison = assemble.compare_with_ground_truth(result_list, ground_truth, args.align,
                                                        int(args.max_lag * 1e6))
        alignment = comparison.alignment
        message = alignment.warning(applied=args.align == "auto")
        print(f"focus-ros evaluate: {message}" if message else f"alignment check: {alignment.describe()}",
              file=sys.stderr)
    else:
        comparison = assemble.compare_with_reference(result_list, args.reference_omega)
    sequence_report = report.part(f"{plan.name}/angular_velocity/")
    rows = assemble.table_rows(jobs, results, comparison)
    tables.write_csv(rows, output / "table.csv")
    _write_comparison_csv(comparison, output / "comparison.csv")
    header = _header(args, plan.description, events, windows, comparison, ground_truth is not None, sequence_report)
    body = (tables.markdown_summary(rows, modes) + "\n" + tables.markdown_details(rows, modes)
            + ("\n" + tables.markdown_distribution(rows, modes) if ground_truth is not None
               else "\n" + tables.markdown_estimates(rows, modes)))
    (output / "table.md").write_text(header + "\n" + body)
    plotted = _plots(args, plan.recording, events, windows, results, comparison, output)
    elapsed = time.perf_counter() - started
    (output / "run.json").write_text(json.dumps({
        "command": _command_line(), "wall_time_s": elapsed, "jobs_run": sequence_report.ran,
        "jobs_skipped": sequence_report.skipped, "jobs_failed": sequence_report.failed, "windows": len(windows),
        "alignment": comparison.alignment.as_dict() if comparison.alignment else None}, indent=1))
    if not args.quiet:
        print(f"evaluated {len(results)} (loss, polarity) jobs x {len(windows)} windows in {elapsed:.1f} s "
              f"({len(sequence_report.ran)} run, {len(sequence_report.skipped)} resumed); wrote "
              f"{output / 'table.md'}, {output / 'table.csv'}" + (f" and {len(plotted)} plots" if plotted else ""),
              file=sys.stderr)


def _command_line() -> str:
    return "focus-ros " + " ".join(shlex.quote(word) for word in sys.argv[1:]) if sys.argv else ""


def _header(args, description, events, windows, comparison, has_ground_truth, report) -> str:
    t_first, t_last = events.t[windows[0, 0]], events.t[windows[-1, 1] - 1]
    lines = [f"# Focus-loss evaluation: {description}", "",
             f"- windows: {len(windows)} of {args.window_events} events (every {args.every}), "
             f"{t_first / 1e9:.3f}-{t_last / 1e9:.3f} s; t_ref = {args.t_ref}; warp {args.warp}; "
             f"{args.kernel} IWE" + (" blurred by a 1-px Gaussian for the spatial losses" if args.blur_sigma_px is None
                                     else f" blurred by a Gaussian of {args.blur_sigma_px:g} px" if args.blur_sigma_px
                                     else "")
             + f"; optimizer {args.optimizer}",
             f"- compared with: {comparison.description}",
             f"- peak |ω| component over the windows: {comparison.peak_deg_s:.1f} deg/s"]
    if comparison.alignment is not None:
        lines.append(f"- sign/offset check: {comparison.alignment.describe()}")
        warning = comparison.alignment.warning(applied=args.align == "auto")
        if warning:
            lines.append(f"- **{warning}**")
    if report.failed:
        lines.append(f"- failed jobs: {', '.join(report.failed)}")
    lines += ["- errors in deg/s: per-axis RMS (ω_x, ω_y, ω_z), mean μ and standard deviation σ of all error "
              "components, RMS of all components, RMS as % of the peak; µs/eval: median wall time of one "
              "value+gradient evaluation of the objective (warp + IWE + loss + adjoint) on one window; µs/loss: "
              "the loss alone on the IWE (the paper's Time column); '-' = degenerate or unsupported combination",
              ""]
    if not has_ground_truth:
        lines.insert(4, "- no ground truth: the numbers measure agreement with the reference, not accuracy")
    return "\n".join(lines)


def _write_comparison_csv(comparison, path: Path) -> None:
    """t_ref (s) and the ω (rad/s) the estimates were compared with, per window."""
    with open(path, "w") as handle:
        handle.write("t_ref,wx,wy,wz\n")
        for t, omega in zip(comparison.t_ref_ns, comparison.truth):
            handle.write(f"{t / NANOSECONDS_PER_SECOND:.9f}," + ",".join(f"{v:.9g}" for v in omega) + "\n")


def _plots(args, recording, events, windows, results, comparison, output: Path) -> list[Path]:
    """Estimate vs truth, error box plots and IWE before/after, for each --plot-losses result."""
    from focus_ros.evaluation import plots
    from focus_ros.evaluation.landscape import window_objective
    from focus_ros.evaluation.metrics import errors_deg_s
    from focus_ros.evaluation.angular_velocity import EVENT_FIELDS
    from focus_ros.events import Events

    if args.plot_losses.strip() == "none":
        return []
    wanted = [name.strip() for name in args.plot_losses.split(",") if name.strip()]
    written = []
    t_s = comparison.t_ref_ns / NANOSECONDS_PER_SECOND
    duration = float(t_s.max() - t_s.min()) if len(t_s) else 0.0
    interval = args.box_interval if duration >= 2 * args.box_interval else max(duration / 4, 1e-3)
    middle = len(windows) // 2
    start, end = windows[middle]
    window = Events(*(np.array(getattr(events, name)[start:end]) for name in EVENT_FIELDS))
    for result in results.values():
        if result.job.loss not in wanted:
            continue
        stem = output / "plots" / result.job.name
        label = f"{result.job.loss}, {result.job.polarity} polarity"
        written.append(plots.plot_estimate_vs_truth(t_s, result.angular_velocity, comparison.truth,
                                                    f"{stem}_estimate.png", f"{label}: estimate vs {comparison.description}"))
        errors = errors_deg_s(result.angular_velocity, comparison.truth)
        if np.all(np.isfinite(errors), axis=1).any():
            written.append(plots.plot_error_boxplots(t_s, errors, f"{stem}_errors.png", interval,
                                                     f"{label}: error per {interval:.3g}-s interval"))
        omega = result.angular_velocity[middle]
        if np.all(np.isfinite(omega)):
            objective, _ = window_objective(recording.calibration, result.job.loss,
                                            result.job.polarity == "with", window, args.t_ref)
            written.append(plots.plot_iwe_pair(objective.image(np.zeros(3)).image, objective.image(omega).image,
                                               f"{stem}_iwe.png", title=f"{label}, window {middle}"))
    return written
