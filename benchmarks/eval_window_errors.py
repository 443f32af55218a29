"""Per-window angular-velocity error on simulated rotations: the distribution, not only the RMS.

For each simulated DAVIS240C rotation (the simulator's `rotation` preset, several seeds and
segments) and each method (the node's defaults: BFGS + extrapolated warm start; the paper's:
Fletcher-Reeves CG + previous estimate; both with the estimator's doubtful-window recovery
and constant-velocity check, as they run by default; then without the check, and without
either), every 30,000-event window is estimated in order and its error
|omega_est - omega_gt| (deg/s, norm of the 3-vector, ground truth = the simulator's gyro at
the window's reference time) is collected. Printed: windows, windows reported degenerate
(doubtful optimum, not published), windows the recovery re-solved, windows the
constant-velocity check solved again with an angular acceleration, median / 90th percentile /
maximum error of the published windows, max / median, and the windows above 5x the median,
split into optimizer misses (started at the ground truth, the same loss reaches a better
focus at a distinct optimum, more than 2 median errors from the estimate: a wrong local
optimum taken), model misses (the loss's own optimum is
off: omega changes too much within the window for a constant-velocity warp) and windows the
estimator's constant-velocity check already solved again with an angular acceleration (their
focus is that of another warp, so they are not split further).

    .venv/bin/python benchmarks/eval_window_errors.py [--sequences 1:4:7 2:6:9 ...]
        [--methods 2] [--kernel gaussian] [--blur-sigma-px 0.9] [--grid-shift-px 0.5]

--kernel / --blur-sigma-px change the IWE of every method (the paper's own IWE is a Gaussian of
epsilon = 1 px, its section 3); --grid-shift-px moves the voting lattice by that many pixels
in x and y (the events' bearings stay; what the optimum owes to where the pixel centres lie);
--methods N keeps the first N methods (2: the node's defaults and the paper's).

    .venv/bin/python benchmarks/eval_window_errors.py --picture 0:6:8:22 --output iwe.png

draws one window instead (seed:start_s:end_s:window index): its IWE at the ground truth, at
the node's estimate (the windows before it estimated in order, as above) and their
difference, with the focus's weakest direction (the Hessian's eigenvector of smallest
curvature, by central differences of the gradient) and where the error points.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import replace

import numpy as np

from focus_ros.estimators.angular_velocity import (AngularVelocityEstimator, AngularVelocitySettings,
                                                   real_time_settings)
from focus_ros.evaluation.ground_truth import from_imu
from focus_ros.evaluation.metrics import error_statistics, errors_deg_s
from focus_ros.sources.simulator import make_preset
from focus_ros.windows import count_windows

METHODS = {
    "node defaults (BFGS, extrapolated)": real_time_settings(),
    "paper (CG, previous)": AngularVelocitySettings(),
    "node defaults, no constant-velocity check": real_time_settings(max_change_in_window_rad_s=0.0),
    "paper, no constant-velocity check": AngularVelocitySettings(max_change_in_window_rad_s=0.0),
    "node defaults, neither check nor recovery": real_time_settings(max_change_in_window_rad_s=0.0, recovery=False),
    "paper, neither check nor recovery": AngularVelocitySettings(max_change_in_window_rad_s=0.0, recovery=False),
}


def make_estimator(calibration, settings: AngularVelocitySettings, grid_shift_px: float) -> AngularVelocityEstimator:
    """The estimator; with grid_shift_px, its IWE's pixel centres move by that much in x and y
    (the objective projects with the shifted principal point; the events' bearings, from the
    bearing LUT made at construction, do not move)."""
    estimator = AngularVelocityEstimator(calibration, settings)
    if grid_shift_px:
        estimator.objective.calibration = replace(calibration, cx=calibration.cx + grid_shift_px,
                                                  cy=calibration.cy + grid_shift_px)
    return estimator


def simulate_segment(seed: int, start_s: float, end_s: float):
    """The rotation preset's segment: (recording, its 30,000-event windows, ground truth ω at t ns)."""
    recording = make_preset("rotation", 10.0, seed).simulate(start_s=start_s, end_s=end_s)
    return recording, list(count_windows([recording.events], 30000)), from_imu(recording.imu, 0).at


def evaluate(seed: int, start_s: float, end_s: float, methods: dict, grid_shift_px: float = 0.0) -> list[str]:
    recording, windows, truth_at = simulate_segment(seed, start_s, end_s)
    rows = []
    for name, settings in methods.items():
        estimator = make_estimator(recording.calibration, settings, grid_shift_px)
        started = time.process_time()
        estimates = [estimator.estimate(window) for window in windows]
        ms = 1e3 * (time.process_time() - started) / len(windows)
        omega = np.array([e.angular_velocity for e in estimates])
        truth = truth_at(np.array([e.t_ref_ns for e in estimates]))
        peak = float(np.rad2deg(np.abs(truth).max()))
        statistics = error_statistics(omega, truth, peak)  # over the published windows
        errors = np.linalg.norm(errors_deg_s(omega, truth), axis=1)
        published = np.isfinite(errors)
        median = statistics.median_norm
        large = np.where(published & (errors > 5 * median))[0]
        checker = make_estimator(recording.calibration, replace(settings, recovery=False,
                                                                max_change_in_window_rad_s=0.0), grid_shift_px)
        optimizer_misses = 0
        accelerated_misses = [index for index in large if estimates[index].angular_acceleration is not None]
        large = [index for index in large if estimates[index].angular_acceleration is None]
        for index in large:  # does the loss have a better, distinct optimum near the truth?
            at_truth = checker.estimate(windows[index], initial=truth[index])
            distinct = np.rad2deg(np.linalg.norm(at_truth.angular_velocity - omega[index])) > 2 * median
            optimizer_misses += bool(distinct and at_truth.score > estimates[index].score * (1 + 1e-4))
        rows.append(f"| seed {seed}, {start_s:g}–{end_s:g} s (peak {peak:.0f} deg/s) | {name} | {len(windows)} | "
                    f"{int((~published).sum())} | {sum(e.recovered for e in estimates)} | "
                    f"{sum(e.angular_acceleration is not None for e in estimates)} | {median:.2f} | "
                    f"{statistics.p90_norm:.2f} | {statistics.max_norm:.1f} | "
                    f"{statistics.max_norm / median:.1f} | "
                    f"{len(large) + len(accelerated_misses)} ({optimizer_misses} / "
                    f"{len(large) - optimizer_misses} / {len(accelerated_misses)}) | {ms:.1f} |")
        print(rows[-1], flush=True)
    return rows


def draw_window(sequence: str, output: str) -> None:
    """The picture of --picture (module docstring)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from focus_ros.visualization import iwe_to_rgb, saturation_scale

    seed, start, end, index = sequence.split(":")
    recording, windows, truth_at = simulate_segment(int(seed), float(start), float(end))
    index = int(index)
    estimator = AngularVelocityEstimator(recording.calibration, METHODS["node defaults (BFGS, extrapolated)"])
    for window in windows[:index + 1]:
        estimate = estimator.estimate(window)
    truth = truth_at(np.array([estimate.t_ref_ns]))[0]
    objective = estimator.objective  # given the whole window again, without an acceleration
    objective.set_events(window, estimate.t_ref_ns, int(window.t[0]))
    at_truth = objective.image(truth).image
    at_estimate = objective.image(estimate.angular_velocity).image
    step = 0.02  # rad/s: central differences of the analytic gradient
    hessian = np.column_stack([(objective.evaluate(estimate.angular_velocity + step * axis).gradient
                                - objective.evaluate(estimate.angular_velocity - step * axis).gradient) / (2 * step)
                               for axis in np.eye(3)])
    curvature, directions = np.linalg.eigh(-(hessian + hessian.T) / 2)
    error = np.rad2deg(estimate.angular_velocity - truth)
    weakest = directions[:, 0]
    scale = saturation_scale(at_truth)
    figure, axes = plt.subplots(1, 3, figsize=(15, 4.8))
    axes[0].imshow(iwe_to_rgb(at_truth, scale=scale))
    axes[0].set_title(f"at the ground truth ω = {np.round(np.rad2deg(truth), 1)} deg/s\n"
                      f"variance {at_truth.var():.4f}", fontsize=9)
    axes[1].imshow(iwe_to_rgb(at_estimate, scale=scale))
    axes[1].set_title(f"at the estimate: error {np.round(error, 1)} deg/s (|error| "
                      f"{np.linalg.norm(error):.1f})\nvariance {at_estimate.var():.4f}", fontsize=9)
    axes[2].imshow(iwe_to_rgb(at_estimate - at_truth, signed=True))
    axes[2].set_title(f"estimate − truth (red: more events, blue: fewer)\nthe error along the focus's weakest "
                      f"direction: |cos| {abs(error @ weakest) / np.linalg.norm(error):.2f}\nits curvature "
                      f"{curvature[0] / curvature[2]:.2f}× the strongest", fontsize=9)
    for axis in axes:
        axis.set_axis_off()
    figure.suptitle(f"rotation preset, seed {seed}, {start}–{end} s, window {index}: "
                    f"{len(window)} events over {(window.t[-1] - window.t[0]) / 1e6:.1f} ms at "
                    f"{np.rad2deg(np.linalg.norm(truth)):.0f} deg/s; IWE of the node's defaults (variance)",
                    fontsize=11)
    figure.tight_layout()
    figure.savefig(output, dpi=110)
    print(f"wrote {output}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sequences", nargs="*", default=["1:4:6.5", "2:3:6", "0:6:8", "1:6:9"],
                        help="seed:start_s:end_s of the rotation preset (10-s amplitude ramp)")
    parser.add_argument("--methods", type=int, default=len(METHODS), help="the first N methods only")
    parser.add_argument("--kernel", choices=("bilinear", "gaussian"), default="bilinear",
                        help="IWE voting kernel of every method (gaussian: sigma 1 px)")
    parser.add_argument("--blur-sigma-px", type=float, default=None,
                        help="Gaussian blur (px) of the IWE of every method (default: the loss's, 0 here)")
    parser.add_argument("--grid-shift-px", type=float, default=0.0,
                        help="move the IWE's pixel lattice by this much in x and y (px)")
    parser.add_argument("--picture", metavar="SEED:START:END:INDEX",
                        help="draw this window's IWE at the truth and at the estimate instead")
    parser.add_argument("--output", default="window_iwe.png", help="the picture's file (with --picture)")
    args = parser.parse_args()
    if args.picture:
        draw_window(args.picture, args.output)
        return 0
    methods = {name: replace(settings, kernel=args.kernel, blur_sigma_px=args.blur_sigma_px)
               for name, settings in list(METHODS.items())[:args.methods]}
    print("| sequence | method | windows | degenerate | recovered | accelerated | median deg/s | p90 | max | "
          "max / median | > 5x median (optimizer / model misses / accelerated) | CPU ms per window |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|", flush=True)
    for sequence in args.sequences:
        seed, start, end = sequence.split(":")
        evaluate(int(seed), float(start), float(end), methods, args.grid_shift_px)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
