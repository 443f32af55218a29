"""Patch optical flow benchmark: 30,000-event windows on 240x180 with 15x15 patches, one thread.

    .venv/bin/python benchmarks/bench_flow.py [--repeats 7] [--sensors davis240c,davis346,dvxplorer,imx636]

Two windows:
- the real boxes_rotation slice (30,000 events, ~9 px of motion over its 5.5 ms): per loss, ms
  per window warm (the estimator's previous flows are this window's, the least work) and cold
  (first window: coarse-to-fine from v = 0), evaluations per window, ms per value+gradient of the
  whole grid and per value only;
- consecutive windows of a simulated rotation at a constant 2.3 rad/s in a textured room
  (the simulator, 30,000 events = 20 ms, ~9 px of motion): ms per window in sequence (warm
  start from the previous window), with the average endpoint error against the ground truth.

Times are CPU time of the process (time.process_time: what one core spends, without the waits
for a core on a shared machine); medians over --repeats runs; the load average is printed.
The simulated sequence's times are CPU times per window too (focus_ros.evaluation.flow.run_flow_evaluation).

- per sensor (--sensors; the same rotation at 2.3 rad/s in the textured room, seen by each
  camera of focus_ros.camera.SENSORS, simulated for a few windows: a 1280x720 simulation is
  slow): the default settings and window (30,000 events at 240x180 scaled by the pixel count;
  pixel binning and the event bound from the sensor), CPU ms per window (median and range over
  the windows after the first, each estimated --repeats times from the same warm start), the
  windows per second one core sustains at that cost, and the windows per second the sensor's
  event rate brings: the node keeps up where the first is at least the second, and otherwise
  (queue_policy newest) publishes at the first.
"""

from __future__ import annotations

import os

os.environ.setdefault("NUMBA_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from focus_ros.estimators.optical_flow import OpticalFlowEstimator, OpticalFlowSettings  # noqa: E402

SLICE = Path(os.environ.get("FOCUS_ROS_SHARED_DATA", ROOT.parent / "shared" / "data")) / "ec_slices" / "boxes_rotation"
#: the default (area_exponential), the variance, and the losses best on accuracy on the simulated rotation
#: (EVALUATION.md, Flow)
LOSSES = ("area_exponential", "variance", "area_lorentzian", "variance_of_laplacian", "gradient_magnitude")


def timed(function):
    """(CPU ms of this process, result): on a machine shared with other jobs the CPU time is what
    one core spends on the window; the wall time adds the waits for a core."""
    began = time.process_time()
    result = function()
    return (time.process_time() - began) * 1e3, result


def median_cpu_ms(function, repeats: int) -> float:
    function()
    return float(np.median([timed(function)[0] for _ in range(repeats)]))


def slice_table(repeats: int) -> None:
    from focus_ros.sources.ecd import read_ecd_folder

    events = read_ecd_folder(SLICE).events
    print(f"## boxes_rotation slice: {len(events)} events, {(events.t[-1] - events.t[0]) / 1e6:.1f} ms\n")
    print("| loss | warm CPU ms/window | evaluations | cold CPU ms/window | evaluations | value+gradient CPU ms | "
          "value CPU ms | valid patches |")
    print("|---|---|---|---|---|---|---|---|")
    for loss in LOSSES:
        estimator = OpticalFlowEstimator(240, 180, OpticalFlowSettings(loss=loss))
        estimator.estimate(events)  # compile, and the warm start
        warm, cold = [], []
        for _ in range(repeats):
            warm.append(timed(lambda: estimator.estimate(events)))
            warm_pairs = len(estimator.objective.patch)  # gathered within the warm start's margins
            estimator.reset()
            cold.append(timed(lambda: estimator.estimate(events)))
        estimate = warm[-1][1]
        flows = np.nan_to_num(estimate.flow)
        objective = estimator.objective
        with_gradient = median_cpu_ms(lambda: objective.evaluate(flows), repeats * 3)
        value_only = median_cpu_ms(lambda: objective.evaluate(flows, with_gradient=False), repeats * 3)
        print(f"| {loss} | {np.median([t for t, _ in warm]):.1f} | {np.median([r.evaluations for _, r in warm]):.0f} | "
              f"{np.median([t for t, _ in cold]):.1f} | {np.median([r.evaluations for _, r in cold]):.0f} | "
              f"{with_gradient:.2f} | {value_only:.2f} | {int(estimate.valid.sum())} / {estimate.grid.count} |")
    print(f"\n(memberships: {len(objective.patch)} (event, patch) pairs for {len(events)} events cold (margin "
          f"{estimator.grid.margin} px), {warm_pairs} warm (margins narrowed to the warm start's motion))\n")


def simulated_table() -> None:
    from focus_ros.camera import Calibration
    from focus_ros.evaluation.flow import run_flow_evaluation
    from focus_ros.evaluation.ground_truth import from_imu
    from focus_ros.evaluation.angular_velocity import build_windows
    from focus_ros.sources.scenes import PanoramaScene
    from focus_ros.sources.simulator import ConstantAngularVelocity, EventSimulator, Trajectory

    simulator = EventSimulator(PanoramaScene.generate(1, shapes_per_megapixel=600),
                               Trajectory(ConstantAngularVelocity((0.5, -1.0, 2.0)), 0.25),
                               Calibration.davis240c(), seed=1)
    recording = simulator.simulate()
    windows = build_windows(recording.events.t, 30_000)
    print(f"## simulated rotation at 2.3 rad/s: {len(windows)} consecutive windows of 30,000 events\n")
    print("| loss | CPU ms/window (median) | range | AEE px | > 3 px (%) | valid (%) |")
    print("|---|---|---|---|---|---|")
    for loss in LOSSES:
        run = run_flow_evaluation(recording, from_imu(recording.imu, 0), windows, OpticalFlowSettings(loss=loss))
        times = run.ms_per_window[1:]  # the first window: coarse-to-fine start
        errors = run.errors
        print(f"| {loss} | {np.median(times):.1f} | {times.min():.1f}-{times.max():.1f} | "
              f"{errors.average_endpoint_px:.3f} | {100 * errors.outlier_share:.2f} | {100 * errors.valid_share:.1f} |")


#: simulated seconds of the room rotation per sensor (a few default windows each)
SENSOR_SECONDS = {"davis240c": 0.1, "davis346": 0.1, "dvxplorer": 0.06, "imx636": 0.06}


def sensors_table(names, repeats: int) -> None:
    import copy

    from focus_ros.estimators.optical_flow import default_window_events
    from focus_ros.evaluation.angular_velocity import build_windows
    from focus_ros.events import Events
    from focus_ros.sources.scenes import PanoramaScene
    from focus_ros.sources.simulator import (ConstantAngularVelocity, EventSimulator, Trajectory, camera_calibration,
                                             texel_scale)

    print("## per sensor: the room rotation at 2.3 rad/s, default settings\n")
    print("| sensor | event rate (Mev/s) | window events | window span (ms) | binning | events kept | "
          "CPU ms/window (median) | range | windows/s one core sustains | windows/s arriving |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name in names:
        calibration = camera_calibration(name)
        scene = PanoramaScene.generate(1, shapes_per_megapixel=600, texel_scale=texel_scale(calibration))
        recording = EventSimulator(scene, Trajectory(ConstantAngularVelocity((0.5, -1.0, 2.0)), SENSOR_SECONDS[name]),
                                   calibration, seed=1).simulate()
        events = recording.events
        window_events = default_window_events(calibration.width, calibration.height)
        windows = [Events(events.x[a:b], events.y[a:b], events.t[a:b], events.p[a:b])
                   for a, b in build_windows(events.t, window_events)]
        estimator = OpticalFlowEstimator(calibration.width, calibration.height, OpticalFlowSettings())
        estimator.estimate(windows[0])  # compile, warm start
        times = []
        for window in windows[1:]:
            state = copy.deepcopy(estimator)
            runs = []
            for _ in range(repeats):
                fresh = copy.deepcopy(state)  # the same warm start each time, copied outside the timing
                runs.append(timed(lambda: fresh.estimate(window))[0])
            times.append(float(np.median(runs)))
            estimator.estimate(window)
        spans = [(int(w.t[-1]) - int(w.t[0])) / 1e6 for w in windows[1:]]
        rate = len(events) / ((int(events.t[-1]) - int(events.t[0])) / 1e9) / 1e6
        kept = min(1.0, estimator.max_window_events / window_events) if estimator.max_window_events else 1.0
        median = float(np.median(times))
        print(f"| {name} | {rate:.1f} | {window_events} | {np.median(spans):.1f} | {estimator.binning} | "
              f"{100 * kept:.0f} % | {median:.1f} | {min(times):.1f}-{max(times):.1f} | {1000 / median:.1f} | "
              f"{1000 / np.median(spans):.1f} |")
    print()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--sensors", default="", help="comma-separated sensor names for the per-sensor table "
                                                      "(davis240c,davis346,dvxplorer,imx636); '' = none")
    parser.add_argument("--only-sensors", action="store_true", help="only the per-sensor table")
    args = parser.parse_args()
    print(f"# Patch flow benchmark (one thread; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)\n")
    if args.sensors:
        sensors_table([name for name in args.sensors.split(",") if name], args.repeats)
    if args.only_sensors:
        return
    if (SLICE / "events.txt").is_file():
        slice_table(args.repeats)
    else:
        print(f"(boxes_rotation slice not found at {SLICE}: skipped)\n")
    simulated_table()


if __name__ == "__main__":
    main()
