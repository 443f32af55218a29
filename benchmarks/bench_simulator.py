"""Time the event-camera simulator: simulated seconds per wall second, events per second, per sensor.

Runs each (preset, sensor) after a warm-up (JIT compilation / cache loading; scene generation
and orientation integration are timed separately as "setup"), one thread, ``--repeats`` times
(median and range of the wall time). Prints a Markdown table: setup time, render steps,
events, mean and peak event rate (10-ms bins), wall time of ``simulate``, simulated s per wall
s, events per wall s, and ns per pixel and render step (what a larger sensor costs).

    .venv/bin/python benchmarks/bench_simulator.py [--presets rotation_short rotation six_dof]
    .venv/bin/python benchmarks/bench_simulator.py --sensors davis240c davis346 dvxplorer imx636 \\
        --span 0.02 --repeats 3          # 20 ms from t = 1 s of each preset, every sensor

``--span S`` simulates [1 s, 1 s + S] of the preset's trajectory instead of all of it (a
1280x720 sensor renders 21x the pixels of a DAVIS240C at 4.4x the steps: keep it short).

    .venv/bin/python benchmarks/bench_simulator.py --resolution-check [--sensors imx636]

checks instead that the scene texture and the render step bound fit the sensor: 10 ms (5 ms)
of a constant rotation, noiseless, warped with the true ω; the variance of the image of warped
events (sharper = larger) and its ratio to the unwarped image's, for scene textures at 0.5x,
1x and 1.5x the texel scale the presets use for the sensor, and for render step bounds of
0.15, 0.3 (the default), 0.6 and 1.2 px.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from focus_ros.camera import SENSORS
from focus_ros.sources.simulator import PRESETS, make_preset

#: start (s) of the excerpt that --span simulates
SPAN_START_S = 1.0


def warm_up() -> None:
    """Compile (or load from the numba cache) every kernel on a tiny excerpt."""
    for name in ("rotation_short", "six_dof"):
        make_preset(name, duration_s=0.05).simulate()


def measure(name: str, seed: int, sensor: str, span_s: float | None, repeats: int) -> dict:
    started = time.perf_counter()
    simulator = make_preset(name, seed=seed, camera=sensor)
    setup_s = time.perf_counter() - started
    start_s = 0.0 if span_s is None else SPAN_START_S
    end_s = simulator.trajectory.duration_s if span_s is None else SPAN_START_S + span_s
    steps = len(simulator.step_times(start_s, end_s)) - 1
    walls = []
    for _ in range(repeats):
        started = time.perf_counter()
        recording = simulator.simulate(start_s, end_s)
        walls.append(time.perf_counter() - started)
    events = recording.events
    duration_s = end_s - start_s
    per_bin = np.bincount((events.t - events.t[0]) // 10_000_000) if len(events) else np.zeros(1)
    wall_s = float(np.median(walls))
    return dict(preset=name, sensor=sensor, duration_s=duration_s, setup_s=setup_s, steps=steps, events=len(events),
                mean_rate=len(events) / duration_s, peak_rate=per_bin.max() / 0.01, wall_s=wall_s,
                wall_range=(min(walls), max(walls)), pixels=simulator.calibration.width * simulator.calibration.height,
                peak_deg_s=float(np.rad2deg(np.abs(recording.imu.angular_velocity).max())))


def _warped_variance(calibration, events, omega, t_ref_s: float) -> float:
    """Variance of the image of events warped to t_ref_s with ω (rad/s), nearest pixel, inside only."""
    from focus_ros.warps import ROTATION_EXACT, warp_events

    bearings = calibration.bearing_lut()[events.y, events.x]
    points, _ = warp_events(ROTATION_EXACT, bearings, events.t / 1e9 - t_ref_s, omega, calibration.fx,
                            calibration.fy, calibration.cx, calibration.cy)
    column, row = np.round(points[:, 0]).astype(int), np.round(points[:, 1]).astype(int)
    inside = (column >= 0) & (column < calibration.width) & (row >= 0) & (row < calibration.height)
    image = np.zeros((calibration.height, calibration.width))
    np.add.at(image, (row[inside], column[inside]), 1.0)
    return float(image.var())


def resolution_check(sensor: str) -> None:
    """Print how sharp the warped events are for other texture resolutions and render step bounds."""
    from focus_ros.sources.scenes import PanoramaScene
    from focus_ros.sources.simulator import EventSimulator, SensorConfig, camera_calibration, texel_scale
    from focus_ros.sources.trajectories import ConstantAngularVelocity, Trajectory

    calibration = camera_calibration(sensor)
    noiseless = dict(refractory_period_s=0.0, noise_rate_hz=0.0)
    omega = np.array([0.8, -0.5, 1.2])  # rad/s
    trajectory = Trajectory(ConstantAngularVelocity(tuple(omega)), 0.1)
    preset_scale = texel_scale(calibration)
    print(f"{sensor}: texture (texel scale; the presets use {preset_scale:g}), 10 ms at |ω| "
          f"{np.rad2deg(np.linalg.norm(omega)):.0f} deg/s\n")
    print("| texel scale | events | IWE variance, true ω | unwarped | ratio | wall s |")
    print("|---|---|---|---|---|---|")
    scene = None
    for factor in (0.5, 1.0, 1.5):
        started = time.perf_counter()
        candidate = PanoramaScene.generate(0, texel_scale=max(1.0, preset_scale * factor))
        scene = candidate if factor == 1.0 else scene
        events = EventSimulator(candidate, trajectory, calibration, SensorConfig(**noiseless), 0).simulate(
            0.05, 0.06).events
        sharp, blurred = _warped_variance(calibration, events, omega, 0.055), \
            _warped_variance(calibration, events, 0 * omega, 0.055)
        print(f"| {max(1.0, preset_scale * factor):g} | {len(events):,} | {sharp:.3f} | {blurred:.3f} "
              f"| {sharp / blurred:.2f} | {time.perf_counter() - started:.1f} |", flush=True)
    fast = Trajectory(ConstantAngularVelocity(tuple(2 * omega)), 0.1)
    print(f"\nrender step bound, 5 ms at |ω| {np.rad2deg(np.linalg.norm(2 * omega)):.0f} deg/s\n")
    print("| max_pixel_motion_px | events | IWE variance, true ω | wall s |")
    print("|---|---|---|---|")
    for step_px in (0.15, 0.3, 0.6, 1.2):
        started = time.perf_counter()
        sensor_config = SensorConfig(max_pixel_motion_px=step_px, **noiseless)
        events = EventSimulator(scene, fast, calibration, sensor_config, 0).simulate(0.05, 0.055).events
        wall_s = time.perf_counter() - started
        print(f"| {step_px:g} | {len(events):,} | {_warped_variance(calibration, events, 2 * omega, 0.0525):.3f} "
              f"| {wall_s:.1f} |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--presets", nargs="+", choices=sorted(PRESETS), default=["rotation_short", "rotation"])
    parser.add_argument("--sensors", nargs="+", choices=list(SENSORS), default=["davis240c"])
    parser.add_argument("--span", type=float, metavar="S", help=f"simulate [{SPAN_START_S:g}, {SPAN_START_S:g} + S] s "
                        "of each preset instead of the whole trajectory")
    parser.add_argument("--repeats", type=int, default=1, help="timed runs per row (median and range)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--resolution-check", action="store_true",
                        help="check the texture resolution and the render step bound instead (first --sensors)")
    args = parser.parse_args()
    started = time.perf_counter()
    warm_up()
    if args.resolution_check:
        resolution_check(args.sensors[0] if args.sensors != ["davis240c"] else "imx636")
        return
    print(f"warm-up (JIT or cache load): {time.perf_counter() - started:.1f} s\n")
    print("| preset | sensor | simulated s | setup s | render steps | events | mean Mev/s | peak Mev/s (10 ms) "
          "| peak |ω| deg/s | wall s (median, range) | simulated s / wall s | Mev / wall s | ns per pixel-step |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for name in args.presets:
        for sensor in args.sensors:
            r = measure(name, args.seed, sensor, args.span, args.repeats)
            print(f"| {r['preset']} | {r['sensor']} | {r['duration_s']:g} | {r['setup_s']:.1f} | {r['steps']:,} "
                  f"| {r['events']:,} | {r['mean_rate'] / 1e6:.2f} | {r['peak_rate'] / 1e6:.2f} "
                  f"| {r['peak_deg_s']:.0f} "
                  f"| {r['wall_s']:.2f} ({r['wall_range'][0]:.2f}-{r['wall_range'][1]:.2f}) "
                  f"| {r['duration_s'] / r['wall_s']:.4f} | {r['events'] / r['wall_s'] / 1e6:.2f} "
                  f"| {r['wall_s'] / max(r['steps'] * r['pixels'], 1) * 1e9:.1f} |", flush=True)


if __name__ == "__main__":
    main()
