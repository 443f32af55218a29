"""Is each depth point's standard deviation calibrated? The share of true depths within 1 sigma of
the estimate, for the keyframes' clouds (points.ply, depth/points) and the fused map (map.ply,
depth/map), on simulated sequences with ground-truth depth.

    .venv/bin/python benchmarks/eval_depth_sigma.py [--sequences slider:0,six_dof:0] [--duration 3]
        [--scale 1.0]

``--sequences``: NAME:SEED,... — NAME one of benchmarks/depth_sequences.py's sequences (slider,
six_dof, six_dof_near: made and cached there) or any simulator preset
(focus_ros.sources.presets.PRESETS; cached the same way, in $FOCUS_ROS_CACHE, default
/tmp/focus_ros_depth_cache). Each sequence is cut into keyframes by the depth pipeline as
``focus-ros depth`` cuts it (by parallax; benchmarks/eval_depth_selection.keyframes_of: the
scene depth from the truth, each reference view snapped to a ground-truth map's time), each
keyframe estimated with the defaults (DepthEstimator.estimate), its map points fed to a FusedMap
with the defaults (every point kept, as focus-ros depth keeps them offline).

Per point: the signed depth error Z - Z_true (m, along the optical axis of the point's own
keyframe, whose reference view is a ground-truth map's: no interpolation) against its sigma
(DepthKeyframe.point_sigma_m, FusedMap.points(with_sigma=True)). The truth is resampled onto the
estimate's undistorted grid as focus_ros.evaluation.depth does, and a point on a depth edge is
compared with the nearer side (:func:`signed_errors_m`). Points without truth are left out, with
their sigma.

Reported per sequence, for the clouds and the map: points with truth, the share within 1 sigma
(calibrated: 0.68) and 2 sigma (0.95), the median |error| / sigma; whether sigma is informative:
the median relative error and the share within 5 % of the half of the points with the smaller
relative sigma (sigma / Z) against the other half, the share within 1 sigma by depth and by
confidence tertile; for the map, the share within 1 sigma if a fused point kept its own
keyframe's sigma (instead of FusedMap.points' rule: over sqrt(the estimates it averages), times
MAP_SIGMA_FACTOR). ``--scale``: every sigma times this (what another calibration factor would
give); the line "scale for 68 %" says which factor would put 68.27 % of all the sequences' points
(and map points) within 1 sigma. The calibration factors in focus_ros.depth.focus.SIGMA_* and
focus_ros.depth.fusion.MAP_SIGMA_FACTOR were chosen on slider:0,six_dof:0 (how:
docs/evaluation/depth_sigma.md); MAP_SIGMA_FACTOR was refitted since on the depth set's tune half
(``focus-ros evaluate-depth --set tune``; docs/evaluation/depth_set.md).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import depth_sequences  # noqa: E402
from eval_depth_selection import keyframes_of  # noqa: E402
from focus_ros.camera import Calibration  # noqa: E402
from focus_ros.depth.fusion import MAP_SIGMA_FACTOR, FusedMap  # noqa: E402
from focus_ros.estimators.depth import DepthEstimator, DepthSettings  # noqa: E402
from focus_ros.evaluation.depth import ground_truth_on_reference_grid  # noqa: E402
from focus_ros.pipelines.depth import KEYFRAME_BASELINE_FRACTION  # noqa: E402
from focus_ros.sources.recording import Recording  # noqa: E402

#: the share of a normal distribution within 1 sigma
ONE_SIGMA = 0.6827


def load_sequence(name: str, duration_s: float, seed: int) -> Recording:
    """A depth sequence, a simulator preset or a sequence of the wide depth set
    (benchmarks/depth_sequences.py), cached as .npz."""
    return depth_sequences.load(name, duration_s, seed)


def signed_errors_m(points_world: np.ndarray, t_ref_ns: int, truth, trajectory,
                    calibration: Calibration) -> tuple[np.ndarray, np.ndarray]:
    """(Z - Z_true (M,) m, Z (M,) m) of world points (M, 3) m seen from the camera of the ground-truth
    map nearest to t_ref_ns, as focus_ros.evaluation.depth.cloud_relative_errors judges them (truth on
    the undistorted grid; on a depth edge the nearer of the 2x2 sensor depths), but signed and in
    metres, aligned with the points (NaN where there is no truth)."""
    index = truth.nearest_index(int(t_ref_ns))
    pose = trajectory.world_from_camera(int(truth.t[index]))
    camera = (np.asarray(points_world, np.float64) - pose[:3, 3]) @ pose[:3, :3]
    depth = camera[:, 2]
    errors = np.full(len(camera), np.nan)
    in_front = np.flatnonzero(depth > 1e-6)
    pixels = np.round(calibration.project(camera[in_front], distort=False)).astype(np.int64)
    inside = ((pixels[:, 0] >= 0) & (pixels[:, 0] < calibration.width) &
              (pixels[:, 1] >= 0) & (pixels[:, 1] < calibration.height))
    seen, x, y = in_front[inside], pixels[inside, 0], pixels[inside, 1]
    reference = ground_truth_on_reference_grid(truth.depth_m[index], calibration)
    true_depth = reference.depth_m[y, x].astype(np.float64)
    edge = reference.at_edge[y, x]
    if edge.any():  # the nearer side: the corner depth closest to the estimate
        corners = reference.corners_m[y[edge], x[edge]].astype(np.float64)
        distance = np.abs(depth[seen[edge], None] - corners)
        distance[np.isnan(distance)] = np.inf
        nearest = distance.argmin(axis=1)
        chosen = corners[np.arange(len(nearest)), nearest]
        true_depth[edge] = np.where(np.isfinite(distance.min(axis=1)), chosen, np.nan)
    errors[seen] = depth[seen] - true_depth
    return errors, depth


def evaluate_sequence(name: str, seed: int, duration_s: float, settings: DepthSettings) -> dict:
    """:func:`evaluate_recording` of a sequence (:func:`load_sequence`)."""
    return evaluate_recording(load_sequence(name, duration_s, seed), f"{name}:{seed}", settings)


def evaluate_recording(recording: Recording, label: str, settings: DepthSettings) -> dict:
    """Per point of the clouds ("points") and of the map ("map"): error (m), sigma (m), depth (m),
    confidence (the clouds: focus contrast over the keyframe's median; the map: keyframes that
    agree) and, for the map, the estimates each point averages."""
    calibration = recording.calibration
    keyframes, trajectory, truth = keyframes_of(recording, settings, KEYFRAME_BASELINE_FRACTION)
    estimator = DepthEstimator(calibration, settings)
    fused = FusedMap(max_points=100_000_000)
    cloud = {key: [] for key in ("error", "sigma", "depth", "confidence")}
    stamps, offered = [], []
    for events, t_ref, _ in keyframes:
        keyframe = estimator.estimate(events, trajectory, t_ref)
        if keyframe.warning:
            print(f"  {label}: keyframe at {t_ref / 1e9:.2f} s: {keyframe.warning}", file=sys.stderr)
            continue
        errors, depth = signed_errors_m(keyframe.points_world, t_ref, truth, trajectory, calibration)
        median_confidence = np.median(keyframe.point_confidence) if keyframe.point_count else 1.0
        for key, values in (("error", errors), ("sigma", keyframe.point_sigma_m), ("depth", depth),
                            ("confidence", keyframe.point_confidence / median_confidence)):
            cloud[key].append(np.asarray(values, np.float64))
        fused.add(keyframe.map_points_world, keyframe.world_from_camera, 1.0 / calibration.fx,
                  keyframe.map_point_sigma_m)
        stamps.append(t_ref)
        offered.append(len(keyframe.map_points_world))
        print(f"  {label}: keyframe at {t_ref / 1e9:.2f} s, {keyframe.point_count} points, "
              f"{len(keyframe.map_points_world)} offered to the map", file=sys.stderr)
    points, support, sigma = fused.points(with_sigma=True)
    kept = np.flatnonzero(fused.support() >= fused.min_keyframes)
    source = np.searchsorted(np.cumsum(offered), kept, side="right")  # the keyframe each map point came from
    map_error, map_depth = np.full(len(points), np.nan), np.full(len(points), np.nan)
    for index, stamp in enumerate(stamps):
        mine = source == index
        if mine.any():
            map_error[mine], map_depth[mine] = signed_errors_m(points[mine], stamp, truth, trajectory, calibration)
    clouds = {key: np.concatenate(values) if values else np.empty(0) for key, values in cloud.items()}
    fused_points = dict(error=map_error, sigma=sigma.astype(np.float64), depth=map_depth,
                        confidence=support.astype(np.float64), estimates=1.0 + fused.shifts[kept])
    return dict(name=label, keyframes=len(stamps), points=clouds, map=fused_points)


def _known(result: dict) -> dict:
    """The points with truth and a finite sigma."""
    keep = np.isfinite(result["error"]) & np.isfinite(result["sigma"])
    return {key: values[keep] for key, values in result.items()}


def _halves(points: dict) -> str:
    """'certain half | uncertain half' by relative sigma: median relative error % and share within 5 %."""
    relative_sigma = points["sigma"] / points["depth"]
    order = np.argsort(relative_sigma, kind="stable")
    relative_error = np.abs(points["error"]) / (points["depth"] - points["error"])
    parts = []
    for half in (order[:len(order) // 2], order[len(order) // 2:]):
        errors = relative_error[half]
        parts.append(f"{100 * np.median(errors):.2f} % / {100 * np.mean(errors <= 0.05):.0f} %" if len(errors)
                     else "-")
    return " | ".join(parts)


def _by_tertile(points: dict, key: str) -> str:
    """The share within 1 sigma in each tertile of points[key] (low, middle, high)."""
    values = points[key]
    order = np.argsort(values, kind="stable")
    inside = np.abs(points["error"]) <= points["sigma"]
    return " / ".join(f"{np.mean(inside[part]):.2f}" if len(part) else "-" for part in np.array_split(order, 3))


def rows(result: dict, scale: float) -> list[str]:
    """Markdown rows (points, map) of one sequence."""
    out = []
    for kind in ("points", "map"):
        points = _known(result[kind])
        points["sigma"] = points["sigma"] * scale
        if not len(points["error"]):
            out.append(f"| {result['name']} | {kind} | 0 | - | - | - | - | - | - | - | - |")
            continue
        ratio = np.abs(points["error"]) / points["sigma"]
        own = "-"
        if kind == "map":  # the sigma of the point's own keyframe, without the map's rule
            own = f"{np.mean(ratio * MAP_SIGMA_FACTOR / np.sqrt(points['estimates']) <= 1.0):.2f}"
        out.append(f"| {result['name']} | {kind} | {len(ratio):,} | **{np.mean(ratio <= 1.0):.2f}** | "
                   f"{np.mean(ratio <= 2.0):.2f} | {np.median(ratio):.2f} | {_halves(points)} | "
                   f"{_by_tertile(points, 'depth')} | {_by_tertile(points, 'confidence')} | "
                   f"{100 * np.median(points['sigma'] / points['depth']):.2f} % | {own} |")
    return out


HEADER = ("| sequence:seed | cloud | points with truth | within 1 sigma | within 2 sigma | median abs(error)/sigma "
          "| smaller-sigma half: median rel. error / within 5 % | larger-sigma half | within 1 sigma by depth "
          "tertile (near / mid / far) | by confidence tertile (low / mid / high) | median sigma/Z "
          "| map: within its keyframe's sigma |\n|---|---|---|---|---|---|---|---|---|---|---|---|")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sequences", default="slider:0,six_dof:0",
                        help="NAME:SEED,... (depth_sequences' names or simulator presets)")
    parser.add_argument("--duration", type=float, default=3.0, help="seconds of each sequence")
    parser.add_argument("--scale", type=float, default=1.0, help="every sigma times this")
    args = parser.parse_args(argv)
    sequences = []
    for item in args.sequences.split(","):
        name, _, seed = item.partition(":")
        sequences.append((name, int(seed or 0)))
    print(f"command: .venv/bin/python benchmarks/eval_depth_sigma.py --sequences {args.sequences} "
          f"--duration {args.duration:g} --scale {args.scale:g}\n")
    results = [evaluate_sequence(name, seed, args.duration, DepthSettings()) for name, seed in sequences]
    print(HEADER)
    for result in results:
        print("\n".join(rows(result, args.scale)))
    ratios = {kind: np.concatenate([np.abs(_known(r[kind])["error"]) / (_known(r[kind])["sigma"] * args.scale)
                                    for r in results]) for kind in ("points", "map")}
    print("\nscale for 68 % within 1 sigma (pooled over these sequences): "
          + ", ".join(f"{kind} x{np.percentile(ratio, 100 * ONE_SIGMA):.3f}" for kind, ratio in ratios.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
