"""Evaluate patch optical flow against ground truth: endpoint errors per loss.

The ground-truth flow of each patch comes from ω at the window's reference time (IMU or motion
capture) and the calibration, in pixels of the raw image (focus_ros.evaluation.flow): exact for a
rotating camera (the simulator's rotation presets, the dataset's *_rotation sequences); when the
recording also has camera poses and depth maps (the simulator's six_dof), the camera's
translation and the depth are added. Prints and writes
(OUTPUT/flow_table.md, OUTPUT/flow_table.csv) per loss the average endpoint error in px over the
window's time span and in px/s, the share of valid patches over 3 px, the median relative error
|v - v_gt| / |v_gt| and the share over 10 %, the share of patches reported valid (of those with
events, and of those with at least 50 events: full flows and, apart, normal flows), the median
time per window; plots the error over time (OUTPUT/flow_errors.png).

One job per loss, run on the machine's cores or, with --ray, as Ray tasks on a cluster (same
results); finished jobs are kept in OUTPUT/jobs/ and a rerun resumes from them. Several
sequences (paths, or --simulate PRESET[,PRESET] with --seed N[,N]) make one grid of jobs, each
sequence's files in OUTPUT/NAME/.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from focus_ros.cli import UserError
from focus_ros.cli._sources import (add_source_arguments, angular_velocity_ground_truth, load_source, loss_names,
                                    source_choices)
from focus_ros.cli.flow import (add_flow_arguments, add_window_arguments, settings_from_flow_arguments,
                               window_settings_from_arguments)
from focus_ros.evaluation.grid import add_executor_arguments

#: the losses of the paper's Fig. 6 (patch flow landscapes)
FIGURE_6_LOSSES = ("variance", "gradient_magnitude", "laplacian_magnitude", "variance_of_gradient",
                   "variance_of_laplacian")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_source_arguments(parser, several=True)
    parser.add_argument("-o", "--output", required=True, type=Path,
                        help="output folder (resumable); with several sequences, one subfolder each")
    parser.add_argument("--losses", default=",".join(("area_exponential",) + FIGURE_6_LOSSES),
                        help="comma-separated loss names, or 'all' (default: the estimator's default, "
                             "area_exponential, and the paper's Fig. 6 losses)")
    parser.add_argument("--ground-truth", choices=("auto", "imu", "mocap", "estimate"), default="auto",
                        help="auto: IMU, else motion capture; estimate: no ground truth, compare with the flow "
                             "of the full-frame angular velocity estimate (a rotating camera; a consistency check)")
    parser.add_argument("--imu-delay", type=float, metavar="MS", default=None,
                        help="gyro delay (ms): default 2.4 for recorded data, 0 for the simulator")
    add_window_arguments(parser)
    parser.add_argument("--max-windows", type=int, metavar="M", help="at most M (consecutive) windows")
    add_flow_arguments(parser, exclude=("loss",))  # --losses instead
    add_executor_arguments(parser)
    parser.add_argument("--quiet", action="store_true", help="no progress bar")


@dataclass
class SequencePlan:
    """One sequence of the grid: where its files go, its recording, description, ground truth,
    windows, their size in events (None: fixed duration) and its jobs (one per loss)."""

    name: str
    output: Path
    recording: object
    description: str
    ground_truth: object
    windows: np.ndarray
    window_events: int | None
    grid_jobs: list


def run(args) -> int:
    from focus_ros.evaluation import grid

    losses = loss_names(args.losses)
    window_settings_from_arguments(args)  # checked before any work
    if args.max_windows is not None and args.max_windows <= 0:
        raise UserError(f"--max-windows must be positive, got {args.max_windows}")
    choices = source_choices(args)
    plans = []

    def plan():
        plans.extend(_plan_sequence(args, choice, len(choices) > 1, losses) for choice in choices)
        inputs = {plan.name: grid.SequenceInput.of_windows(plan.name, plan.recording, plan.windows, plan.output)
                  for plan in plans}
        return [job for plan in plans for job in plan.grid_jobs], inputs

    report = grid.run_command(args, "evaluate-flow", plan)
    for plan in plans:
        _write_sequence_report(args, plan, report.part(f"{plan.name}/optical_flow/"))
    return 1 if report.failed else 0


def _plan_sequence(args, choice, several: bool, losses) -> SequencePlan:
    """Load one sequence and its ground truth, cut its windows and plan one job per loss the
    estimator accepts (the others are skipped with a line on stderr)."""
    from focus_ros.evaluation import flow
    from focus_ros.evaluation.angular_velocity import build_windows
    from focus_ros.pipelines.optical_flow import OpticalFlowPipeline, events_per_window

    recording, simulated, description = load_source(choice.args)
    estimated = args.ground_truth == "estimate"
    ground_truth = (flow.EstimatedRotation(recording.calibration, args.t_ref) if estimated
                    else angular_velocity_ground_truth(choice.args, recording, simulated))
    if ground_truth is None:
        raise UserError("the sequence has no rotation ground truth (IMU or motion capture): "
                        "--ground-truth estimate compares with the full-frame angular velocity estimate")
    events, calibration = recording.events, recording.calibration
    window_events = None
    if args.window_ms is not None:
        windows = flow.duration_window_bounds(events.t, int(round(args.window_ms * 1e6)), args.max_windows)
    else:
        window_events = events_per_window(window_settings_from_arguments(args), calibration.width,
                                          calibration.height)
        windows = build_windows(events.t, window_events, max_windows=args.max_windows)
    if len(windows) == 0:
        raise UserError(f"the sequence has {len(events)} events: not one window" + (f" ({choice.name})" if several
                                                                                    else ""))
    if estimated:
        ground_truth.prepare(events, windows)
    settings_list = []
    for loss in losses:
        try:
            settings = settings_from_flow_arguments(args, loss=loss)
            OpticalFlowPipeline(calibration.width, calibration.height, settings)
        except ValueError as error:
            print(f"focus-ros evaluate-flow: skipping {loss}: {error}", file=sys.stderr)
            continue
        settings_list.append(settings)
    output = args.output / choice.name if several else args.output
    grid_jobs = flow.flow_grid_jobs(settings_list, recording, ground_truth, windows, output, choice.name)
    return SequencePlan(choice.name, output, recording, description, ground_truth, windows, window_events, grid_jobs)


def _write_sequence_report(args, plan: SequencePlan, report) -> None:
    """One sequence's flow_table.md, flow_table.csv and flow_errors.png from its jobs' results
    (in the order of --losses), the table also printed."""
    from focus_ros.evaluation import flow

    runs = list(report.results.values())
    output, events, windows = plan.output, plan.recording.events, plan.windows
    output.mkdir(parents=True, exist_ok=True)
    table = flow.markdown_flow_table(runs)
    window_text = f"{args.window_ms:g}-ms windows" if args.window_ms else f"{plan.window_events}-event windows"
    durations = (events.t[windows[:, 1] - 1] - events.t[windows[:, 0]]) / 1e6
    header = (f"{plan.description}: {len(windows)} {window_text} (median span {np.median(durations):.1f} ms), "
              f"{'with' if args.use_polarity else 'without'} polarity, ground truth: "
              f"{plan.ground_truth.source or 'given'}"
              f"{' + translation from poses and depth maps' if flow.has_translation_ground_truth(plan.recording) else ''}"
              "\n\n")
    (output / "flow_table.md").write_text(header + table)
    flow.write_flow_csv(runs, output / "flow_table.csv")
    flow.plot_flow_errors(runs, output / "flow_errors.png", title=plan.description)
    print(header + table)
