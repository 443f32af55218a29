"""Engine benchmark on the real boxes_rotation slice (30,000 events, 240x180, one thread).

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/bench_engine.py
    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/bench_engine.py --dog-truncation

Prints Markdown tables: microseconds per value+gradient (and value only) for every loss
in its usual polarity mode, plus the area losses with polarity (polarity split), with the
bilinear IWE unblurred, blurred (IWE blur sigma = 1 px) and with the Gaussian kernel; the
variance's time per stage; evaluations / milliseconds per window for each optimizer:
cold (from 0), warm at the optimum (the previous estimate on the same events: the least
work possible) and warm 0.3 rad/s off the optimum (median over 6 directions: a window
whose motion changed since the previous one). Medians of repeated runs; timings vary
+-30 % on a shared machine.
"""

from __future__ import annotations

import os

os.environ.setdefault("NUMBA_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import cv2  # noqa: E402
import numpy as np  # noqa: E402

cv2.setNumThreads(1)  # one thread, as in the estimator process (OpenCV's filters would take both cores)

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from focus_ros.camera import Calibration  # noqa: E402
from focus_ros.estimators.angular_velocity import AngularVelocityEstimator, AngularVelocitySettings  # noqa: E402
from focus_ros.events import Events  # noqa: E402
from focus_ros.losses import LOSSES, get_loss  # noqa: E402
from focus_ros.objective import Objective, splits_polarity  # noqa: E402
from focus_ros.optimize import REAL_TIME_SETTINGS, OptimizerSettings  # noqa: E402
from focus_ros.evaluation.timing import median_microseconds  # noqa: E402
from focus_ros.warps import warp_gradient, warp_points  # noqa: E402

SLICE = Path(os.environ.get("FOCUS_ROS_SHARED_DATA", ROOT.parent / "shared" / "data")) / "ec_slices" / "boxes_rotation"
OMEGA = np.array([3.576, 3.945, -1.754])


def median_us(function, repeats: int = 15) -> float:
    return median_microseconds(function, repeats, warmup=1)


def main() -> None:
    table = np.loadtxt(SLICE / "events.txt")
    events = Events.from_arrays(table[:, 1], table[:, 2], np.round(table[:, 0] * 1e9).astype(np.int64), table[:, 3])
    calibration = Calibration.from_ecd_calib(SLICE / "calib.txt")
    print(f"# Engine benchmark: {len(events)} events, boxes_rotation, one thread\n")
    print("| loss | polarity | value+gradient µs (bilinear, exact) | value only µs | value+gradient µs "
          "(bilinear + blur σ=1) | value+gradient µs (Gaussian σ=1) |")
    print("|---|---|---|---|---|---|")
    rows = []
    for name in LOSSES:
        loss = get_loss(name)
        polarity = "with" in loss.polarity_modes and (loss.degenerate_without_polarity
                                                      or "without" not in loss.polarity_modes)
        rows.append((name, polarity))
    rows += [(name, True) for name in LOSSES if splits_polarity(get_loss(name))]
    for name, polarity in rows:
        loss = get_loss(name)
        row = []
        for kernel, blur in (("bilinear", 0.0), ("bilinear", 1.0), ("gaussian", 0.0)):
            objective = Objective(calibration, loss, kernel=kernel, use_polarity=polarity, blur_sigma_px=blur)
            objective.set_events(events, int(events.t[0]))
            row.append(median_us(lambda: objective.evaluate(OMEGA)))
            if kernel == "bilinear" and blur == 0.0:
                row.append(median_us(lambda: objective.evaluate(OMEGA, with_gradient=False)))
        mode = "with (split)" if polarity and splits_polarity(loss) else ("with" if polarity else "without")
        print(f"| {name} | {mode} | {row[0]:.0f} | {row[1]:.0f} | {row[2]:.0f} | {row[3]:.0f} |")

    objective = Objective(calibration, get_loss("variance"), warp="small_angle", use_polarity=False)
    objective.set_events(events, int(events.t[0]))
    small = median_us(lambda: objective.evaluate(OMEGA))
    print(f"\nvariance, small-angle warp, bilinear: value+gradient {small:.0f} µs\n")
    print_stages(events, calibration)
    print_blur_cost(events, calibration)

    print("\n| optimizer | start | evaluations | iterations | ms per window |")
    print("|---|---|---|---|---|")
    rng = np.random.default_rng(1)
    directions = rng.normal(size=(6, 3))
    directions /= np.linalg.norm(directions, axis=1, keepdims=True)
    for optimizer, settings, settings_label in (("cg", OptimizerSettings(), "defaults"),
                                                ("bfgs", OptimizerSettings(), "defaults"),
                                                ("bfgs", REAL_TIME_SETTINGS, "REAL_TIME_SETTINGS"),
                                                ("lbfgs", OptimizerSettings(), "defaults")):
        estimator = AngularVelocityEstimator(calibration, AngularVelocitySettings(
            loss="variance", t_ref="start", optimizer=optimizer, optimizer_settings=settings))
        estimator.estimate(events, initial=np.zeros(3))  # compile
        for label in ("cold (0)", "warm (previous estimate)", "warm, 0.3 rad/s off"):
            evaluations, iterations, times = [], [], []
            for repeat in range(6):
                estimator.reset()
                first = estimator.estimate(events, initial=np.zeros(3))
                if label == "cold (0)":
                    estimator.reset()
                    initial = np.zeros(3)
                elif label == "warm (previous estimate)":
                    initial = first.angular_velocity
                else:
                    initial = first.angular_velocity + 0.3 * directions[repeat]
                start = time.perf_counter()
                result = estimator.estimate(events, initial=initial)
                times.append(time.perf_counter() - start)
                evaluations.append(result.evaluations)
                iterations.append(result.iterations)
            print(f"| {optimizer} ({settings_label}) | {label} | {np.median(evaluations):.1f} | "
                  f"{np.median(iterations):.1f} | {np.median(times) * 1e3:.1f} |")


def print_stages(events: Events, calibration: Calibration) -> None:
    """Microseconds per stage of one variance value+gradient (bilinear, exact warp)."""
    objective = Objective(calibration, get_loss("variance"), use_polarity=False)
    objective.set_events(events, int(events.t[0]))
    theta = np.asarray(OMEGA, dtype=np.float64)
    c = calibration
    work = objective._work  # the per-event work arrays of the window (focus_ros.iwe.VotingWorkArrays)
    objective.evaluate(theta)
    _, grad_image, _ = objective._loss()
    stages = {
        "warp (exact, vectorised)": lambda: warp_points(objective.model, objective.bearing_x, objective.bearing_y,
                                                        objective.dt, theta, c.fx, c.fy, c.cx, c.cy,
                                                        work.warped_x, work.warped_y, objective.dt_bound),
        "forward (warp + cells + vote)": lambda: objective._forward(theta),
        "loss (value and dL/dI)": objective._loss,
        "gather (d_x, d_y per event)": lambda: objective._gather(grad_image, objective.weights, False),
        "gradient contraction (exact warp)": lambda: warp_gradient(
            objective.model, objective.bearing_x, objective.bearing_y, objective.dt, theta, c.fx, c.fy, c.cx, c.cy,
            work.warped_x, work.warped_y, work.d_x, work.d_y, work.kept, objective._gradient, objective.dt_bound),
        "whole value+gradient": lambda: objective.evaluate(theta),
    }
    print("| variance stage | µs |")
    print("|---|---|")
    for label, function in stages.items():
        print(f"| {label} | {median_us(function, 30):.0f} |")


def print_blur_cost(events: Events, calibration: Calibration, repeats: int = 7) -> None:
    """Variance value+gradient without and with the IWE blur (sigma 0.7, 1, 1.5 px), measured
    interleaved (the same machine load for every setting); medians of ``repeats`` rounds."""
    objectives = {}
    for blur in (0.0, 0.7, 1.0, 1.5):
        objective = Objective(calibration, get_loss("variance"), use_polarity=False, blur_sigma_px=blur)
        objective.set_events(events, int(events.t[0]))
        objectives[blur] = objective
    samples = {blur: [] for blur in objectives}
    for _ in range(repeats):
        for blur, objective in objectives.items():
            samples[blur].append(median_us(lambda: objective.evaluate(OMEGA), 15))
    base = float(np.median(samples[0.0]))
    print("\n| variance value+gradient | µs | added by the blur µs |")
    print("|---|---|---|")
    for blur, times in samples.items():
        label = "no blur" if blur == 0.0 else f"IWE blur σ={blur:g} px"
        print(f"| {label} | {np.median(times):.0f} | {np.median(times) - base:+.0f} |")


def dog_truncation(repeats: int = 3) -> None:
    """The DoG with its Gaussians cut at 4 sigma (before) and 3 sigma (now), alternating in one
    process: objective value + gradient and the loss alone, median of 300 calls each."""
    from focus_ros.losses.options import LossOptions

    table = np.loadtxt(SLICE / "events.txt")
    events = Events.from_arrays(table[:, 1], table[:, 2], np.round(table[:, 0] * 1e9).astype(np.int64), table[:, 3])
    calibration = Calibration.from_ecd_calib(SLICE / "calib.txt")
    results = {}
    for _ in range(repeats):
        for truncate in (4.0, 3.0):
            objective = Objective(calibration, get_loss("difference_of_gaussians"), use_polarity=False,
                                  blur_sigma_px=1.0, loss_options=LossOptions(dog_truncate_sigmas=truncate))
            objective.set_events(events, int(events.t[len(events) // 2]))
            results.setdefault(truncate, []).append(
                (median_microseconds(lambda: objective.evaluate(OMEGA), 300),
                 median_microseconds(lambda: objective.evaluate_loss(), 300)))
    print("| DoG kernels | objective value + gradient (µs) | loss alone (µs) |\n|---|---:|---:|")
    for truncate, runs in results.items():
        print(f"| cut at {truncate:g} σ | {' / '.join(f'{a:,.0f}' for a, _ in runs)} | "
              f"{' / '.join(f'{b:,.0f}' for _, b in runs)} |")


if __name__ == "__main__":
    if sys.argv[1:] == ["--dog-truncation"]:
        dog_truncation()
    else:
        main()
