"""Camera trajectories: interpolation, body-to-camera transform, streaming, coverage errors (their file
readers: test_trajectory_readers.py)."""

import numpy as np
import pytest
from scipy.spatial.transform import Rotation, Slerp

from focus_ros.poses import PoseCoverageError, PoseError, Trajectory, pose_matrix

S = 1_000_000_000


def _random_trajectory(count=20, seed=1):
    generator = np.random.default_rng(seed)
    t = np.cumsum(generator.integers(1_000_000, 20_000_000, count))
    position = generator.normal(size=(count, 3))
    quaternion = Rotation.random(count, random_state=seed).as_quat()
    return t, position, quaternion


def test_interpolation_linear_in_position_slerp_in_rotation():
    t, position, quaternion = _random_trajectory()
    trajectory = Trajectory(t, position, quaternion)
    queries = np.sort(np.random.default_rng(2).integers(t[0], t[-1], 200))
    rotations, positions = trajectory.interpolate(queries)
    expected_position = np.stack([np.interp(queries, t, position[:, axis]) for axis in range(3)], axis=1)
    np.testing.assert_allclose(positions, expected_position, atol=1e-12)
    expected_rotation = Slerp(t.astype(float), Rotation.from_quat(quaternion))(queries.astype(float)).as_matrix()
    np.testing.assert_allclose(rotations, expected_rotation, atol=1e-9)
    # at the samples themselves: the samples
    rotations, positions = trajectory.interpolate(t)
    np.testing.assert_allclose(positions, position, atol=1e-12)
    np.testing.assert_allclose(rotations, Rotation.from_quat(quaternion).as_matrix(), atol=1e-12)


def test_camera_from_body_and_time_offset():
    t, position, quaternion = _random_trajectory(5)
    camera_from_body = pose_matrix(Rotation.from_rotvec([0.1, -0.2, 0.3]).as_matrix(), [0.01, 0.02, -0.05])
    offset = 3_000_000
    trajectory = Trajectory(t, position, quaternion, camera_from_body=camera_from_body, time_offset_ns=offset)
    assert trajectory.t_range_ns == (t[0] + offset, t[-1] + offset)
    world_from_body = pose_matrix(Rotation.from_quat(quaternion[2]).as_matrix(), position[2])
    expected = world_from_body @ np.linalg.inv(camera_from_body)
    np.testing.assert_allclose(trajectory.world_from_camera(t[2] + offset), expected, atol=1e-12)


def test_bad_poses_are_one_line_errors():
    t, position, quaternion = _random_trajectory(5)
    with pytest.raises(PoseError, match="out of order: pose 3"):
        Trajectory(t[[0, 1, 2, 1, 4]], position, quaternion)
    with pytest.raises(PoseError, match="out of order"):
        Trajectory(t[[0, 1, 1, 3, 4]], position, quaternion)
    with pytest.raises(PoseError, match="not a unit quaternion"):
        Trajectory(t, position, quaternion * 2)
    bad = position.copy()
    bad[1, 0] = np.nan
    with pytest.raises(PoseError, match="pose 1 is not finite"):
        Trajectory(t, bad, quaternion)
    with pytest.raises(PoseError, match="no poses"):
        Trajectory().t_range_ns


def test_coverage_error_names_both_ranges():
    trajectory = Trajectory([1 * S, 2 * S], np.zeros((2, 3)), [[0, 0, 0, 1.0]] * 2, source="mocap")
    with pytest.raises(PoseCoverageError) as error:
        trajectory.check_covers(int(0.5 * S), int(1.5 * S))
    message = str(error.value)
    assert "0.500000 s - 1.500000 s" in message and "1.000000 s - 2.000000 s" in message
    assert "\n" not in message
    with pytest.raises(PoseCoverageError):
        trajectory.interpolate([int(2.5 * S)])
    trajectory.check_covers(1 * S, 2 * S)


def test_append_streams_and_discard_bounds_memory():
    t, position, quaternion = _random_trajectory(40)
    whole = Trajectory(t, position, quaternion)
    streamed = Trajectory()
    for index in range(len(t)):
        streamed.append(t[index], position[index], quaternion[index])
    queries = np.linspace(t[10], t[-1], 50).astype(np.int64)
    np.testing.assert_allclose(streamed.interpolate(queries)[1], whole.interpolate(queries)[1])
    with pytest.raises(PoseError, match="out of order"):
        streamed.append(t[-1], position[0], quaternion[0])
    streamed.discard_before(int(t[10]) + 1)
    assert len(streamed) == len(t) - 10
    np.testing.assert_allclose(streamed.interpolate(queries)[0], whole.interpolate(queries)[0], atol=1e-12)
