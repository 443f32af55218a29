"""The table behind patch flow's defaults: accuracy, tail and density of settings on simulated sequences.

    .venv/bin/python benchmarks/eval_flow_defaults.py [--sequences room,rotation,...] [--variants default variance ...]
        [--confidence-table] [--output OUT.md]

(all sequences and variants by default: about 15 min of one core, most of it simulating the larger
cameras; a variant may also be written inline: 'name:setting=value;setting=value;window=EVENTS').

Per sequence (simulated here, seeded: ``SEQUENCES``) and per settings variant (``VARIANTS``: the
defaults, and each one changed), consecutive windows of the variant's size are estimated (warm
start) and compared with the ground truth (``focus_ros.evaluation.flow``). Columns:

- valid: patches given a full flow; median rel.: median of |v − v_gt| / |v_gt| over them;
  > 10 %: share of them off by more than 10 % of the true speed; AEE px: mean endpoint error
  over the window's span;
- dense valid: share of the patches holding >= 50 events given a full flow; normal: share of
  them given a normal flow only (aperture), with the median relative error of that component;
- conf. top/bottom: median relative error of the valid patches in the upper and lower half of
  the confidence (the confidence should order the errors);
- CPU ms/window: median CPU time of the estimator per window (one thread; indicative on a
  shared machine).

The markdown table goes to stdout and --output; EVALUATION.md, "Flow: defaults from measurement"
quotes it.
"""

from __future__ import annotations

import os

os.environ.setdefault("NUMBA_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from dataclasses import replace  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from focus_ros.cli._settings import add_setting_options, settings_from_options  # noqa: E402
from focus_ros.estimators.optical_flow import OpticalFlowSettings  # noqa: E402
from focus_ros.losses import LossOptions  # noqa: E402
from focus_ros.pipelines.optical_flow import FlowWindowSettings, events_per_window  # noqa: E402

#: name -> (preset, seed, evaluated from .. to (s of the trajectory), camera); "room": a constant
#: rotation at (0.5, -1.0, 2.0) rad/s (2.3 rad/s) in the textured room of ``benchmarks/bench_flow.py``
#: (the larger cameras: short, their simulation is slow)
SEQUENCES = {
    "rotation": ("rotation", 1, 2.0, 4.0, "davis240c"),
    "room": ("room", 1, 0.0, 0.5, "davis240c"),
    "rotation_short": ("rotation_short", 0, 0.0, 2.0, "davis240c"),
    "six_dof": ("six_dof", 0, 0.0, 2.0, "davis240c"),
    "room_davis346": ("room", 1, 0.0, 0.3, "davis346"),
    "room_dvxplorer": ("room", 1, 0.0, 0.15, "dvxplorer"),
    "room_imx636": ("room", 1, 0.0, 0.08, "imx636"),
}


def simulate(preset: str, seed: int, end_s: float, camera: str = "davis240c"):
    """The recording of a sequence of ``SEQUENCES`` up to end_s (s) seen by ``camera``."""
    from focus_ros.evaluation.sequence import simulate_sequence

    if preset != "room":
        return simulate_sequence(preset, None, seed, end_s, camera)
    from focus_ros.sources.scenes import PanoramaScene
    from focus_ros.sources.simulator import (ConstantAngularVelocity, EventSimulator, Trajectory, camera_calibration,
                                             texel_scale)

    calibration = camera_calibration(camera)
    return EventSimulator(PanoramaScene.generate(1, shapes_per_megapixel=600, texel_scale=texel_scale(calibration)),
                          Trajectory(ConstantAngularVelocity((0.5, -1.0, 2.0)), end_s), calibration,
                          seed=seed).simulate()


#: name -> (changes to OpticalFlowSettings, window events or None for the default): the defaults,
#: the defaults before issue 24 ("before"), and the defaults with one thing changed
VARIANTS = {
    "before": (dict(loss="variance", margin_px=8, borrowing=False, max_motion_margins=0.0, pixel_binning=1,
                    max_window_events=0, window_motion_px=0.0, min_motion_px=0.0), 30000),
    "default": ({}, None),
    "area_scale1": (dict(loss_options=LossOptions(area_scale_events=1.0)), None),
    "variance": (dict(loss="variance"), None),
    "no_borrowing": (dict(borrowing=False), None),
    "no_smoothing": (dict(smoothing=False), None),
    "no_trim": (dict(max_motion_margins=0.0), None),
    "margin8": (dict(margin_px=8), None),
    "window20k": ({}, 20000),
    "window45k": ({}, 45000),
    "min_events100": (dict(min_events_per_patch=100), None),
    "min_events200": (dict(min_events_per_patch=200), None),
    "aperture025": (dict(min_aperture_ratio=0.25), None),
    "confidence": (dict(min_confidence=0.5), None),
    "stride10": (dict(patch_stride_px=10), None),
    "patch21": (dict(patch_size_px=21, pyramid_patch_sizes=(63,)), None),
    "prior003": (dict(prior_weight=0.03), None),
    "prior03": (dict(prior_weight=0.3), None),
    # issue 24's tail (slow patches near a rotation's fixed point): re-solved on 3 windows' span,
    # and / or reported invalid when their confidence x motion (px) says they are measured too coarsely
    "slow6": (dict(slow_motion_px=6.0), None),
    "motion_conf1": (dict(min_motion_confidence=1.0), None),
    "motion_conf12": (dict(min_motion_confidence=1.2), None),
    "slow6_motion_conf1": (dict(slow_motion_px=6.0, min_motion_confidence=1.0), None),
    # issue 24, the room's tail: windows sized by the motion (a window reaches back over the previous
    # windows' events until it spans window_motion_px at the last estimate's median patch speed, at most
    # 3 windows' span) and patches moving less than min_motion_px over it, and less than
    # min_relative_speed of the window's median, reported imprecise; "as_cut" = the defaults before
    "as_cut": (dict(window_motion_px=0.0, min_motion_px=0.0), None),
    "no_window_motion": (dict(window_motion_px=0.0), None),
    "no_min_motion": (dict(min_motion_px=0.0), None),
    "window_motion8": (dict(window_motion_px=8.0), None),
    "window_motion12": (dict(window_motion_px=12.0), None),
    "speed_quantile075": (dict(window_speed_quantile=0.75), None),
    "extension2": (dict(max_window_extension=2.0), None),
    "min_motion6": (dict(min_motion_px=6.0), None),
    "min_motion8": (dict(min_motion_px=8.0), None),
    "relative_speed08": (dict(min_relative_speed=0.8), None),
    "absolute_motion": (dict(min_relative_speed=0.0), None),
}

#: the windows' default size (events), as the node's and the commands' default
DEFAULT_WINDOW_EVENTS = None


def percent(value: float, digits: int = 1) -> str:
    return "–" if not np.isfinite(value) else f"{100 * value:.{digits}f}"


def evaluate(recording, settings: OpticalFlowSettings, window_events: int, max_windows: int | None,
             start_s: float = 0.0):
    """(errors of all windows, CPU ms per window, windows) of consecutive windows of
    ``window_events`` events from start_s (s) on (``run_flow_evaluation``: warm start)."""
    from focus_ros.evaluation.angular_velocity import build_windows
    from focus_ros.evaluation.flow import run_flow_evaluation
    from focus_ros.evaluation.ground_truth import from_imu

    events = recording.events
    first = int(events.t[0]) + int(start_s * 1e9) if len(events) else 0
    windows = build_windows(events.t, window_events, max_windows=max_windows,
                            time_range_ns=(first, int(events.t[-1]) + 1))
    run = run_flow_evaluation(recording, from_imu(recording.imu, 0), windows, settings)
    return run.errors, run.ms_per_window, len(windows)


def window_motion(errors) -> tuple[float, float]:
    """(median span of the estimates' windows (ms), median true motion of the valid patches over
    their window (px)): from each valid patch's endpoint error in px/s, in px over its window and
    relative (span = px / px/s, motion = px / relative)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        span_s = errors.endpoint_px / errors.endpoint_px_s
        motion_px = errors.endpoint_px / errors.relative
    span_s, motion_px = span_s[np.isfinite(span_s)], motion_px[np.isfinite(motion_px)]
    return (1e3 * float(np.median(span_s)) if span_s.size else float("nan"),
            float(np.median(motion_px)) if motion_px.size else float("nan"))


def confidence_halves(errors) -> tuple[float, float]:
    """Median relative error of the valid patches above and below the median confidence."""
    confidence, relative = errors.confidence, errors.relative
    known = np.isfinite(confidence) & np.isfinite(relative)
    if known.sum() < 4:
        return float("nan"), float("nan")
    middle = np.median(confidence[known])
    top = known & (confidence > middle)
    bottom = known & (confidence <= middle)
    return float(np.median(relative[top])), float(np.median(relative[bottom]))


HEADER = ("| sequence | variant | windows | valid | median rel. (%) | > 10 % (%) | AEE px | dense valid (%) | "
          "normal (%), median rel. | conf. top / bottom half median rel. (%) | span ms | motion px | CPU ms/window |\n"
          "|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")


def row(sequence: str, variant: str, errors, elapsed, windows: int) -> str:
    top, bottom = confidence_halves(errors)
    span_ms, motion_px = window_motion(errors)
    normal = (f"{percent(errors.dense_normal_share)}, {percent(np.median(errors.normal_relative))}"
              if len(errors.normal_relative) else f"{percent(errors.dense_normal_share)}")
    return (f"| {sequence} | {variant} | {windows} | {errors.valid} | {percent(errors.median_relative, 2)} | "
            f"{percent(errors.relative_tail_share)} | {errors.average_endpoint_px:.3f} | "
            f"{percent(errors.dense_valid_share)} | {normal} | {percent(top, 2)} / {percent(bottom, 2)} | "
            f"{span_ms:.1f} | {motion_px:.1f} | {np.median(elapsed):.1f} |")


def confidence_rows(sequence: str, errors) -> list[str]:
    """Rows of the confidence table: keeping the valid patches at or above a threshold (the
    quartiles of this sequence's confidences), the share kept and their median relative error
    and share over 10 %."""
    rows = []
    confidence, relative = errors.confidence, errors.relative
    known = np.isfinite(confidence) & np.isfinite(relative)
    if known.sum() < 4:
        return rows
    for quantile in (0.0, 0.25, 0.5, 0.75):
        threshold = float(np.quantile(confidence[known], quantile))
        kept = known & (confidence >= threshold)
        rows.append(f"| {sequence} | {threshold:.3g} | {100 * kept.sum() / known.sum():.0f} | "
                    f"{100 * np.median(relative[kept]):.2f} | {100 * np.mean(relative[kept] > 0.1):.1f} |")
    return rows


CONFIDENCE_HEADER = ("| sequence | min_confidence | valid patches kept (%) | median rel. (%) | > 10 % (%) |\n"
                     "|---|---|---|---|---|\n")


def parse_variant(text: str):
    """A named variant, or 'name:key=value;key=value' (values as Python literals; window=N the window size)."""
    import ast

    if ":" not in text:
        return text, VARIANTS[text]
    name, body = text.split(":", 1)
    changes, window = {}, None
    for item in filter(None, body.split(";")):
        key, value = item.split("=", 1)
        try:
            value = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            pass  # a bare word: a string
        if key == "window":
            window = int(value)
        else:
            changes[key] = value
    return name, (changes, window)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sequences", default=",".join(SEQUENCES))
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS))
    add_setting_options(parser, FlowWindowSettings)  # --window-events: the variants' default window size
    parser.add_argument("--max-windows", type=int, default=None)
    parser.add_argument("--output", type=Path, default=None)
    parser.add_argument("--confidence-table", action="store_true",
                        help="also the share kept and the errors at confidence thresholds (first variant)")
    args = parser.parse_args()
    default_windows = settings_from_options(FlowWindowSettings, args)

    lines = [HEADER.rstrip("\n")]
    confidence_lines = [CONFIDENCE_HEADER.rstrip("\n")]
    print(HEADER, end="", flush=True)
    for name in args.sequences.split(","):
        preset, seed, start_s, end_s, camera = SEQUENCES[name]
        began = time.time()
        recording = simulate(preset, seed, end_s, camera)
        print(f"<!-- {name}: {len(recording.events):,} events simulated in {time.time() - began:.0f} s -->",
              file=sys.stderr, flush=True)
        for text in args.variants:
            variant, (changes, window) = parse_variant(text)
            settings = replace(OpticalFlowSettings(), **changes)
            calibration = recording.calibration
            windows = replace(default_windows, window_events=window) if window else default_windows
            window = events_per_window(windows, calibration.width, calibration.height)
            errors, elapsed, windows = evaluate(recording, settings, window, args.max_windows, start_s)
            line = row(name, f"{variant} ({window} ev.)", errors, elapsed, windows)
            lines.append(line)
            print(line, flush=True)
            if args.confidence_table and text == args.variants[0]:
                confidence_lines += confidence_rows(name, errors)
    if args.confidence_table:
        print("\n" + "\n".join(confidence_lines))
        lines += [""] + confidence_lines
    if args.output:
        args.output.write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
