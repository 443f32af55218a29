"""The fused depth map (focus_ros.depth.fusion.VoxelMap): a surface seen by several keyframes
is kept, a point only one keyframe claims is not, and the grid stays within its bound."""

import numpy as np
import pytest

from focus_ros.depth.fusion import VoxelMap


def _wall(rng, count, noise_m=0.001):
    """Points on the plane x = 2 m (y, z within ±0.5 m), with noise along x."""
    return np.column_stack([2.0 + rng.normal(0, noise_m, count), rng.uniform(-0.5, 0.5, count),
                            rng.uniform(-0.5, 0.5, count)])


def test_points_two_keyframes_agree_on_are_kept_and_lone_points_are_not():
    rng = np.random.default_rng(0)
    fused = VoxelMap(voxel_m=0.02, min_keyframes=2)
    outlier_a = np.array([[1.0, 0.3, 0.3]])   # a wrong depth in the first keyframe only
    outlier_b = np.array([[1.5, -0.3, 0.1]])  # another in the second, elsewhere
    fused.add(np.vstack([_wall(rng, 20_000), outlier_a]))
    assert len(fused.points()[0]) == 0          # nothing is confirmed by one keyframe
    fused.add(np.vstack([_wall(rng, 20_000), outlier_b]))
    points, support = fused.points()
    assert len(points) > 1000 and np.all(support == 2)
    # every kept point is on the wall (the mean of the points in its voxel), the lone ones are gone
    assert np.all(np.abs(points[:, 0] - 2.0) < 0.02)
    assert np.min(np.linalg.norm(points - outlier_a, axis=1)) > 0.05
    assert np.min(np.linalg.norm(points - outlier_b, axis=1)) > 0.05
    # with min_keyframes 1 every voxel is published, the outliers too
    every = VoxelMap(voxel_m=0.02, min_keyframes=1)
    every.add(outlier_a)
    np.testing.assert_allclose(every.points()[0], outlier_a.astype(np.float32))


def test_a_neighbouring_voxel_counts_as_agreement():
    """Two keyframes put the same surface point 4 mm apart across a voxel face: they agree."""
    fused = VoxelMap(voxel_m=0.01, min_keyframes=2)
    fused.add(np.array([[0.0098, 0.005, 0.005]]))
    fused.add(np.array([[0.0102, 0.005, 0.005]]))
    assert len(fused.points()[0]) == 2
    far = VoxelMap(voxel_m=0.01, min_keyframes=2)
    far.add(np.array([[0.005, 0.005, 0.005]]))
    far.add(np.array([[0.035, 0.005, 0.005]]))  # three voxels away: no agreement
    assert len(far.points()[0]) == 0


def test_the_map_stays_within_its_bound_over_a_long_run_keeping_the_newest():
    rng = np.random.default_rng(1)
    fused = VoxelMap(voxel_m=0.01, min_keyframes=1, max_voxels=5000)
    for keyframe in range(150):  # the camera moves on: each keyframe sees new ground
        points = rng.uniform(0, 0.5, (3000, 3)) + [keyframe * 1.0, 0.0, 0.0]
        fused.add(points)
        assert len(fused) <= 5000
    newest = fused.points()[0]
    assert newest[:, 0].min() > 147.0 - 1e-6  # what is left is the latest keyframes' ground


def test_bad_settings_are_refused():
    for arguments in ({"voxel_m": 0.0}, {"min_keyframes": 0}, {"min_keyframes": 65}, {"max_voxels": 0}):
        with pytest.raises(ValueError):
            VoxelMap(**arguments)
