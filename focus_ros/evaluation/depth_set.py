"""Depth over a set of sequences, as a user gets it: ``focus-ros depth``'s loop with its defaults on
each sequence of :mod:`focus_ros.sources.depth_set`, the fused map judged against the simulator's
depth maps, and the distribution over the set.

Per sequence (:func:`evaluate_sequence`): keyframes, points of all keyframes and of the fused map
(and the map's points per 3 s: density), the map's median relative depth error |Z - Z_true| / Z_true
and share within 5 % (each map point judged in its own keyframe's view, the one its depth was
estimated in: :func:`focus_ros.evaluation.depth.map_relative_errors`), the same for all keyframes'
points, the share of the true depths within 1 sigma of the points' depth standard deviations
(keyframes' and map's: their calibration) and the factor the map's sigma would need for 68.3 %
of them to lie within 1 sigma (``map_sigma_scale``: the 68.3rd percentile of |Z - Z_true| /
sigma; 1 = calibrated, 2 = sigma half as large as the errors say), and the seconds it took. Over a set
(:func:`set_summary`): the median of the sequences' medians, the worst sequence, the share of
sequences at or under 1 % and 2 %, the least share within 5 %, the median density: the figures
issue 33's targets are stated in.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from focus_ros.estimators.depth import DepthEstimator, DepthSettings
from focus_ros.evaluation.depth import cloud_relative_errors, map_relative_errors
from focus_ros.pipelines.depth import DepthPipeline, DepthPipelineSettings, offline_keyframes
from focus_ros.poses import Trajectory
from focus_ros.sources.depth_maps import DepthGroundTruth
from focus_ros.sources.depth_set import DepthSequence, simulate
from focus_ros.sources.recording import Recording, load_npz, save_npz

__all__ = ["SequenceResult", "cached_recording", "depth_set_jobs", "evaluate_recording", "evaluate_sequence",
           "markdown_table",
           "plot_set", "set_summary", "write_csv"]

#: events handed to the pipeline at a time (as `focus-ros depth` reads them, in chunks)
CHUNK_EVENTS = 100_000
#: the density unit of issue 33's target: map points per 3 s
DENSITY_SECONDS = 3.0
#: a normal distribution's share within one standard deviation of its mean
ONE_SIGMA_SHARE = 0.6827


@dataclass(frozen=True)
class SequenceResult:
    """One sequence's figures (module docstring); errors as fractions, density in points per 3 s."""

    name: str
    half: str
    description: str
    events: int
    duration_s: float
    keyframes: int
    keyframes_without_depth: int
    points: int
    points_median_error: float
    points_within_5_percent: float
    map_points: int
    map_points_per_3s: float
    map_median_error: float
    map_within_5_percent: float
    map_within_10_percent: float
    points_within_1_sigma: float
    map_within_1_sigma: float
    map_sigma_scale: float
    seconds: float

    def row(self) -> dict:
        return asdict(self)


def cached_recording(sequence: DepthSequence, folder: Path | None) -> Recording:
    """The sequence's recording, simulated once and kept in ``folder`` (None: not kept) as .npz."""
    if folder is None:
        return simulate(sequence)
    path = Path(folder) / f"{sequence.name}_seed{sequence.seed}_{sequence.duration_s:g}s.npz"
    if not path.is_file():
        path.parent.mkdir(parents=True, exist_ok=True)
        save_npz(simulate(sequence), path)
    return load_npz(path)


def _keyframe_point_errors(keyframes, truth, trajectory, calibration) -> tuple[np.ndarray, np.ndarray]:
    """(relative error, |Z - Z_true| / sigma) of every keyframe's published points, pooled."""
    errors, ratios = [np.empty(0)], [np.empty(0)]
    for keyframe in keyframes:
        if keyframe.point_count:
            error, depth = cloud_relative_errors(keyframe.points_world, keyframe.t_ref_ns, truth, trajectory,
                                                 calibration, with_depths=True)
            errors.append(error)
            ratios.append(_sigma_ratios(error, depth, keyframe.point_sigma_m))
    return np.concatenate(errors), np.concatenate(ratios)


def _sigma_ratios(relative_errors: np.ndarray, depths_m: np.ndarray, sigma_m: np.ndarray) -> np.ndarray:
    """|Z - Z_true| / sigma per point, from the relative error (|Z - Z_true| / Z_true) and Z:
    Z_true = Z / (1 ± error), the sign unknown; Z · error / (1 + error) is exact when the
    estimate is too far and within error² of it otherwise. NaN without a sigma (a keyframe made
    without) or without ground truth."""
    if len(sigma_m) != len(relative_errors):
        return np.full(len(relative_errors), np.nan)
    with np.errstate(invalid="ignore", divide="ignore"):
        return depths_m * relative_errors / (1.0 + relative_errors) / sigma_m


def _median(values: np.ndarray) -> float:
    known = values[np.isfinite(values)]
    return float(np.median(known)) if len(known) else float("nan")


def _one_sigma_scale(ratios: np.ndarray) -> float:
    """The factor sigma would need for 68.3 % (a normal distribution's share within 1 sigma) of the
    ratios |Z - Z_true| / sigma to be at most 1: their 68.3rd percentile (NaN without any)."""
    known = ratios[np.isfinite(ratios)]
    return float(np.quantile(known, ONE_SIGMA_SHARE)) if len(known) else float("nan")


def _within(values: np.ndarray, bound: float) -> float:
    known = values[np.isfinite(values)]
    return float(np.mean(known < bound)) if len(known) else float("nan")


def evaluate_sequence(sequence: DepthSequence, recording: Recording, depth: DepthSettings | None = None,
                      pipeline_settings: DepthPipelineSettings | None = None,
                      on_keyframe: Callable[[], None] | None = None) -> SequenceResult:
    """``focus-ros depth``'s defaults (or the settings given) on one recording of the set, judged
    against its depth maps (module docstring). on_keyframe: called after each keyframe (progress)."""
    return evaluate_recording(recording, sequence.name, sequence.half, sequence.describe(), depth, pipeline_settings,
                              on_keyframe)


def evaluate_recording(recording: Recording, name: str, half: str = "", description: str = "",
                       depth: DepthSettings | None = None, pipeline_settings: DepthPipelineSettings | None = None,
                       on_keyframe: Callable[[], None] | None = None) -> SequenceResult:
    """:func:`evaluate_sequence` for any recording with poses and depth maps (a simulator preset's)."""
    depth = depth or DepthSettings()
    pipeline_settings = pipeline_settings or DepthPipelineSettings(map_max_points=100_000_000)
    calibration = recording.calibration
    trajectory = Trajectory.from_poses(recording.poses)
    truth = DepthGroundTruth.from_recording(recording)
    first, last = trajectory.t_range_ns
    events = recording.events[(recording.events.t >= first) & (recording.events.t <= last)]
    started = time.perf_counter()
    pipeline = DepthPipeline(pipeline_settings, depth, calibration=calibration, trajectory=trajectory)
    estimator = DepthEstimator(calibration, depth)
    chunks = (events[start:start + CHUNK_EVENTS] for start in range(0, len(events), CHUNK_EVENTS))
    keyframes = []
    for keyframe in offline_keyframes(pipeline, estimator, trajectory, chunks):
        keyframes.append(keyframe)
        if on_keyframe is not None:
            on_keyframe()
    seconds = time.perf_counter() - started
    map_points, _, map_sigma = pipeline.map.points(with_sigma=True)
    map_errors, map_depths = map_relative_errors(map_points, [k.t_ref_ns for k in keyframes if not k.warning],
                                                 truth, trajectory, calibration, with_depths=True,
                                                 point_views=pipeline.map.point_keyframes())
    point_errors, point_ratios = _keyframe_point_errors(keyframes, truth, trajectory, calibration)
    map_ratios = _sigma_ratios(map_errors, map_depths, map_sigma)
    duration_s = (int(events.t[-1]) - int(events.t[0])) / 1e9 if len(events) > 1 else 0.0
    return SequenceResult(
        name, half, description, len(events), duration_s, len(keyframes),
        sum(1 for keyframe in keyframes if not keyframe.point_count), len(point_errors), _median(point_errors),
        _within(point_errors, 0.05), len(map_points),
        len(map_points) * DENSITY_SECONDS / duration_s if duration_s else float("nan"), _median(map_errors),
        _within(map_errors, 0.05), _within(map_errors, 0.10), _within(point_ratios, 1.0 + 1e-12),
        _within(map_ratios, 1.0 + 1e-12), _one_sigma_scale(map_ratios), seconds)


def set_summary(results: list[SequenceResult]) -> dict:
    """The distribution over sequences: median of the maps' median errors, the worst (and its
    sequence), shares of sequences at or under 1 % and 2 %, the least and the median share within
    5 %, the median density (map points per 3 s)."""
    if not results:
        return {}
    medians = np.array([r.map_median_error for r in results])
    within = np.array([r.map_within_5_percent for r in results])
    worst = max(results, key=lambda r: r.map_median_error if np.isfinite(r.map_median_error) else np.inf)
    return {"sequences": len(results), "median_of_medians": float(np.nanmedian(medians)),
            "worst_median": worst.map_median_error, "worst_sequence": worst.name,
            "share_at_most_1_percent": float(np.mean(medians <= 0.01)),
            "share_at_most_2_percent": float(np.mean(medians <= 0.02)),
            "least_within_5_percent": float(np.nanmin(within)), "median_within_5_percent": float(np.nanmedian(within)),
            "median_map_points_per_3s": float(np.median([r.map_points_per_3s for r in results])),
            "map_within_1_sigma_range": (float(np.nanmin([r.map_within_1_sigma for r in results])),
                                         float(np.nanmax([r.map_within_1_sigma for r in results]))),
            "median_map_sigma_scale": float(np.nanmedian([r.map_sigma_scale for r in results]))}


# ---------------------------------------------------------------------------- the grid and the report


def depth_set_job(data, sequence: DepthSequence, depth: DepthSettings,
                  pipeline_settings: DepthPipelineSettings) -> SequenceResult:
    """A grid job (focus_ros.evaluation.grid): one sequence of the set, its recording in ``data``."""
    return evaluate_sequence(sequence, data.recording, depth, pipeline_settings)


def depth_set_jobs(sequences, recordings: dict, depth: DepthSettings, pipeline_settings: DepthPipelineSettings,
                   output: Path) -> list:
    """One grid job per sequence, keyed ``depth_set/<name>``, results kept in ``output``/jobs/ (a
    rerun with the same settings and recordings resumes from them)."""
    from focus_ros.evaluation.angular_velocity import event_summary
    from focus_ros.evaluation.grid import GridJob, PickleStore, fingerprint

    store = PickleStore(Path(output) / "jobs")
    jobs = []
    for sequence in sequences:
        arguments = {"sequence": sequence, "depth": depth, "pipeline_settings": pipeline_settings}
        recording = recordings[sequence.name]
        jobs.append(GridJob(f"depth_set/{sequence.name}", sequence.name, depth_set_job, arguments,
                            fingerprint("depth_set", arguments, event_summary(recording.events), recording.poses,
                                        recording.depth_times), store))
    return jobs


CSV_FIELDS = tuple(SequenceResult.__dataclass_fields__)


def _percent(value: float) -> str:
    return "-" if not np.isfinite(value) else f"{100 * value:.2f}"


def markdown_table(results: list[SequenceResult]) -> str:
    """One row per sequence, then the summary of each half and of the whole set."""
    lines = ["| sequence | half | events | Mev/s | keyframes | map points / 3 s | map median error % | map within 5 % "
             "| map within 1 sigma | map sigma x for 68 % | keyframes' points median error % | within 5 % "
             "| within 1 sigma | s |",
             "|---" * 14 + "|"]
    for r in results:
        rate = r.events / r.duration_s / 1e6 if r.duration_s else float("nan")
        lines.append(f"| {r.name} | {r.half} | {r.events:,} | {rate:.2f} | {r.keyframes} | {r.map_points_per_3s:,.0f} "
                     f"| {_percent(r.map_median_error)} | {_percent(r.map_within_5_percent)} "
                     f"| {r.map_within_1_sigma:.2f} | {r.map_sigma_scale:.2f} | {_percent(r.points_median_error)} "
                     f"| {_percent(r.points_within_5_percent)} | {r.points_within_1_sigma:.2f} | {r.seconds:.1f} |")
    lines.append("")
    lines.append("| over | sequences | median of the medians % | worst median % (sequence) | sequences <= 1 % "
                 "| sequences <= 2 % | least within 5 % | median within 5 % | median map points / 3 s "
                 "| map within 1 sigma | median map sigma x for 68 % |")
    lines.append("|---" * 11 + "|")
    halves = sorted({r.half for r in results}, key=lambda half: ("tune", "report").index(half)
                    if half in ("tune", "report") else 2)
    for label, part in [(half, [r for r in results if r.half == half]) for half in halves] + [("all", results)]:
        if not part or (label == "all" and len(halves) < 2):
            continue
        s = set_summary(part)
        lines.append(f"| {label} | {s['sequences']} | {_percent(s['median_of_medians'])} | "
                     f"{_percent(s['worst_median'])} ({s['worst_sequence']}) | "
                     f"{100 * s['share_at_most_1_percent']:.0f} % | {100 * s['share_at_most_2_percent']:.0f} % | "
                     f"{_percent(s['least_within_5_percent'])} | {_percent(s['median_within_5_percent'])} | "
                     f"{s['median_map_points_per_3s']:,.0f} | {s['map_within_1_sigma_range'][0]:.2f}-"
                     f"{s['map_within_1_sigma_range'][1]:.2f} | {s['median_map_sigma_scale']:.2f} |")
    return "\n".join(lines) + "\n"


def write_csv(results: list[SequenceResult], path: Path) -> None:
    import csv

    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, CSV_FIELDS)
        writer.writeheader()
        for result in results:
            writer.writerow(result.row())


def plot_set(results: list[SequenceResult], path: Path, title: str = "") -> Path:
    """Per sequence: the map's median error (with the 1 % and 2 % targets) and its share within
    5 % (with 85 %), tune half blue, report half orange."""
    from focus_ros.evaluation.plots import plt

    names = [r.name for r in results]
    colours = ["tab:blue" if r.half == "tune" else "tab:orange" for r in results]
    figure, (top, bottom) = plt.subplots(2, 1, figsize=(max(6.0, 0.55 * len(results) + 2), 6.0), sharex=True)
    top.bar(names, [100 * r.map_median_error for r in results], color=colours)
    for level in (1.0, 2.0):
        top.axhline(level, color="grey", linestyle="--", linewidth=0.8)
    top.set_ylabel("map median error (%)")
    bottom.bar(names, [100 * r.map_within_5_percent for r in results], color=colours)
    bottom.axhline(85.0, color="grey", linestyle="--", linewidth=0.8)
    bottom.set_ylabel("map points within 5 % (%)")
    bottom.set_ylim(0, 100)
    bottom.tick_params(axis="x", rotation=60)
    top.set_title(title or "depth over the evaluation set (blue: tune half, orange: report half)")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return Path(path)
