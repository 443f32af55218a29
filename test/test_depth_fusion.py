"""The fused depth map (focus_ros.depth.fusion.FusedMap): a surface that several keyframes see is
confirmed wherever it is, near or far (agreement relative to the depth), a point only one
keyframe claims is not, agreeing estimates are averaged, and the map stays within its bound."""

import numpy as np
import pytest

from focus_ros.depth.fusion import FusedMap

FX = 200.0  # px: a DAVIS240C-like camera, 240x180 px
PIXEL_RAD = 1.0 / FX


def _pose(position, yaw_rad=0.0) -> np.ndarray:
    """world_from_camera: the camera at position (m), turned by yaw about the world y axis."""
    c, s = np.cos(yaw_rad), np.sin(yaw_rad)
    pose = np.eye(4)
    pose[:3, :3] = [[c, 0, s], [0, 1, 0], [-s, 0, c]]
    pose[:3, 3] = position
    return pose


def _wall_seen_from(pose, wall_z_m, rng, noise=0.0, bias=1.0, step_px=1):
    """The points a keyframe at ``pose`` (looking along +z, not turned) puts on the wall z = wall_z_m
    (world), one every step_px pixels of a 240x180 image: along each pixel's ray at the true
    distance times bias, times (1 + N(0, noise)) (a relative depth error)."""
    columns, rows = np.meshgrid(np.arange(0, 240, step_px), np.arange(0, 180, step_px))
    rays = np.stack([(columns.ravel() - 120) / FX, (rows.ravel() - 90) / FX, np.ones(columns.size)], axis=1)
    scale = (wall_z_m - pose[2, 3]) * bias * (1 + rng.normal(0, noise, len(rays)))
    return (pose[:3, 3] + rays * scale[:, None]).astype(np.float32)


@pytest.mark.parametrize("wall_z_m", [0.6, 4.0])
def test_a_surface_seen_by_two_keyframes_with_1_percent_noise_is_confirmed_near_and_far(wall_z_m):
    """Two keyframes 5 % of the depth apart, each with a 1 % depth error: at 4 m their estimates of
    one point lie about 6 cm apart (a 1-cm voxel would never join them), at 0.6 m about 8 mm;
    agreement within 1.5 % of the depth confirms both walls alike."""
    rng = np.random.default_rng(0)
    fused = FusedMap(depth_tolerance=0.015, min_keyframes=2)
    first, second = _pose([0.0, 0.0, 0.0]), _pose([0.05 * wall_z_m, 0.0, 0.0])
    fused.add(_wall_seen_from(first, wall_z_m, rng, noise=0.01), first, PIXEL_RAD)
    assert len(fused.points()[0]) == 0  # nothing is confirmed by one keyframe
    fused.add(_wall_seen_from(second, wall_z_m, rng, noise=0.01), second, PIXEL_RAD)
    points, support = fused.points()
    assert np.all(support == 2)
    # every point of the second view has a point of the first within a pixel (the views overlap
    # except for the 5 % strip the camera moved by: 5 % of the depth is 10 px at f = 200 px)
    assert len(points) > 0.9 * len(fused)
    assert np.all(np.abs(points[:, 2] / wall_z_m - 1) < 0.06)  # 1 % noise: no point 6 sigma off


def test_where_keyframes_agree_their_estimates_are_averaged():
    """Two keyframes, each with an independent 1 % depth error per point: a published point lies
    at the mean of its own log depth and the other keyframe's points around it, so its error is at
    most 1/sqrt(2) of one estimate's (less still when several of the other's points are around
    it); the wall at z = 2 m is then nearer in the map than in either keyframe."""
    rng = np.random.default_rng(5)
    first, second = _pose([0.0, 0.0, 0.0]), _pose([0.1, 0.0, 0.0])
    fused = FusedMap(depth_tolerance=0.015, min_keyframes=2)
    fused.add(_wall_seen_from(first, 2.0, rng, noise=0.01), first, PIXEL_RAD)
    fused.add(_wall_seen_from(second, 2.0, rng, noise=0.01), second, PIXEL_RAD)
    published = fused.points()[0]
    as_estimated = np.median(np.abs(fused.points_world[:, 2] / 2.0 - 1))
    assert 0.005 < as_estimated < 0.008  # 0.674 sigma: the median of |N(0, 1 %)|
    assert np.median(np.abs(published[:, 2] / 2.0 - 1)) < as_estimated / np.sqrt(2)


@pytest.mark.parametrize("wall_z_m", [0.6, 4.0])
def test_a_keyframe_5_percent_off_does_not_confirm_and_lone_points_stay_out(wall_z_m):
    """The second keyframe puts the wall 5 % too far (more than 2 cells of 1.5 %): no agreement,
    at either depth; a lone wrong point of one keyframe is not confirmed by the other's wall."""
    rng = np.random.default_rng(1)
    first, second = _pose([0.0, 0.0, 0.0]), _pose([0.05 * wall_z_m, 0.0, 0.0])
    fused = FusedMap(depth_tolerance=0.015, min_keyframes=2)
    fused.add(_wall_seen_from(first, wall_z_m, rng), first, PIXEL_RAD)
    fused.add(_wall_seen_from(second, wall_z_m, rng, bias=1.05), second, PIXEL_RAD)
    assert len(fused.points()[0]) == 0
    # a spike: 0.6 of the wall's depth on the optical axis, in the first keyframe only
    spike = np.array([[0.0, 0.0, 0.6 * wall_z_m]], np.float32)
    fused = FusedMap(depth_tolerance=0.015, min_keyframes=2)
    fused.add(np.vstack([_wall_seen_from(first, wall_z_m, rng), spike]), first, PIXEL_RAD)
    fused.add(_wall_seen_from(second, wall_z_m, rng), second, PIXEL_RAD)
    points = fused.points()[0]
    assert len(points) > 1000
    assert np.min(np.linalg.norm(points - spike, axis=1)) > 0.3 * wall_z_m


def test_three_keyframes_must_agree_when_asked_and_every_point_is_published_with_one():
    rng = np.random.default_rng(2)
    poses = [_pose([x, 0.0, 0.0]) for x in (0.0, 0.1, 0.2)]
    fused = FusedMap(depth_tolerance=0.015, min_keyframes=3)
    fused.add(_wall_seen_from(poses[0], 2.0, rng), poses[0], PIXEL_RAD)
    fused.add(_wall_seen_from(poses[1], 2.0, rng), poses[1], PIXEL_RAD)
    assert len(fused.points()[0]) == 0
    fused.add(_wall_seen_from(poses[2], 2.0, rng), poses[2], PIXEL_RAD)
    points, support = fused.points()
    assert len(points) > 1000 and np.all(support == 3)
    every = FusedMap(min_keyframes=1)
    lone = np.array([[0.3, 0.2, 1.0]], np.float32)
    every.add(lone, poses[0], PIXEL_RAD)
    np.testing.assert_array_equal(every.points()[0], lone)


def test_points_behind_the_new_camera_are_not_compared():
    """A keyframe looking the other way (turned by 180 deg) sees a wall at z = -2 m: the first
    keyframe's wall (z = +2 m) is behind it, so nothing is confirmed, and nothing fails."""
    rng = np.random.default_rng(3)
    ahead, behind = _pose([0.0, 0.0, 0.0]), _pose([0.0, 0.0, 0.0], np.pi)
    fused = FusedMap(min_keyframes=2)
    fused.add(_wall_seen_from(ahead, 2.0, rng), ahead, PIXEL_RAD)
    mirrored = _wall_seen_from(ahead, 2.0, rng) * np.array([-1, 1, -1], np.float32)  # the wall z = -2 m
    fused.add(mirrored, behind, PIXEL_RAD)
    assert len(fused.points()[0]) == 0 and len(fused) == 2 * len(mirrored)


def test_the_map_stays_within_its_bound_over_a_long_run_keeping_the_newest():
    rng = np.random.default_rng(4)
    fused = FusedMap(min_keyframes=1, max_points=5000)
    for keyframe in range(150):  # the camera moves on: each keyframe sees new ground
        pose = _pose([keyframe * 10.0, 0.0, 0.0])
        fused.add(_wall_seen_from(pose, 2.0, rng, step_px=8), pose, PIXEL_RAD)  # 30 x 23 = 690 points each
        assert len(fused) <= 5000
    newest = fused.points()[0]
    # 5000 points: the last 7 keyframes (4830) and 170 of keyframe 142, whose wall spans x = 1420 ± 1.2 m
    assert len(newest) == 5000 and newest[:, 0].min() > 1420.0 - 1.2 - 1e-3
    # each point's keyframe, counted from the first one added (the dropped keyframes keep their numbers)
    assert np.array_equal(fused.point_keyframes(), np.repeat(np.arange(142, 150), [170] + [690] * 7))


def test_each_published_point_names_the_keyframe_it_was_estimated_in():
    """Two keyframes on one wall: every published point is its own keyframe's (numbered in the order
    they were added), in the order and number of the points published, sigma bound included."""
    rng = np.random.default_rng(6)
    first, second = _pose([0.0, 0.0, 0.0]), _pose([0.1, 0.0, 0.0])
    fused = FusedMap(depth_tolerance=0.015, min_keyframes=2, max_relative_sigma=0.01)
    own = [_wall_seen_from(pose, 2.0, rng, noise=0.002) for pose in (first, second)]
    sigma = [np.where(np.arange(len(points)) % 3 == 0, 1.0, 0.001).astype(np.float32) for points in own]
    for points, pose, point_sigma in zip(own, (first, second), sigma):
        fused.add(points, pose, PIXEL_RAD, point_sigma)
    published, _ = fused.points()
    keyframes = fused.point_keyframes()
    assert len(keyframes) == len(published) > 0.5 * len(fused) and set(keyframes.tolist()) == {0, 1}
    for number, pose in enumerate((first, second)):  # on its own keyframe's rays: x / z from that camera
        mine = published[keyframes == number] - pose[:3, 3]
        rays = own[number][sigma[number] < 1] - pose[:3, 3]
        assert len(mine) <= len(rays)
        assert np.isin(np.round(mine[:, 0] / mine[:, 2] * FX, 3), np.round(rays[:, 0] / rays[:, 2] * FX, 3)).all()


def test_bad_settings_are_refused():
    for arguments in ({"depth_tolerance": 0.0}, {"depth_tolerance": float("nan")}, {"min_keyframes": 0},
                      {"min_keyframes": 65}, {"max_points": 0}):
        with pytest.raises(ValueError):
            FusedMap(**arguments)
    with pytest.raises(ValueError):
        FusedMap().add(np.zeros((1, 3)), np.eye(4), 0.0)
