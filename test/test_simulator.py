"""The event-camera simulator: physics, ground truth, conventions, determinism, noise."""

from __future__ import annotations

import cv2
import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from focus_ros.camera import Calibration
from focus_ros.warps import ROTATION_EXACT, warp_events
from focus_ros.sources.scenes import PanoramaScene, PlanarScene, TexturedPlane
from focus_ros.sources.simulator import (CAMERA_LOOKING_ALONG_X, ConstantAngularVelocity, EventSimulator,
                                         OscillatingAngularVelocity, OscillatingPosition, SensorConfig,
                                         Trajectory, make_preset)

CALIBRATION = Calibration.davis240c()
NOISELESS = SensorConfig(refractory_period_s=0.0, noise_rate_hz=0.0)


@pytest.fixture(scope="module")
def room() -> PanoramaScene:
    return PanoramaScene.generate(seed=3)


def undistorted_bearings(calibration: Calibration) -> np.ndarray:
    """(height, width, 3) bearings (x, y, 1) of the pixel centres, computed here with OpenCV."""
    v, u = np.mgrid[0:calibration.height, 0:calibration.width].astype(np.float64)
    pixels = np.stack([u.ravel(), v.ravel()], axis=1).reshape(-1, 1, 2)
    criteria = (cv2.TERM_CRITERIA_COUNT | cv2.TERM_CRITERIA_EPS, 200, 1e-14)
    normalized = cv2.undistortPoints(pixels, calibration.camera_matrix, np.array(calibration.distortion),
                                     P=np.eye(3), criteria=criteria)
    normalized = normalized.reshape(calibration.height, calibration.width, 2)
    return np.concatenate([normalized, np.ones(normalized.shape[:2] + (1,))], axis=2)


def rotation_matrices(rotation_vectors: np.ndarray) -> np.ndarray:
    return Rotation.from_rotvec(rotation_vectors).as_matrix()


def count_image_variance(x: np.ndarray, y: np.ndarray, width: int, height: int) -> float:
    """Variance of the image of event counts (nearest pixel), events outside ignored."""
    column, row = np.round(x).astype(int), np.round(y).astype(int)
    inside = (column >= 0) & (column < width) & (row >= 0) & (row < height)
    image = np.zeros((height, width))
    np.add.at(image, (row[inside], column[inside]), 1.0)
    return float(image.var())


def test_events_integrate_to_the_rendered_log_intensity_change(room):
    profile = OscillatingAngularVelocity(np.deg2rad(250.0), 1.0, seed=4, ramp_start_fraction=1.0)
    simulator = EventSimulator(room, Trajectory(profile, 1.0), CALIBRATION, NOISELESS, seed=4)
    start_s, end_s = 0.3, 0.4
    events = simulator.simulate(start_s, end_s).events
    assert len(events) > 50_000
    change = (simulator.render_log_intensity(end_s).astype(np.float64)
              - simulator.render_log_intensity(start_s).astype(np.float64))
    signed_thresholds = np.where(events.p > 0, simulator.threshold_positive[events.y, events.x],
                                 -simulator.threshold_negative[events.y, events.x])
    integrated = np.zeros(change.shape)
    np.add.at(integrated, (events.y, events.x), signed_thresholds)
    residual = change - integrated
    # the final reference level lies within (L_end - C+, L_end + C-] of the final log intensity
    assert np.all(residual > -simulator.threshold_negative - 1e-5)
    assert np.all(residual < simulator.threshold_positive + 1e-5)
    pixels_with_many_events = np.bincount(events.y.astype(int) * 240 + events.x, minlength=240 * 180) >= 5
    assert pixels_with_many_events.sum() > 1000


def test_events_are_time_sorted_within_the_interval_and_polarised(room):
    trajectory = Trajectory(ConstantAngularVelocity((0.5, -1.0, 2.0)), 0.2)
    recording = EventSimulator(room, trajectory, CALIBRATION, SensorConfig(noise_rate_hz=20.0),
                               seed=1).simulate(0.05, 0.1)
    events = recording.events
    assert np.all(np.diff(events.t) >= 0)
    assert events.t[0] >= 50_000_000 and events.t[-1] <= 100_000_000
    assert set(np.unique(events.p)) == {-1, 1}
    assert events.x.max() < 240 and events.y.max() < 180
    assert recording.calibration == CALIBRATION


def test_ground_truth_angular_velocity_is_the_derivative_of_the_poses():
    simulator = make_preset("rotation", duration_s=2.0, seed=2)
    poses = simulator.poses(0.0, 2.0, rate_hz=1000.0)
    imu = simulator.imu_samples(0.0, 2.0, rate_hz=1000.0)
    assert np.array_equal(poses.t, imu.t) and np.all(np.diff(imu.t) == 1_000_000)
    orientation = Rotation.from_quat(poses.orientation)
    step_s = 1e-3
    # R^T dR/dt = [ω]×, by central differences: log(R(t-h)^T R(t+h)) / 2h
    numerical = (orientation[:-2].inv() * orientation[2:]).as_rotvec() / (2 * step_s)
    error = np.abs(numerical - imu.angular_velocity[1:-1])
    assert np.abs(imu.angular_velocity).max() > np.deg2rad(600)
    assert error.max() < 3e-3  # rad/s, against peaks of 12 rad/s
    assert np.allclose(poses.position, 0.0)
    # still camera: the accelerometer reads gravity; at t = 0 "up" is camera -y
    assert np.allclose(np.linalg.norm(imu.linear_acceleration, axis=1), 9.81)
    assert np.allclose(imu.linear_acceleration[0], [0.0, -9.81, 0.0])


def test_initial_orientation_looks_along_world_x():
    assert np.allclose(CAMERA_LOOKING_ALONG_X @ [0, 0, 1], [1, 0, 0])  # forward
    assert np.allclose(CAMERA_LOOKING_ALONG_X @ [0, -1, 0], [0, 0, 1])  # camera up = world up
    assert np.isclose(np.linalg.det(CAMERA_LOOKING_ALONG_X), 1.0)


def test_same_seed_gives_identical_events_and_another_seed_different_ones():
    sensor = SensorConfig(noise_rate_hz=50.0)

    def run(seed):
        return make_preset("rotation_short", seed=seed, sensor=sensor).simulate(0.5, 0.55).events

    first, again, other = run(5), run(5), run(6)
    assert len(first) > 10_000
    assert first.equals(again)
    assert not first.equals(other)


def test_dataset_like_preset_reaches_millions_of_events_per_second_at_its_peak():
    simulator = make_preset("rotation", seed=0)
    times = np.arange(0.0, 10.0, 1e-3)
    speed = np.linalg.norm(simulator.trajectory.angular_velocity(times), axis=1)
    peak_time = float(np.clip(times[np.argmax(speed)], 0.01, 9.99))
    assert np.rad2deg(speed.max()) > 700
    events = simulator.simulate(peak_time - 0.01, peak_time + 0.01, imu_rate_hz=1000.0).events
    rate = len(events) / 0.02
    assert rate > 2e6, f"{rate / 1e6:.2f} Mev/s"


def test_warping_with_the_true_angular_velocity_sharpens_the_image(room):
    # the engine's convention: bearing_ref = exp([ω]× (t_k - t_ref)) · bearing_k
    angular_velocity = np.array([0.8, -0.5, 1.2])
    trajectory = Trajectory(ConstantAngularVelocity(tuple(angular_velocity)), 0.2)
    events = EventSimulator(room, trajectory, CALIBRATION, NOISELESS, seed=0).simulate(0.1, 0.14).events
    bearings = undistorted_bearings(CALIBRATION)[events.y, events.x]
    t_ref = 0.12
    elapsed = events.t / 1e9 - t_ref

    def sharpness(omega):
        warped = np.einsum("nij,nj->ni", rotation_matrices(elapsed[:, None] * omega), bearings)
        x = CALIBRATION.fx * warped[:, 0] / warped[:, 2] + CALIBRATION.cx
        y = CALIBRATION.fy * warped[:, 1] / warped[:, 2] + CALIBRATION.cy
        return count_image_variance(x, y, 240, 180)

    true, unwarped, opposite = sharpness(angular_velocity), sharpness(0 * angular_velocity), \
        sharpness(-angular_velocity)
    assert true > 1.5 * unwarped
    assert true > 1.5 * opposite
    # slightly wrong ω is less sharp than the true one
    assert true > sharpness(angular_velocity * 1.15) and true > sharpness(angular_velocity * 0.85)

    # and the engine's own exact rotational warp agrees
    def engine_sharpness(omega):
        points, _ = warp_events(ROTATION_EXACT, bearings[:, :2], elapsed, omega, CALIBRATION.fx,
                                CALIBRATION.fy, CALIBRATION.cx, CALIBRATION.cy)
        return count_image_variance(points[:, 0], points[:, 1], 240, 180)

    assert np.isclose(engine_sharpness(angular_velocity), true, rtol=1e-3)
    assert engine_sharpness(angular_velocity) > 1.5 * engine_sharpness(-angular_velocity)


def test_refractory_period_is_respected_per_pixel(room):
    trajectory = Trajectory(ConstantAngularVelocity((2.0, -3.0, 4.0)), 0.2)

    def events_with(refractory_s):
        sensor = SensorConfig(refractory_period_s=refractory_s, noise_rate_hz=200.0)
        return EventSimulator(room, trajectory, CALIBRATION, sensor, seed=7).simulate(0.05, 0.1).events

    free, limited = events_with(0.0), events_with(2e-3)
    pixel = limited.y.astype(np.int64) * 240 + limited.x
    order = np.lexsort((limited.t, pixel))
    same_pixel = np.diff(pixel[order]) == 0
    gaps = np.diff(limited.t[order])[same_pixel]
    assert len(gaps) > 1000
    assert gaps.min() >= 2_000_000
    free_pixel = free.y.astype(np.int64) * 240 + free.x
    free_order = np.lexsort((free.t, free_pixel))
    free_gaps = np.diff(free.t[free_order])[np.diff(free_pixel[free_order]) == 0]
    assert (free_gaps < 2_000_000).sum() > 1000  # without it, many events come faster
    assert len(limited) < 0.8 * len(free)


def test_noise_rate_matches_the_configuration_on_a_static_scene(room):
    trajectory = Trajectory(ConstantAngularVelocity((0.0, 0.0, 0.0)), 1.0)
    quiet = EventSimulator(room, trajectory, CALIBRATION, SensorConfig(noise_rate_hz=0.0), seed=1)
    assert len(quiet.simulate(0.0, 0.2).events) == 0
    rate_hz = 5.0
    noisy = EventSimulator(room, trajectory, CALIBRATION, SensorConfig(noise_rate_hz=rate_hz), seed=1)
    events = noisy.simulate(0.0, 1.0).events
    expected = rate_hz * 240 * 180 * 1.0
    assert abs(len(events) - expected) < 5 * np.sqrt(expected)
    assert abs(np.mean(events.p > 0) - 0.5) < 0.01
    per_pixel = np.bincount(events.y.astype(int) * 240 + events.x, minlength=240 * 180)
    assert abs(per_pixel.var() / per_pixel.mean() - 1.0) < 0.1  # Poisson: variance = mean
    assert np.all(np.diff(events.t) >= 0)


def test_depth_of_a_single_wall_matches_the_plane_equation():
    wall_x = 3.0
    texture = np.zeros((64, 64), np.float32)
    wall = TexturedPlane(np.array([wall_x, 0.0, 0.0]), np.array([0.0, -1.0, 0.0]), np.array([0.0, 0.0, 1.0]),
                         (np.inf, np.inf), 20.0, texture)
    scene = PlanarScene.from_planes([wall])
    trajectory = Trajectory(ConstantAngularVelocity((0.2, -0.3, 0.1)), 1.0, OscillatingPosition(0.3, seed=1))
    simulator = EventSimulator(scene, trajectory, CALIBRATION, NOISELESS)
    t_s = 0.7
    _, depth = simulator.render(t_s)
    rotation = Rotation.from_rotvec(np.array([0.2, -0.3, 0.1]) * t_s).as_matrix()
    rotation = CAMERA_LOOKING_ALONG_X @ rotation
    position = trajectory.position(t_s)[0]
    assert np.linalg.norm(position) > 0.01
    directions = undistorted_bearings(CALIBRATION) @ rotation.T  # world directions with camera z = 1
    expected = (wall_x - position[0]) / directions[..., 0]
    assert np.allclose(depth, expected, rtol=1e-5)


def test_six_dof_preset_exports_depth_maps_on_the_scene_planes():
    simulator = make_preset("six_dof", seed=1)
    recording = simulator.simulate(1.0, 1.1)
    assert len(recording.events) > 1000
    assert np.array_equal(recording.depth_times, np.arange(1_000_000_000, 1_100_000_001, 20_000_000))
    assert recording.depth_maps.shape == (6, 180, 240)
    bearings = undistorted_bearings(CALIBRATION)
    scene = simulator.scene
    for t_ns, depth in zip(recording.depth_times[::3], recording.depth_maps[::3]):
        rotation = simulator.trajectory.orientation(t_ns / 1e9)[0]
        position = simulator.trajectory.position(t_ns / 1e9)[0]
        points = position + (bearings * depth[..., None].astype(np.float64)) @ rotation.T
        nearest = np.full(depth.shape, np.inf)
        for plane in scene.planes:
            offset = points - plane.origin
            inside = ((np.abs(offset @ plane.axis_u) <= plane.half_size[0] + 1e-3)
                      & (np.abs(offset @ plane.axis_v) <= plane.half_size[1] + 1e-3))
            distance = np.where(inside, np.abs(offset @ plane.normal), np.inf)
            nearest = np.minimum(nearest, distance)
        assert np.all(nearest < 1e-5 * depth.max() + 1e-5)
        assert len(np.unique(np.round(depth, 1))) > 5  # several planes and a slanted one in view


def test_bad_parameters_are_reported_by_name(room):
    with pytest.raises(ValueError, match="contrast_threshold"):
        SensorConfig(contrast_threshold=0.0).validate()
    with pytest.raises(ValueError, match="noise_rate_hz"):
        EventSimulator(room, Trajectory(ConstantAngularVelocity((0, 0, 0)), 1.0), CALIBRATION,
                       SensorConfig(noise_rate_hz=-1.0))
    with pytest.raises(ValueError, match="unknown simulator preset 'spin'"):
        make_preset("spin")
    with pytest.raises(ValueError, match="duration"):
        make_preset("rotation_short", duration_s=-2.0)
    simulator = EventSimulator(room, Trajectory(ConstantAngularVelocity((0, 0, 0)), 1.0), CALIBRATION)
    with pytest.raises(ValueError, match="interval"):
        simulator.simulate(0.5, 1.5)


def test_simulate_command_rejects_a_bad_option_by_name(tmp_path, capsys):
    from focus_ros.cli import main
    assert main(["simulate", "-o", str(tmp_path / "out"), "--contrast-threshold", "0", "--no-progress"]) == 1
    error = capsys.readouterr().err
    assert "--contrast-threshold must be > 0, got 0.0" in error and len(error.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()


def test_simulate_command_writes_an_ecd_folder(tmp_path, capsys):
    from focus_ros.cli import main
    output = tmp_path / "sequence"
    assert main(["simulate", "-o", str(output), "--preset", "rotation_short", "--duration", "0.2",
                 "--seed", "3", "--no-progress"]) == 0
    summary = capsys.readouterr().out
    count = int(summary.split(" events")[0].split()[-1].replace(",", ""))
    assert count > 10_000
    events = np.loadtxt(output / "events.txt", ndmin=2)
    assert len(events) == count and np.all(np.diff(events[:, 0]) >= 0)
    imu = np.loadtxt(output / "imu.txt", ndmin=2)
    assert len(imu) == 201 and np.allclose(np.diff(imu[:, 0]), 1e-3)
    assert Calibration.from_ecd_calib(output / "calib.txt") == CALIBRATION


def test_six_dof_velocity_and_specific_force_are_derivatives_of_the_position():
    simulator = make_preset("six_dof", seed=4)
    trajectory = simulator.trajectory
    model = trajectory.position_model
    times = np.linspace(0.5, 4.5, 41)
    step_s = 1e-4
    numerical_velocity = (model.position(times + step_s) - model.position(times - step_s)) / (2 * step_s)
    numerical_acceleration = (model.position(times + step_s) - 2 * model.position(times)
                              + model.position(times - step_s)) / step_s ** 2
    assert np.abs(model.velocity(times)).max() > 0.1
    assert np.allclose(model.velocity(times), numerical_velocity, atol=1e-6)
    assert np.allclose(model.acceleration(times), numerical_acceleration, atol=1e-3)
    # the accelerometer reads R^T (a - g) in the camera frame
    rotation = trajectory.orientation(times)
    expected = np.einsum("nij,ni->nj", rotation, numerical_acceleration - np.array([0.0, 0.0, -9.81]))
    imu = simulator.imu_samples(0.0, 5.0)
    on_grid = np.round(times * 1000).astype(int)
    assert np.allclose(imu.linear_acceleration[on_grid], expected, atol=1e-3)
    assert np.allclose(simulator.poses(0.0, 5.0).position[on_grid], model.position(times))
