"""Accuracy against density of the depth estimator's selection rules, on simulated sequences.

    .venv/bin/python benchmarks/eval_depth_selection.py [--sequences slider,six_dof,six_dof_near]
        [--baseline-fraction 0.1] [--output /tmp/depth_selection]

For every sequence (benchmarks/depth_sequences.py: 3 s each, cached after the first run) the
stream is cut into keyframes as ``focus-ros depth`` cuts it by default (by parallax: the camera
travels a fraction of the scene depth), each keyframe estimated with the defaults (the
DSI's planes over the depth range the previous keyframe saw), its reference view snapped to a
ground-truth depth map time. On each keyframe's DSI the focus curves of the default loss and
of EMVS's max vote are reduced once to their peaks (``DepthEstimator.focus_features``), then
every selection rule picks its pixels from the same features. Errors: |Z - Z_true| / Z_true of
the published points against the simulator's depth map (a point on a depth edge counts as
right for either side, as in focus_ros.evaluation.depth). Prints Markdown tables (one per
sequence): points per 3 s, median and share within 5 % / 10 % of the relative error, and
the max-vote baseline at the same density (its most confident points, as many per keyframe).
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
from focus_ros.depth.fusion import VoxelMap  # noqa: E402
from focus_ros.depth.semidense import adaptive_threshold_mask, back_project, median_filter_depth  # noqa: E402
from focus_ros.estimators.depth import (KEYFRAME_BASELINE_FRACTION, DepthEstimator, DepthSettings,  # noqa: E402
                                       KeyframeSelector)
from focus_ros.evaluation.depth import (cloud_relative_errors, ground_truth_on_reference_grid,  # noqa: E402
                                       relative_errors)
from focus_ros.poses import Trajectory  # noqa: E402
from focus_ros.sources.depth_maps import DepthGroundTruth  # noqa: E402

BASE = DepthSettings()
#: every rule off (the adaptive threshold alone, EMVS's); each rule below switches some on
NO_RULES = dict(min_confidence_rank=0.0, min_contrast=0.0, max_rival_ratio=1.0, border_planes=0, support_neighbours=0)
MAP_SETTINGS = ((0.005, 2), (0.01, 1), (0.01, 2), (0.01, 3))
DEFAULT_RULE = {name: getattr(BASE, name) for name in NO_RULES}


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
    "contrast 1 + rival 0.5 + border 2 + support 3": _rule(1.0, 0.5, 2, 3),
    "contrast 1 + rival 0.7 + border 2 + support 5": _rule(1.0, 0.7, 2, 5),
    "rival 0.5 + border 2 + support 5": _rule(0.0, 0.5, 2, 5),
    "contrast 2 + rival 0.5 + border 2 + support 5": _rule(2.0, 0.5, 2, 5),
    "contrast 1 + rival 0.5 + border 2 + support 7": _rule(1.0, 0.5, 2, 7),
    "contrast 1 + rival 0.5 + border 2 + support 5 (default)": DEFAULT_RULE,
}

#: the rules whose clouds are also fused into maps
MAP_RULES = ("contrast 1 + rival 0.5 + border 2 + support 5 (default)", "contrast 2 + rival 0.7 + border 2 + support 3",
             "adaptive + support 5")


def keyframes_of(recording, settings: DepthSettings, baseline_fraction: float):
    """[(events, t_ref_ns snapped to a truth map, truth index)] cut by parallax: every keyframe ends when the
    camera moved baseline_fraction x the median ground-truth depth at its start (the scene depth the
    estimator tracks; here from the truth, so that the rules are compared on the same keyframes)."""
    truth = DepthGroundTruth.from_recording(recording)
    trajectory = Trajectory.from_poses(recording.poses)
    first, last = trajectory.t_range_ns
    events = recording.events
    events = events[(events.t >= first) & (events.t <= last)]
    median_depth = float(np.nanmedian(np.where(np.isfinite(truth.depth_m[0]), truth.depth_m[0], np.nan)))
    selector = KeyframeSelector.by_parallax(median_depth, baseline_fraction, min_events=settings.min_events)
    cut = []
    for start in range(0, len(events), 100_000):
        cut.extend(selector.push(events[start:start + 100_000], trajectory))
    rest = selector.flush()
    if rest is not None and len(rest) > 100_000:
        cut.append(rest)
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


def evaluate_sequence(name: str, baseline_fraction: float, settings: DepthSettings):
    recording = depth_sequences.load(name)
    calibration = recording.calibration
    duration_s = (recording.events.t[-1] - recording.events.t[0]) / 1e9
    keyframes, trajectory, truth = keyframes_of(recording, settings, baseline_fraction)
    estimator = DepthEstimator(calibration, settings)
    per_rule = {rule: [] for rule in RULES}
    baseline = {rule: [] for rule in RULES}
    seconds = []
    clouds = {rule: [] for rule in MAP_RULES}  # rule -> [(points_world, t_ref_ns)], for the fused map
    for events, t_ref, index in keyframes:
        started = time.perf_counter()
        keyframe = estimator.estimate(events, trajectory, t_ref)
        seconds.append(time.perf_counter() - started)
        if keyframe.warning:
            print(f"  {name}: keyframe at {t_ref / 1e9:.2f} s: {keyframe.warning}", file=sys.stderr)
            continue
        focus = estimator.focus_features(estimator.dsi)
        votes = estimator.focus_features(estimator.dsi, method="max_vote")
        reference = ground_truth_on_reference_grid(truth.depth_m[index], calibration)
        for rule, changes in RULES.items():
            if changes is None:
                mask, depth = select_before(focus, settings)
            else:
                mask, depth = estimator.select(focus, replace(settings, **{**NO_RULES, **changes}))
            rows, columns = np.nonzero(mask & np.isfinite(depth))
            pixels = np.stack([columns, rows], axis=1)
            errors, _ = relative_errors(depth[rows, columns], pixels, reference)
            per_rule[rule].append(errors)
            if rule in MAP_RULES:
                points, _ = back_project(depth, calibration, estimator.dsi.world_from_reference)
                clouds[rule].append((points, t_ref))
            # max vote at the same density: its most confident pixels, as many, median-filtered as EMVS does
            peaked = votes.observed & (votes.confidence > 0)
            order = np.argsort(-np.where(peaked, votes.confidence, -np.inf), axis=None)[:len(rows)]
            vote_mask = np.zeros(peaked.shape, bool)
            vote_mask.flat[order] = True
            vote_mask &= peaked
            vote_depth = median_filter_depth(votes.depth_m, vote_mask, settings.median_filter_px)
            vrows, vcolumns = np.nonzero(vote_mask)
            verrors, _ = relative_errors(vote_depth[vrows, vcolumns], np.stack([vcolumns, vrows], axis=1), reference)
            baseline[rule].append(verrors)
        print(f"  {name}: keyframe at {t_ref / 1e9:.2f} s, {len(events)} events, planes "
              f"{keyframe.z_range_m[0]:.2f}-{keyframe.z_range_m[1]:.2f} m, {seconds[-1]:.2f} s", file=sys.stderr)
    maps = {}
    for rule, rule_clouds in clouds.items():
        for voxel_m, min_keyframes in MAP_SETTINGS:
            fused = VoxelMap(voxel_m, min_keyframes, max_voxels=10_000_000)
            for points, _ in rule_clouds:
                fused.add(points)
            map_points, _ = fused.points()
            maps[(rule, voxel_m, min_keyframes)] = (len(map_points), map_errors(map_points, rule_clouds, truth,
                                                                                trajectory, calibration))
            if min_keyframes > 1:  # the keyframes' own points where keyframes agree
                confirmed = [(points[fused.support_at(points) >= min_keyframes], t_ref)
                             for points, t_ref in rule_clouds]
                errors = np.concatenate([cloud_relative_errors(points, t_ref, truth, trajectory, calibration)
                                         for points, t_ref in confirmed])
                maps[(rule + ", points kept", voxel_m, min_keyframes)] = (len(errors), errors)
    return per_rule, baseline, duration_s, len(keyframes), seconds, maps


def map_errors(points, clouds, truth, trajectory, calibration) -> np.ndarray:
    """Relative depth error of every map point, seen from the first keyframe's reference view
    (its ground-truth depth map) that has it in view with ground truth; NaN if none does."""
    errors = np.full(len(points), np.nan)
    for _, t_ref in clouds:
        missing = np.flatnonzero(np.isnan(errors))
        if not len(missing):
            break
        errors[missing] = cloud_relative_errors(points[missing], t_ref, truth, trajectory, calibration)
    return errors


def summary(errors_list, duration_s):
    errors = np.concatenate(errors_list) if errors_list else np.empty(0)
    known = errors[np.isfinite(errors)]
    if not len(known):
        return "| 0 | - | - | - |"
    return (f"| {len(errors) * 3.0 / duration_s:,.0f} | {100 * np.median(known):.2f} | "
            f"{100 * np.mean(known < 0.05):.1f} | {100 * np.mean(known < 0.10):.1f} |")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sequences", default=",".join(depth_sequences.SEQUENCES))
    parser.add_argument("--baseline-fraction", type=float, default=KEYFRAME_BASELINE_FRACTION)
    parser.add_argument("--planes", type=int, default=BASE.planes, help=f"DSI planes (default {BASE.planes})")
    args = parser.parse_args(argv)
    print(f"command: .venv/bin/python benchmarks/eval_depth_selection.py --sequences {args.sequences} "
          f"--baseline-fraction {args.baseline_fraction:g} --planes {args.planes}\n")
    settings = replace(BASE, planes=args.planes)
    for name in args.sequences.split(","):
        per_rule, baseline, duration_s, count, seconds, maps = evaluate_sequence(name, args.baseline_fraction, settings)
        print(f"### {name}: {count} keyframes in {duration_s:.1f} s, {np.median(seconds):.2f} s per keyframe "
              f"(median, auto depth range)\n")
        print("| rule | points per 3 s | median error % | within 5 % | within 10 % | max vote, same density: "
              "median % | within 5 % |")
        print("|---|---|---|---|---|---|---|")
        for rule in RULES:
            own = summary(per_rule[rule], duration_s)
            other = summary(baseline[rule], duration_s).split("|")
            print(f"| {rule} {own} {other[2].strip()} | {other[3].strip()} |")
        print()
        print("Fused map (voxel grid, kept where keyframes agree) of the keyframe clouds of a rule:\n")
        print("| keyframe rule | voxel (m) | keyframes that agree | map points per 3 s | median error % | within 5 % "
              "| within 10 % |")
        print("|---|---|---|---|---|---|---|")
        for (rule, voxel_m, min_keyframes), (count_points, errors) in maps.items():
            row = summary([errors], 3.0).split("|")
            print(f"| {rule} | {voxel_m:g} | {min_keyframes} | {count_points * 3.0 / duration_s:,.0f} |{row[2]}|"
                  f"{row[3]}|{row[4]}|")
        print()
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
