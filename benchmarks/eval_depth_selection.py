"""Accuracy against density of the depth estimator's selection rules, its focus losses and the
fused map, on simulated sequences (6-DoF and the slider).

    .venv/bin/python benchmarks/eval_depth_selection.py [--sequences slider,six_dof,six_dof_near]
        [--baseline-fraction 0.05] [--planes 100] [--losses all | NAME,NAME | none] [--no-rules]

For every sequence (benchmarks/depth_sequences.py: 3 s each, cached after the first run) the
stream is cut into keyframes by the depth pipeline as ``focus-ros depth`` cuts it by default (by
parallax: the camera travels a fraction of the scene depth, here the ground truth's), each
keyframe estimated with the defaults (the DSI's planes over the depth range the previous keyframe
saw), its reference view snapped to a ground-truth depth map time. On each keyframe's DSI the focus curves of the default loss and
of EMVS's max vote are reduced once to their peaks (``DepthEstimator.focus_features``), then
every selection rule picks its pixels from the same features. Errors: |Z - Z_true| / Z_true of
the published points against the simulator's depth map (a point on a depth edge counts as
right for either side, as in focus_ros.evaluation.depth). Prints Markdown tables (one per
sequence): points per 3 s, median and share within 5 % / 10 % of the relative error, and
the max-vote baseline at the same density (its most confident points, as many per keyframe).

The fused map (focus_ros.depth.fusion.FusedMap) is fed the points a rule offers it (the
default rules with ``map_support_neighbours`` neighbours instead of ``support_neighbours``),
keyframe after keyframe; each point it publishes is judged in its own keyframe's view.

``--losses``: the same keyframes and DSIs, every focus loss the depth estimator supports without
polarity (the default; focus_ros.depth.focus.PATCH_LOSSES less the two that need it; ``all``)
or those named, each with the default rules:
its cloud, max vote at the same density, the focus + peaks + selection time per keyframe (the
DSI, shared by every loss, beside it), and the fused map of its points with the defaults.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import depth_sequences  # noqa: E402
from focus_ros.depth.focus import MAX_VOTE, PATCH_LOSSES, check_patch_loss  # noqa: E402
from focus_ros.depth.fusion import MAP_DEPTH_TOLERANCE, MAP_MIN_KEYFRAMES, FusedMap  # noqa: E402
from focus_ros.depth.semidense import adaptive_threshold_mask, back_project, median_filter_depth  # noqa: E402
from focus_ros.estimators.depth import DepthEstimator, DepthSettings  # noqa: E402
from focus_ros.evaluation.depth import (cloud_relative_errors, ground_truth_on_reference_grid,  # noqa: E402
                                       relative_errors)
from focus_ros.pipelines.depth import KEYFRAME_BASELINE_FRACTION, DepthPipeline, DepthPipelineSettings  # noqa: E402
from focus_ros.poses import Trajectory  # noqa: E402
from focus_ros.sources.depth_maps import DepthGroundTruth  # noqa: E402

BASE = DepthSettings()
#: every rule off (the adaptive threshold alone, EMVS's); each rule below switches some on
NO_RULES = dict(min_confidence_rank=0.0, min_contrast=0.0, max_rival_ratio=1.0, border_planes=0, support_neighbours=0)
DEFAULT_RULE = {name: getattr(BASE, name) for name in NO_RULES}
DEFAULT_NAME = "contrast 1 + rival 0.5 + border 2 + support 5 (default)"


def _rule(contrast=0.0, rival=1.0, border=0, support=0) -> dict:
    return dict(min_contrast=contrast, max_rival_ratio=rival, border_planes=border, support_neighbours=support)


#: the rules compared: name -> DepthSettings changes from NO_RULES (None = the rule before issue 25)
RULES = {
    "fixed share (before): rank >= 0.8, local mean": None,
    "adaptive (EMVS): local mean": _rule(),
    "adaptive + contrast >= 1": _rule(contrast=1.0),
    "adaptive + contrast >= 2": _rule(contrast=2.0),
    "adaptive + contrast >= 4": _rule(contrast=4.0),
    "adaptive + rival <= 0.7": _rule(rival=0.7),
    "adaptive + rival <= 0.5": _rule(rival=0.5),
    "adaptive + border 2": _rule(border=2),
    "adaptive + support 3": _rule(support=3),
    "adaptive + support 5": _rule(support=5),
    "contrast 2 + rival 0.7 + border 2": _rule(2.0, 0.7, 2),
    "contrast 2 + rival 0.7 + border 2 + support 3": _rule(2.0, 0.7, 2, 3),
    "contrast 1 + rival 0.5 + border 2 + support 2": _rule(1.0, 0.5, 2, 2),
    "contrast 1 + rival 0.5 + border 2 + support 3": _rule(1.0, 0.5, 2, 3),
    "contrast 1 + rival 0.7 + border 2 + support 5": _rule(1.0, 0.7, 2, 5),
    "rival 0.5 + border 2 + support 5": _rule(0.0, 0.5, 2, 5),
    "contrast 2 + rival 0.5 + border 2 + support 5": _rule(2.0, 0.5, 2, 5),
    "contrast 1 + rival 0.5 + border 2 + support 7": _rule(1.0, 0.5, 2, 7),
    DEFAULT_NAME: DEFAULT_RULE,
}

#: the fused map's rows: (rule whose points the map is offered, agreement as a share of the depth,
#: keyframes that must agree); the first rule is the default's map_support_neighbours
MAP_RULES = ("contrast 1 + rival 0.5 + border 2 + support 2", "contrast 1 + rival 0.5 + border 2 + support 3",
             DEFAULT_NAME)
MAP_SETTINGS = tuple((rule, tolerance, min_keyframes) for rule in MAP_RULES for tolerance in (0.01, 0.015, 0.02, 0.03)
                     for min_keyframes in (2, 3))
#: the points the defaults offer the map: the default rules with map_support_neighbours
MAP_CANDIDATES = {**DEFAULT_RULE, "support_neighbours": BASE.map_support_neighbours}


def keyframes_of(recording, settings: DepthSettings, baseline_fraction: float):
    """[(events, t_ref_ns snapped to a truth map, truth index)] cut by the depth pipeline by parallax: every
    keyframe ends when the camera moved baseline_fraction x the median ground-truth depth of the first
    map (the scene depth the estimator tracks; here from the truth and never fed back from the
    estimates, so that the rules are compared on the same keyframes), or turned 15 deg."""
    truth = DepthGroundTruth.from_recording(recording)
    trajectory = Trajectory.from_poses(recording.poses)
    first, last = trajectory.t_range_ns
    events = recording.events
    events = events[(events.t >= first) & (events.t <= last)]
    median_depth = float(np.nanmedian(np.where(np.isfinite(truth.depth_m[0]), truth.depth_m[0], np.nan)))
    pipeline = DepthPipeline(DepthPipelineSettings(keyframe_baseline_fraction=baseline_fraction), settings,
                             calibration=recording.calibration, trajectory=trajectory)
    pipeline.selector.set_scene_depth(median_depth)
    cut = [job.events for start in range(0, len(events), 100_000)
           for job in pipeline.add_events(events[start:start + 100_000])]
    cut += [job.events for job in pipeline.flush() if len(job.events) > 100_000]
    out = []
    for part in cut:
        middle = int(part.t[0]) + (int(part.t[-1]) - int(part.t[0])) // 2
        index = truth.nearest_index(middle)
        out.append((part, int(truth.t[index]), index))
    return out, trajectory, truth


def select_before(features, settings):
    """The rule before issue 25: rank >= 0.8 and above the local mean rank, median filter."""
    peaked = features.observed & (features.confidence > 0)
    mask = adaptive_threshold_mask(features.confidence, peaked, settings.threshold_block_px, 0.0, 0.8)
    return mask, median_filter_depth(features.depth_m, mask, settings.median_filter_px)


def published_errors(mask, depth, reference) -> np.ndarray:
    """Relative errors of the published pixels (mask & finite depth) against the reference truth."""
    rows, columns = np.nonzero(mask & np.isfinite(depth))
    return relative_errors(depth[rows, columns], np.stack([columns, rows], axis=1), reference)[0]


def max_vote_errors(votes, count: int, reference, settings) -> np.ndarray:
    """Max vote at the same density: EMVS's most confident `count` pixels, median-filtered as EMVS does."""
    peaked = votes.observed & (votes.confidence > 0)
    order = np.argsort(-np.where(peaked, votes.confidence, -np.inf), axis=None)[:count]
    mask = np.zeros(peaked.shape, bool)
    mask.flat[order] = True
    mask &= peaked
    return published_errors(mask, median_filter_depth(votes.depth_m, mask, settings.median_filter_px), reference)


def fused(clouds, judge, depth_tolerance: float, min_keyframes: int):
    """(points published, their errors) of a FusedMap fed the clouds [(points, world_from_camera,
    pixel_rad, t_ref_ns)] in order; judge(points, t_ref_ns): relative errors of points in the view
    of the keyframe at t_ref_ns (each published point is judged in its own keyframe's view)."""
    fused_map = FusedMap(depth_tolerance, min_keyframes, max_points=100_000_000)
    for points, pose, pixel_rad, _ in clouds:
        fused_map.add(points, pose, pixel_rad)
    published, _ = fused_map.points()
    kept = np.flatnonzero(fused_map.support() >= min_keyframes)
    ends = np.cumsum([len(points) for points, *_ in clouds])
    keyframe = np.searchsorted(ends, kept, side="right")  # the keyframe each published point came from
    errors = np.full(len(published), np.nan)
    for index, (_, _, _, t_ref) in enumerate(clouds):
        mine = keyframe == index
        if mine.any():
            errors[mine] = judge(published[mine], t_ref)
    return len(published), errors


def evaluate_sequence(name: str, baseline_fraction: float, settings: DepthSettings, losses=(), rules=True,
                      seed: int = 0):
    recording = depth_sequences.load(name, seed=seed)
    calibration = recording.calibration
    pixel_rad = 1.0 / calibration.fx
    duration_s = (recording.events.t[-1] - recording.events.t[0]) / 1e9
    keyframes, trajectory, truth = keyframes_of(recording, settings, baseline_fraction)
    estimator = DepthEstimator(calibration, settings)
    rule_names = list(RULES) if rules else []
    per_rule = {rule: [] for rule in rule_names}
    baseline = {rule: [] for rule in rule_names}
    seconds, dsi_seconds = [], []
    clouds = {rule: [] for rule in MAP_RULES}  # rule -> [(points_world, pose, pixel_rad)] for the map
    per_loss = {loss: dict(errors=[], baseline=[], seconds=[], clouds=[]) for loss in losses}

    def judge(points, t_ref):
        return cloud_relative_errors(points, t_ref, truth, trajectory, calibration)

    for events, t_ref, index in keyframes:
        started = time.perf_counter()
        keyframe = estimator.estimate(events, trajectory, t_ref)
        seconds.append(time.perf_counter() - started)
        dsi_seconds.append(keyframe.timing_s.get("dsi", np.nan))
        if keyframe.warning:
            print(f"  {name}: keyframe at {t_ref / 1e9:.2f} s: {keyframe.warning}", file=sys.stderr)
            continue
        pose = estimator.dsi.world_from_reference
        votes = estimator.focus_features(estimator.dsi, method="max_vote")
        reference = ground_truth_on_reference_grid(truth.depth_m[index], calibration)
        focus = estimator.focus_features(estimator.dsi)
        for rule in rule_names:
            changes = RULES[rule]
            if changes is None:
                mask, depth = select_before(focus, settings)
            else:
                mask, depth = estimator.select(focus, replace(settings, **{**NO_RULES, **changes}))
            errors = published_errors(mask, depth, reference)
            per_rule[rule].append(errors)
            baseline[rule].append(max_vote_errors(votes, len(errors), reference, settings))
        for rule in MAP_RULES:
            mask, depth = estimator.select(focus, replace(settings, **{**NO_RULES, **RULES[rule]}))
            points, _ = back_project(depth, calibration, pose)
            clouds[rule].append((points, pose.copy(), pixel_rad, t_ref))
        for loss in losses:
            timing = {}
            features = estimator.focus_features(estimator.dsi, method=MAX_VOTE if loss == MAX_VOTE else "focus",
                                                loss=None if loss == MAX_VOTE else loss, timing=timing)
            marked = time.perf_counter()
            mask, depth = estimator.select(features)
            offered = estimator.select(features, replace(settings, **MAP_CANDIDATES))[1]
            timing["select"] = time.perf_counter() - marked
            result = per_loss[loss]
            result["seconds"].append(sum(timing.values()))
            errors = published_errors(mask, depth, reference)
            result["errors"].append(errors)
            result["baseline"].append(max_vote_errors(votes, len(errors), reference, settings))
            points, _ = back_project(offered, calibration, pose)
            result["clouds"].append((points, pose.copy(), pixel_rad, t_ref))
        print(f"  {name}: keyframe at {t_ref / 1e9:.2f} s, {len(events)} events, planes "
              f"{keyframe.z_range_m[0]:.2f}-{keyframe.z_range_m[1]:.2f} m, {seconds[-1]:.2f} s", file=sys.stderr)
    maps = {}
    for rule, tolerance, min_keyframes in MAP_SETTINGS:
        maps[(rule, tolerance, min_keyframes)] = fused(clouds[rule], judge, tolerance, min_keyframes)
    for result in per_loss.values():
        result["map"] = fused(result["clouds"], judge, MAP_DEPTH_TOLERANCE, MAP_MIN_KEYFRAMES)
    return dict(per_rule=per_rule, baseline=baseline, duration_s=duration_s, keyframes=len(keyframes),
                seconds=seconds, dsi_seconds=dsi_seconds, maps=maps, per_loss=per_loss)


def summary(errors_list, duration_s, count=None):
    """'| points per 3 s | median % | within 5 % | within 10 % |' of the errors (count: points, if
    not every error's point)."""
    errors = np.concatenate(errors_list) if len(errors_list) else np.empty(0)
    count = len(errors) if count is None else count
    known = errors[np.isfinite(errors)]
    if not len(known):
        return f"| {count * 3.0 / duration_s:,.0f} | - | - | - |"
    return (f"| {count * 3.0 / duration_s:,.0f} | {100 * np.median(known):.2f} | "
            f"{100 * np.mean(known < 0.05):.1f} | {100 * np.mean(known < 0.10):.1f} |")


def print_sequence(name: str, result: dict) -> None:
    duration_s = result["duration_s"]
    print(f"### {name}: {result['keyframes']} keyframes in {duration_s:.1f} s, {np.median(result['seconds']):.2f} s "
          f"per keyframe (median, auto depth range)\n")
    if result["per_rule"]:
        print("| rule | points per 3 s | median error % | within 5 % | within 10 % | max vote, same density: "
              "median % | within 5 % |")
        print("|---|---|---|---|---|---|---|")
        for rule, errors in result["per_rule"].items():
            other = summary(result["baseline"][rule], duration_s).split("|")
            print(f"| {rule} {summary(errors, duration_s)} {other[2].strip()} | {other[3].strip()} |")
        print()
    print("Fused map (focus_ros.depth.fusion.FusedMap; each point published judged in its keyframe's view):\n")
    print("| points offered by the rule | agreement (share of the depth) | keyframes that agree | map points per 3 s "
          "| median error % | within 5 % | within 10 % |")
    print("|---|---|---|---|---|---|---|")
    for (rule, tolerance, min_keyframes), (count, errors) in result["maps"].items():
        default = (rule == MAP_RULES[0] and tolerance == MAP_DEPTH_TOLERANCE and min_keyframes == MAP_MIN_KEYFRAMES)
        row = summary([errors], duration_s, count)
        print(f"| {rule}{' (the defaults)' if default else ''} | {tolerance:g} | {min_keyframes} {row}")
    print()
    if result["per_loss"]:
        print(f"Focus losses, default rules (DSI {1e3 * np.nanmedian(result['dsi_seconds']):.0f} ms per keyframe, "
              "shared by every loss; ms per keyframe below: focus + peaks + selection, median):\n")
        print("| loss | points per 3 s | median error % | within 5 % | within 10 % | max vote, same density: median % "
              "| within 5 % | ms per keyframe | map points per 3 s | map median % | map within 5 % |")
        print("|---|---|---|---|---|---|---|---|---|---|---|")
        for loss, loss_result in result["per_loss"].items():
            other = summary(loss_result["baseline"], duration_s).split("|")
            count, errors = loss_result["map"]
            fused_row = summary([errors], duration_s, count).split("|")
            label = "max vote (EMVS), default rules" if loss == MAX_VOTE else loss
            print(f"| {label} {summary(loss_result['errors'], duration_s)} {other[2].strip()} | {other[3].strip()} | "
                  f"{1e3 * np.median(loss_result['seconds']):.0f} |{fused_row[1]}|{fused_row[2]}|{fused_row[3]}|")
        print()
    sys.stdout.flush()


def losses_without_polarity() -> tuple[str, ...]:
    """The patch losses usable on a DSI without polarity (the estimator's default), then max vote."""
    usable = []
    for loss in PATCH_LOSSES:
        try:
            check_patch_loss(loss, False)
        except ValueError:
            continue
        usable.append(loss)
    return (*usable, MAX_VOTE)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sequences", default=",".join(depth_sequences.SEQUENCES))
    parser.add_argument("--baseline-fraction", type=float, default=KEYFRAME_BASELINE_FRACTION)
    parser.add_argument("--planes", type=int, default=BASE.planes, help=f"DSI planes (default {BASE.planes})")
    parser.add_argument("--loss", default=BASE.loss,
                        help=f"focus loss of the rule and map tables (default {BASE.loss})")
    parser.add_argument("--losses", default="none",
                        help="focus losses to table with the default rules: all, none (default), or NAME,NAME "
                             f"(of {', '.join(PATCH_LOSSES)}, {MAX_VOTE})")
    parser.add_argument("--no-rules", action="store_true", help="no table of the selection rules")
    parser.add_argument("--seed", type=int, default=0, help="simulation seed of the sequences (default 0)")
    args = parser.parse_args(argv)
    usable = losses_without_polarity()
    losses = {"all": usable, "none": ()}.get(args.losses, tuple(args.losses.split(",")))
    unknown = [loss for loss in losses if loss not in usable]
    if unknown:
        parser.error(f"loss {unknown[0]!r} is not one the estimator supports without polarity; choose from "
                     f"{', '.join(usable)}")
    print(f"command: .venv/bin/python benchmarks/eval_depth_selection.py --sequences {args.sequences} "
          f"--baseline-fraction {args.baseline_fraction:g} --planes {args.planes} --loss {args.loss} "
          f"--losses {args.losses}"
          f"{' --no-rules' if args.no_rules else ''} --seed {args.seed}\n")
    settings = replace(BASE, planes=args.planes, loss=args.loss)
    for name in args.sequences.split(","):
        print_sequence(name, evaluate_sequence(name, args.baseline_fraction, settings, losses, not args.no_rules,
                                               args.seed))
    return 0


if __name__ == "__main__":
    sys.exit(main())
