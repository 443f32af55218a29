"""Evaluate depth from focus against depth ground truth: every patch loss and the max-vote baseline.

The sequence needs camera poses and depth ground truth: `focus-ros simulate --preset slider`
(or six_dof) writes both, or give --simulate slider to simulate in process (seeded). A few
keyframes (--keyframes, each --keyframe-events events around a ground-truth time) get one
DSI per polarity mode, and every method reads depth from that same DSI. Prints and writes
OUTPUT/depth_table.md (one table per polarity mode, one row per method: median and mean
relative depth error, share within 5 % and 10 %, density, time per keyframe, accuracy at
the max-vote baseline's density), OUTPUT/depth_table.csv, and the pictures
OUTPUT/depth_maps.png (depth and confidence maps and point clouds of a few methods beside
the ground truth), OUTPUT/depth_focus_curves.png (focus versus depth of one patch, the
paper's Fig. 7) and OUTPUT/depth_accuracy_density.png (accuracy versus density). Protocol: focus_ros/evaluation/depth.py and EVALUATION.md ("Depth").

With --set wide|tune|report it evaluates instead what a user gets from `focus-ros depth` (its
defaults, or the depth options given) on the simulated evaluation set (focus_ros/sources/depth_set.py:
14 sequences in two halves, 0.4-6 m, lateral, forward, rotating and hand-held cameras, DAVIS240C
and DAVIS346 lenses): per sequence the fused map's median relative error, share within 5 % and
density, and the distribution over the set (OUTPUT/depth_set.md, .csv, .png; the recordings are
simulated once into OUTPUT/recordings/). One job per sequence.

One job per polarity mode (every method on that mode's DSIs), run on the machine's cores or,
with --ray, as Ray tasks on a cluster (same results); finished jobs are kept in OUTPUT/jobs/
and a rerun resumes from them. Several sequences (paths, or --simulate PRESET[,PRESET] with
--seed N[,N]) make one grid of jobs, each sequence's files in OUTPUT/NAME/.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from focus_ros.cli import UserError
from focus_ros.cli._sources import add_source_arguments, load_source, source_choices
from focus_ros.evaluation.grid import add_executor_arguments

DEFAULT_PLOT_METHODS = ("local_variance", "local_mean_square", "gradient_magnitude", "max_vote")


def add_depth_settings_arguments(parser: argparse.ArgumentParser) -> None:
    """The DSI and depth-from-focus settings (focus_ros.estimators.depth.DepthSettings) as options."""
    from focus_ros.estimators.depth import DepthSettings
    defaults = DepthSettings()
    group = parser.add_argument_group("depth settings (DepthSettings)")
    group.add_argument("--planes", type=int, default=defaults.planes,
                       help=f"DSI depth planes, uniform in inverse depth (default {defaults.planes})")
    group.add_argument("--z-min", type=float, default=defaults.z_min_m, metavar="M",
                       help=f"nearest plane, m (default {defaults.z_min_m})")
    group.add_argument("--z-max", type=float, default=defaults.z_max_m, metavar="M",
                       help=f"farthest plane, m (default {defaults.z_max_m})")
    group.add_argument("--patch-size", type=int, default=defaults.patch_size_px, metavar="PX",
                       help=f"focus patch side, odd px (default {defaults.patch_size_px}, the paper's)")
    group.add_argument("--patch-sigma", type=float, default=defaults.patch_sigma_px, metavar="PX",
                       help=f"Gaussian sigma of the patch weights, px (default {defaults.patch_sigma_px:g})")
    group.add_argument("--min-confidence-rank", type=float, default=defaults.min_confidence_rank, metavar="R",
                       help="published pixels rank at least this high by confidence among the observed ones, 0-1 "
                            f"(default {defaults.min_confidence_rank:g}: at most the top "
                            f"{100 * (1 - defaults.min_confidence_rank):.0f} %%)")
    group.add_argument("--threshold-offset", type=float, default=defaults.threshold_offset, metavar="R",
                       help="adaptive threshold: a pixel's confidence rank must exceed its neighbourhood's mean "
                            f"rank by this (default {defaults.threshold_offset:g})")
    group.add_argument("--median", type=int, default=defaults.median_filter_px, metavar="PX",
                       help=f"median filter side on the depth map, odd px, 1 = none "
                            f"(default {defaults.median_filter_px})")


def selection_description(settings) -> str:
    """The selection rules of DepthSettings in words, for the report."""
    rules = [f"relative focus contrast above the {settings.threshold_block_px}-px local mean "
             f"+ {settings.threshold_offset:g}" if settings.min_confidence_rank == 0 else
             f"confidence rank >= {settings.min_confidence_rank:g} and above the {settings.threshold_block_px}-px "
             f"local mean rank + {settings.threshold_offset:g}"]
    if settings.min_contrast > 0:
        rules.append(f"contrast >= {settings.min_contrast:g} x the keyframe's median")
    if settings.max_rival_ratio < 1:
        rules.append(f"no second focus peak above {settings.max_rival_ratio:g} of the first")
    if settings.border_planes > 0:
        rules.append(f"peak not within {settings.border_planes} planes of the DSI's ends")
    if settings.support_neighbours > 0:
        rules.append(f"{settings.support_neighbours} neighbours within {settings.support_radius_px} px at the same "
                     f"depth (within {100 * settings.support_tolerance:g} %)")
    return ", ".join(rules)


def depth_settings_from_args(args) -> object:
    """DepthSettings from the options of :func:`add_depth_settings_arguments` (UserError when invalid)."""
    from focus_ros.estimators.depth import DepthSettings
    try:
        return DepthSettings(planes=args.planes, z_min_m=args.z_min, z_max_m=args.z_max,
                             patch_size_px=args.patch_size, patch_sigma_px=args.patch_sigma,
                             min_confidence_rank=args.min_confidence_rank, threshold_offset=args.threshold_offset,
                             median_filter_px=args.median)
    except ValueError as error:
        raise UserError(str(error)) from None


def _methods(text: str) -> list[str]:
    """Focus losses with a patch version ('all' or a comma-separated list), then max_vote."""
    from focus_ros.depth.focus import NOT_ON_PATCHES, PATCH_LOSSES
    from focus_ros.evaluation.depth import MAX_VOTE

    if text == "all":
        return list(PATCH_LOSSES) + [MAX_VOTE]
    names = [name.strip() for name in text.split(",") if name.strip()]
    for name in names:
        if name in NOT_ON_PATCHES:
            raise UserError(f"loss {name} has no patch version: {NOT_ON_PATCHES[name]}")
        if name not in PATCH_LOSSES and name != MAX_VOTE:
            raise UserError(f"unknown method '{name}' in --losses: choose 'all' or names from "
                            f"{', '.join(PATCH_LOSSES)}, {MAX_VOTE}")
    if not names:
        raise UserError("--losses is empty")
    return names + ([MAX_VOTE] if MAX_VOTE not in names else [])


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_source_arguments(parser, several=True)
    parser.add_argument("-o", "--output", required=True, type=Path,
                        help="output folder (resumable); with several sequences, one subfolder each")
    parser.add_argument("--losses", default="all",
                        help="'all' (default: every loss with a patch version) or comma-separated names; "
                             "the max_vote baseline is always added")
    parser.add_argument("--polarity", choices=("with", "without", "both"), default="both",
                        help="votes with polarity (±1), without (1), or both (default)")
    parser.add_argument("--keyframes", type=int, default=3, help="keyframes to evaluate (default 3)")
    parser.add_argument("--keyframe-events", type=int, default=500_000,
                        help="events per keyframe, centred on its reference time (default 500000)")
    parser.add_argument("--keyframe-baseline", type=float, default=None, metavar="M",
                        help="instead of --keyframe-events: a keyframe holds the events of the time during which "
                             "the camera stays within M/2 of its reference position (m; for rotating cameras, "
                             "whose event rate says little about their travel)")
    add_depth_settings_arguments(parser)
    parser.add_argument("--plot-losses", default=None,
                        help="methods whose depth maps are pictured (comma-separated; 'none' for no pictures; "
                             f"default: those of {', '.join(DEFAULT_PLOT_METHODS)} that are evaluated)")
    parser.add_argument("--set", choices=("wide", "tune", "report"), default=None,
                        help="evaluate focus-ros depth's defaults (with the depth options given) on the simulated "
                             "evaluation set, all of it (wide) or one half, instead of comparing losses on "
                             "SEQUENCE (--duration shortens its 3-s sequences); --losses, --polarity, "
                             "--keyframes* and --plot-losses do not apply")
    parser.add_argument("--map-max-relative-sigma", type=float, default=None, metavar="R",
                        help="with --set: the fused map's bound on sigma / depth (default: focus-ros depth's, "
                             "DepthPipelineSettings.map_max_relative_sigma; 0 = every point)")
    parser.add_argument("--recordings", type=Path, default=None, metavar="DIR",
                        help="with --set: where the set's recordings are simulated once and kept (default "
                             "OUTPUT/recordings; share one folder between runs that compare settings)")
    add_executor_arguments(parser, workers_default="1: the depth kernels use every core already")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")


def run(args) -> int:
    from focus_ros.evaluation import grid
    from focus_ros.evaluation.depth import depth_grid_jobs, merge_depth_evaluations

    if args.set is not None:
        return _run_set(args)

    methods = _methods(args.losses)
    modes = ("without", "with") if args.polarity == "both" else (args.polarity,)
    if args.keyframes < 1 or args.keyframe_events < 1000:
        raise UserError(f"--keyframes must be >= 1 and --keyframe-events >= 1000, got {args.keyframes} and "
                        f"{args.keyframe_events}")
    if args.keyframe_baseline is not None and not args.keyframe_baseline > 0:
        raise UserError(f"--keyframe-baseline must be > 0 m, got {args.keyframe_baseline}")
    settings = depth_settings_from_args(args)
    if args.plot_losses is None:
        plot_methods = [name for name in DEFAULT_PLOT_METHODS if name in methods]
    else:
        plot_methods = [] if args.plot_losses.strip() == "none" else [
            name.strip() for name in args.plot_losses.split(",") if name.strip()]
    unknown = [name for name in plot_methods if name not in methods]
    if unknown:
        raise UserError(f"--plot-losses {unknown[0]} is not among the evaluated methods ({', '.join(methods)})")
    started = time.perf_counter()
    choices = source_choices(args)
    plans = []

    def plan():
        for choice in choices:  # each sequence's jobs: one per polarity mode
            recording, _, description = load_source(choice.args)
            output = args.output / choice.name if len(choices) > 1 else args.output
            jobs = depth_grid_jobs(recording, methods, modes, args.keyframes, args.keyframe_events, settings,
                                   args.keyframe_baseline, output, choice.name)
            sequence = grid.SequenceInput(choice.name, recording, (0, len(recording.events)), output)
            plans.append(SequencePlan(choice.name, output, description, sequence, jobs))
        return [job for plan in plans for job in plan.grid_jobs], {plan.name: plan.sequence for plan in plans}

    report = grid.run_command(args, "evaluate-depth", plan, default_workers=1)
    for plan in plans:
        parts = report.part(f"{plan.name}/depth/").results
        if len(parts) < len(modes):
            continue  # a failed job (reported above): no table for this sequence
        evaluation = merge_depth_evaluations([parts[mode] for mode in modes])
        _write_sequence_report(args, evaluation, methods, modes, plot_methods, plan.output, plan.description,
                               started)
    return 1 if report.failed else 0


def _run_set(args) -> int:
    """--set: focus-ros depth's loop on each sequence of the evaluation set, one grid job each."""
    from tqdm import tqdm

    from focus_ros.evaluation import grid
    from focus_ros.evaluation.depth_set import cached_recording, depth_set_jobs, markdown_table, plot_set, write_csv
    from focus_ros.pipelines.depth import DepthPipelineSettings
    from focus_ros.sources.depth_set import depth_sequences

    if args.sequence or args.simulate:
        raise UserError("--set evaluates the simulated evaluation set: give no SEQUENCE or --simulate with it")
    sequences = depth_sequences(None if args.set == "wide" else args.set)
    if args.duration is not None:  # shorter sequences (a quick look, the tests)
        if not args.duration > 0:
            raise UserError(f"--duration must be > 0 s, got {args.duration}")
        sequences = tuple(replace(sequence, duration_s=min(args.duration, sequence.duration_s))
                          for sequence in sequences)
    depth = depth_settings_from_args(args)
    pipeline_settings = DepthPipelineSettings(map_max_points=100_000_000)  # offline: every point kept
    if args.map_max_relative_sigma is not None:
        try:
            pipeline_settings = replace(pipeline_settings, map_max_relative_sigma=args.map_max_relative_sigma)
        except ValueError as error:
            raise UserError(str(error)) from None
    output = args.output
    recordings = {}
    for sequence in tqdm(sequences, desc="simulating (once)", unit="sequence", disable=args.quiet, file=sys.stderr):
        recordings[sequence.name] = cached_recording(sequence, args.recordings or output / "recordings")
    inputs = {s.name: grid.SequenceInput(s.name, recordings[s.name], (0, len(recordings[s.name].events)),
                                         output / s.name) for s in sequences}
    report = grid.run_command(args, "evaluate-depth",
                              lambda: (depth_set_jobs(sequences, recordings, depth, pipeline_settings, output), inputs),
                              default_workers=1)
    results = [report.results[key] for key in report.results if report.results[key] is not None]
    command = "focus-ros " + " ".join(shlex.quote(word) for word in sys.argv[1:]) if sys.argv else ""
    text = (f"# Depth over the evaluation set ({args.set})\n\n- command: `{command}`\n- each sequence: "
            f"`focus-ros depth`'s loop and settings ({selection_description(depth)}; the map's points with "
            f"sigma <= {100 * pipeline_settings.map_max_relative_sigma:g} % of the depth); errors "
            "|Z - Z_true| / Z_true "
            "of the fused map's points, each judged in its own keyframe's view (where its depth was estimated)\n\n"
            + markdown_table(results))
    (output / "depth_set.md").write_text(text)
    write_csv(results, output / "depth_set.csv")
    plot_set(results, output / "depth_set.png")
    print(text)
    return 1 if report.failed else 0


@dataclass
class SequencePlan:
    """One sequence of the grid: its name, output folder, description, data and jobs."""

    name: str
    output: Path
    description: str
    sequence: object
    grid_jobs: list


def _write_sequence_report(args, evaluation, methods, modes, plot_methods, output: Path, description: str,
                           started: float) -> None:
    """One sequence's depth_table.md, depth_table.csv and pictures (the table also printed)."""
    from focus_ros.evaluation import depth_report

    output.mkdir(parents=True, exist_ok=True)
    settings = evaluation.settings
    depth_report.write_depth_csv(evaluation.rows, output / "depth_table.csv")
    table = depth_report.depth_markdown(evaluation.rows, modes)
    header = _header(args, description, evaluation, settings)
    (output / "depth_table.md").write_text(header + "\n" + table)
    print(header + "\n" + table)
    pictures = _pictures(evaluation, plot_methods, methods, modes, output, description)
    for row in evaluation.rows:
        for warning in row.warnings:
            print(f"focus-ros evaluate-depth: {row.method} ({row.polarity} polarity): {warning}", file=sys.stderr)
    if not args.quiet:
        print(f"evaluated {len(methods)} methods x {len(modes)} polarity modes on {len(evaluation.windows)} "
              f"keyframes in {time.perf_counter() - started:.1f} s; wrote {output / 'depth_table.md'}, "
              f"{output / 'depth_table.csv'}" + (f" and {len(pictures)} pictures" if pictures else ""),
              file=sys.stderr)


def _header(args, description, evaluation, settings) -> str:
    windows = evaluation.windows
    events = ", ".join(f"{w.t_ref_ns / 1e9:.2f} s" for w in windows)
    command = "focus-ros " + " ".join(shlex.quote(word) for word in sys.argv[1:]) if sys.argv else ""
    return "\n".join([
        f"# Depth evaluation: {description}", "",
        f"- command: `{command}`",
        f"- keyframes: {len(windows)}, reference times {events} (ground-truth map times), "
        + (f"each {windows[0].stop - windows[0].start} events" if args.keyframe_baseline is None else
           f"each the events while the camera stays within {args.keyframe_baseline / 2:g} m of its reference "
           f"position ({', '.join(str(w.stop - w.start) for w in windows)} events)"),
        f"- DSI: {settings.planes} planes (uniform in inverse depth) "
        + (f"over the depths each keyframe's scene shows, within {settings.z_min_m:g}-{settings.z_max_m:g} m; "
           if settings.auto_depth_range else f"over {settings.z_min_m:g}-{settings.z_max_m:g} m; ")
        + f"{settings.patch_size_px}x{settings.patch_size_px} patches, Gaussian sigma {settings.patch_sigma_px:g} px; "
        f"published: {selection_description(settings)}; median filter {settings.median_filter_px} px",
        "- errors: |Z - Z_true| / Z_true on the published (semi-dense, median-filtered) points, pooled over "
        "keyframes; points on a depth edge are compared with the nearer side; density = points / reference "
        "pixels with ground truth; ms/keyframe = median of DSI build + depth from the DSI; equal density: each "
        "loss and max vote on their most confident points, as many as the sparser of the two has; "
        "'-' = combination the engine refuses", ""])


def _pictures(evaluation, plot_methods, methods, modes, output: Path, description: str) -> list[Path]:
    """depth_maps.png (first polarity mode) and depth_focus_curves.png (first keyframe)."""
    from focus_ros.evaluation import depth_report
    from focus_ros.evaluation.depth import MAX_VOTE, focus_curves, pick_curve_pixel
    from focus_ros.depth.focus import max_vote_scores

    if not plot_methods:
        return []
    mode = modes[0]
    written = [depth_report.plot_depth_panels(evaluation, plot_methods, output / "depth_maps.png", mode,
                                              title=f"{description}: first keyframe, {mode} polarity"),
               depth_report.plot_accuracy_versus_density(evaluation.rows, output / "depth_accuracy_density.png",
                                                         modes)]
    chooser = next((m for m in plot_methods if (m, mode) in evaluation.first_outcomes and m != MAX_VOTE), None)
    if chooser is None:
        return written
    x, y = pick_curve_pixel(evaluation.first_outcomes[(chooser, mode)], evaluation.first_truth)
    votes = evaluation.dsi_votes[mode]
    losses = [m for m in methods if m != MAX_VOTE and (m, mode) in evaluation.first_outcomes]
    curves = focus_curves(votes, x, y, losses, evaluation.patch_focus)
    if MAX_VOTE in methods:
        curves[MAX_VOTE] = max_vote_scores(votes[y:y + 1, x:x + 1])[0, 0].astype(np.float64)
    true_depth = float(evaluation.first_truth.depth_m[y, x])
    written.append(depth_report.plot_focus_curves(evaluation.depths_m, curves, true_depth,
                                                  output / "depth_focus_curves.png", pixel=(x, y)))
    return written
