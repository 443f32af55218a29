"""The slider preset's geometry and the depth ground truth: consistent with the poses and the
calibration, and written beside the events (ECD folder, ROS 1 and ROS 2 bags) and read back."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from focus_ros.camera import Calibration
from focus_ros.cli import main
from focus_ros.sources.depth_maps import DepthGroundTruth
from focus_ros.sources.ecd import read_depth_folder
from focus_ros.sources.sequence import read_depth_ground_truth
from focus_ros.sources.recording import Recording
from focus_ros.sources.sequence import load_recording
from focus_ros.sources.simulator import CAMERA_LOOKING_ALONG_X, make_preset

CALIBRATION = Calibration.davis240c()


@pytest.fixture(scope="module")
def slider():
    """The slider simulator and 0.2 s of it (depth maps at 50 Hz: 11 maps)."""
    simulator = make_preset("slider", seed=0)
    return simulator, simulator.simulate(1.4, 1.6)


def world_from_camera(recording: Recording, index: int) -> tuple[np.ndarray, np.ndarray]:
    """(R_world_camera, position m) of pose sample ``index``, from the recording's quaternions."""
    return (Rotation.from_quat(recording.poses.orientation[index]).as_matrix(),
            recording.poses.position[index])


def test_slider_moves_right_at_a_quarter_metre_per_second_without_rotating(slider):
    simulator, recording = slider
    assert simulator.trajectory.duration_s == pytest.approx(3.0)
    poses = simulator.poses(0.0, 3.0, rate_hz=100.0)  # what simulate() writes, at 100 Hz
    rotations = Rotation.from_quat(poses.orientation).as_matrix()
    assert np.allclose(rotations, CAMERA_LOOKING_ALONG_X, atol=1e-9)  # never rotates
    assert np.allclose(simulator.imu_samples(0.0, 3.0).angular_velocity, 0.0)
    # velocity in the camera frame from finite differences of the written poses
    seconds = np.diff(poses.t) * 1e-9
    velocity_camera = (np.diff(poses.position, axis=0) / seconds[:, None]) @ CAMERA_LOOKING_ALONG_X
    assert np.allclose(velocity_camera, [0.25, 0.0, 0.0], atol=1e-9)
    baseline = np.linalg.norm(poses.position[-1] - poses.position[0])
    assert baseline == pytest.approx(0.75, abs=1e-9)  # like slider_depth's ~0.85 m in 2.9 s
    # what the camera sees lies between 0.5 and 2.5 m (0.55-2.3 m: inside the paper's 0.45-2.4 m
    # range), near and far surfaces both in view
    depth = np.stack([simulator.render(t_s)[1] for t_s in np.linspace(0.0, 3.0, 7)])
    assert np.all(np.isfinite(depth))
    assert 0.5 <= depth.min() < 0.6 and depth.max() == pytest.approx(2.3, abs=1e-4)
    for frame in depth:
        assert np.mean(frame < 1.0) > 0.03 and np.mean(frame > 2.0) > 0.3
        assert len(np.unique(np.round(frame, 2))) >= 4  # several depths in every view
    assert len(recording.events) / 0.2 > 2e5  # textured: an event rate like slider_depth's 0.3 Mev/s


def test_depth_maps_are_consistent_with_the_poses_and_the_calibration(slider):
    """A pixel's depth map point, moved into a later view with the written poses and projected
    with the calibration (distortion included), lands on a pixel whose depth is that point's z."""
    simulator, recording = slider
    depth = recording.depth_maps
    first, last = 0, len(depth) - 1  # 0.2 s apart: 5 cm of baseline, up to 20 px of parallax
    pose_index = [int(np.searchsorted(recording.poses.t, recording.depth_times[i])) for i in (first, last)]
    assert np.array_equal(recording.poses.t[pose_index], recording.depth_times[[first, last]])
    bearings = np.concatenate([CALIBRATION.bearing_lut(), np.ones((180, 240, 1))], axis=2)
    rotation_0, position_0 = world_from_camera(recording, pose_index[0])
    rotation_1, position_1 = world_from_camera(recording, pose_index[1])
    points_world = position_0 + (bearings * depth[first][..., None].astype(np.float64)) @ rotation_0.T
    points_later = (points_world - position_1) @ rotation_1  # R^T (X - p), row vectors
    pixels = CALIBRATION.project(points_later)
    column, row = np.round(pixels[..., 0]).astype(int), np.round(pixels[..., 1]).astype(int)
    inside = (column >= 0) & (column < 240) & (row >= 0) & (row < 180)
    assert inside.mean() > 0.8
    seen = depth[last][row[inside], column[inside]]
    expected = points_later[..., 2][inside]
    agree = np.abs(seen - expected) < 0.005 * expected
    # disagreement only at occlusion boundaries (rounding to the nearest pixel across a depth edge)
    assert agree.mean() > 0.95
    moved = np.hypot(*(pixels - np.stack(np.meshgrid(np.arange(240), np.arange(180)), -1)).transpose(2, 0, 1))
    assert moved[inside].max() > 15  # the check covers real parallax


@pytest.mark.parametrize("output_format", ["ecd", "rosbag1", "rosbag2"])
def test_simulate_writes_depth_ground_truth_that_reads_back_exactly(slider, tmp_path, output_format, capsys):
    output = tmp_path / ("sim.bag" if output_format == "rosbag1" else "sim")
    assert main(["simulate", "--preset", "slider", "--duration", "0.1", "--format", output_format,
                 "--output", str(output), "--no-progress"]) == 0
    assert "slider" in capsys.readouterr().out
    expected = make_preset("slider", 0.1).simulate()
    truth = read_depth_ground_truth(output)
    assert isinstance(truth, DepthGroundTruth)
    assert np.array_equal(truth.t, expected.depth_times)
    assert truth.depth_m.dtype == np.float32 and np.array_equal(truth.depth_m, expected.depth_maps)
    recording = load_recording(output)  # the whole-sequence reader carries it too
    assert np.array_equal(recording.depth_times, expected.depth_times)
    assert np.array_equal(recording.depth_maps, expected.depth_maps)
    if output_format == "ecd":
        listing = (output / "depthmaps.txt").read_text().splitlines()
        assert listing[0] == "0.000000000 depthmaps/depth_00000000.npy"
        assert np.array_equal(np.load(output / "depthmaps" / "depth_00000001.npy"), expected.depth_maps[1])


def test_depth_folder_keeps_infinity_and_nan_and_reports_bad_listings(tmp_path):
    maps = np.full((2, 3, 4), 1.5, np.float32)
    maps[0, 0, 0], maps[1, 2, 3] = np.inf, np.nan
    from focus_ros.sources.ecd import write_depth_folder
    write_depth_folder(tmp_path, np.array([5, 2_000_000_007]), maps)
    truth = read_depth_folder(tmp_path)
    assert np.array_equal(truth.t, [5, 2_000_000_007])
    assert np.array_equal(truth.depth_m, maps, equal_nan=True)
    (tmp_path / "depthmaps.txt").write_text("1.0 depthmaps/missing.npy\n")
    with pytest.raises(FileNotFoundError, match="line 1: depth map not found"):
        read_depth_folder(tmp_path)
    (tmp_path / "depthmaps.txt").write_text("one depthmaps/depth_00000000.npy\n")
    with pytest.raises(ValueError, match="line 1: not a time"):
        read_depth_folder(tmp_path)


def test_depth_at_a_time_takes_the_nearest_map_within_tolerance():
    truth = DepthGroundTruth(np.array([0, 20_000_000, 40_000_000]), np.arange(3)[:, None, None] * np.ones((3, 2, 2)))
    assert truth.at(20_000_000)[0, 0] == 1
    assert truth.at(40_500_000)[0, 0] == 2
    with pytest.raises(ValueError, match="no depth map within 1 ms of t = 0.010000 s"):
        truth.at(10_000_000)
    with pytest.raises(ValueError, match="increase"):
        DepthGroundTruth(np.array([0, 0]), np.zeros((2, 2, 2)))
