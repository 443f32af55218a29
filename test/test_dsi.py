"""The DSI engine: an event from a known 3-D point votes into that point's voxel; a plane's
DSI peaks at the plane's depth; polarity, memory bound, pose-batch error bound."""

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from focus_ros.camera import Calibration
from focus_ros.depth.dsi import DisparitySpaceImage, plane_depths_m
from focus_ros.depth.synthetic import plane_events
from focus_ros.events import Events
from focus_ros.poses import Trajectory, matrix_to_quaternion, pose_matrix

S = 1_000_000_000


def test_plane_depths_uniform_in_inverse_depth_and_bad_ranges():
    depths = plane_depths_m(0.5, 2.0, 4)
    np.testing.assert_allclose(depths, 1 / np.array([2.0, 1.5, 1.0, 0.5]))
    for z_min, z_max in ((2.0, 1.0), (1.0, 1.0), (0.0, 1.0), (-1.0, 2.0), (1.0, np.inf)):
        with pytest.raises(ValueError, match="depth range"):
            plane_depths_m(z_min, z_max, 10)
    with pytest.raises(ValueError, match="at least 2"):
        plane_depths_m(0.5, 2.0, 1)


def test_event_of_a_known_point_votes_into_its_voxel_with_distortion():
    calibration = Calibration.davis240c()  # strong radial distortion
    depths = plane_depths_m(0.5, 3.0, 50)
    world_from_reference = pose_matrix(Rotation.from_rotvec([0.05, -0.1, 0.02]).as_matrix(), [0.3, -0.1, 0.2])
    world_from_event_camera = pose_matrix(Rotation.from_rotvec([0.03, -0.07, 0.01]).as_matrix(), [0.36, -0.06, 0.17])
    reference_from_camera = np.linalg.inv(world_from_reference) @ world_from_event_camera
    bearings = calibration.bearing_lut()
    checked = 0
    for pixel_x, pixel_y, plane in ((30, 20, 7), (120, 90, 25), (200, 150, 40), (5, 170, 12), (60, 60, 3),
                                   (150, 40, 49), (100, 120, 0), (180, 100, 30)):
        # the 3-D point seen at this (distorted) pixel by the event camera, on plane `plane` of the reference
        ray = reference_from_camera[:3, :3] @ np.append(bearings[pixel_y, pixel_x], 1.0)
        scale = (depths[plane] - reference_from_camera[2, 3]) / ray[2]
        point_reference = scale * ray + reference_from_camera[:3, 3]
        assert scale > 0 and abs(point_reference[2] - depths[plane]) < 1e-12
        expected = calibration.project(point_reference, distort=False)  # undistorted reference grid
        if not (0 <= expected[0] < calibration.width - 1 and 0 <= expected[1] < calibration.height - 1):
            continue
        quaternion = matrix_to_quaternion(world_from_event_camera[:3, :3])
        trajectory = Trajectory([0, 2 * S], [world_from_event_camera[:3, 3]] * 2, [quaternion] * 2)
        dsi = DisparitySpaceImage(calibration, depths)
        dsi.reset(S, world_from_reference)
        dsi.add_events(Events.from_arrays([pixel_x], [pixel_y], [S], [1]), trajectory)
        assert dsi.votes.sum(axis=(0, 1))[plane] == pytest.approx(1.0, abs=1e-6)
        votes = dsi.votes[:, :, plane]
        np.testing.assert_array_equal(votes, dsi.slice(plane))
        x0, y0 = int(np.floor(expected[0])), int(np.floor(expected[1]))
        ax, ay = expected[0] - x0, expected[1] - y0
        np.testing.assert_allclose(votes[y0:y0 + 2, x0:x0 + 2],
                                   [[(1 - ax) * (1 - ay), ax * (1 - ay)], [(1 - ax) * ay, ax * ay]], atol=1e-5)
        checked += 1
    assert checked >= 6


def test_plane_dsi_peaks_at_the_plane_depth_on_every_textured_pixel():
    calibration = Calibration.davis240c()
    depths = plane_depths_m(0.6, 3.0, 60)
    true_plane = 37
    scene = plane_events(calibration, depth_m=depths[true_plane], event_count=150_000, duration_s=0.6,
                         speed_m_s=0.3, points=400)
    t_ref = S * 3 // 10
    dsi = DisparitySpaceImage(calibration, depths)
    dsi.reset(t_ref, scene.trajectory.world_from_camera(t_ref))
    dsi.add_events(scene.events, scene.trajectory)
    # textured pixels: where the texture points project in the reference view (undistorted grid)
    reference = np.linalg.inv(dsi.world_from_reference)
    camera = scene.points_world @ reference[:3, :3].T + reference[:3, 3]
    pixels = calibration.project(camera, distort=False)
    inside = (pixels[:, 0] > 3) & (pixels[:, 1] > 3) & (pixels[:, 0] < 236) & (pixels[:, 1] < 176)
    # isolated texture: no other point projects within 3 px (its ray would cross this pixel too)
    distances = np.linalg.norm(pixels[:, None] - pixels[None], axis=2) + np.eye(len(pixels)) * 1e9
    inside &= distances.min(axis=1) > 3.0
    # peak on the plane (±1: event pixels are rounded to whole px)
    found = []
    for x, y in pixels[inside]:
        # the DSI along the ray of the point's (sub-pixel) projection, bilinearly interpolated
        x0, y0 = int(x), int(y)
        ax, ay = x - x0, y - y0
        ray = ((1 - ax) * (1 - ay) * dsi.votes[y0, x0] + ax * (1 - ay) * dsi.votes[y0, x0 + 1]
               + (1 - ax) * ay * dsi.votes[y0 + 1, x0] + ax * ay * dsi.ray(x0 + 1, y0 + 1))
        found.append(np.argmax(ray))
    found = np.array(found)
    assert len(found) > 100
    assert np.all(np.abs(found - true_plane) <= 1), np.unique(found - true_plane, return_counts=True)
    assert np.mean(found == true_plane) > 0.8


def test_polarity_votes_and_coordinates_out_of_range():
    calibration = Calibration.davis240c()
    scene = plane_events(calibration, event_count=20_000, duration_s=0.2)
    # one pose per event: splitting the events by polarity does not change their poses
    dsi = DisparitySpaceImage(calibration, plane_depths_m(0.5, 2.0, 20), events_per_pose=1)
    dsi.reset(S // 10, scene.trajectory.world_from_camera(S // 10))
    dsi.add_events(scene.events, scene.trajectory, use_polarity=True)
    signed = dsi.votes.copy()
    dsi.reset(S // 10, scene.trajectory.world_from_camera(S // 10))
    positive = scene.events[scene.events.p > 0]
    negative = scene.events[scene.events.p < 0]
    dsi.add_events(positive, scene.trajectory)
    counts_positive = dsi.votes.copy()
    dsi.reset(S // 10, scene.trajectory.world_from_camera(S // 10))
    dsi.add_events(negative, scene.trajectory)
    np.testing.assert_allclose(signed, counts_positive - dsi.votes, atol=1e-3)
    with pytest.raises(ValueError, match="cannot mix"):
        dsi.add_events(negative, scene.trajectory, use_polarity=True)
    bad = Events.from_arrays([240], [0], [S // 10], [1])
    dsi.reset(S // 10, scene.trajectory.world_from_camera(S // 10))
    with pytest.raises(ValueError, match="outside the 240x180 sensor"):
        dsi.add_events(bad, scene.trajectory)


def test_memory_bound_and_pose_batch_error_bound():
    with pytest.raises(ValueError, match="needs 117 MiB, more than the 100 MiB"):
        DisparitySpaceImage(Calibration(640, 480, 500, 500, 320, 240), plane_depths_m(0.5, 5, 100),
                            max_bytes=100 * 2**20)
    calibration = Calibration.davis240c()
    scene = plane_events(calibration, event_count=50_000, duration_s=0.5, speed_m_s=0.25)
    dsi = DisparitySpaceImage(calibration, plane_depths_m(0.5, 2.0, 20), events_per_pose=1024)
    dsi.reset(S // 4, scene.trajectory.world_from_camera(S // 4))
    dsi.add_events(scene.events, scene.trajectory)
    # 1024 events at 100 kev/s span ~10 ms: the camera moves ~1.3 mm each side of the
    # middle, i.e. 199 px * 1.3e-3 m / 0.5 m = 0.51 px at the nearest plane
    span_s = 1024 / (len(scene.events) / 0.5)
    expected = calibration.fx * 0.25 * span_s / 2 / 0.5
    assert 0.8 * expected < dsi.pose_batch_error_px < 1.3 * expected
    fine = DisparitySpaceImage(calibration, plane_depths_m(0.5, 2.0, 20), events_per_pose=64)
    fine.reset(S // 4, scene.trajectory.world_from_camera(S // 4))
    fine.add_events(scene.events, scene.trajectory)
    assert fine.pose_batch_error_px < dsi.pose_batch_error_px / 10
    # the same votes up to that bound: the DSIs' per-plane sums agree closely
    np.testing.assert_allclose(fine.votes.sum(axis=(0, 1)), dsi.votes.sum(axis=(0, 1)), rtol=0.02)


def test_a_1280x720_keyframe_stays_within_512_mib_and_finds_its_plane():
    """Issue 21 item 5: a keyframe of an IMX636 (1280x720) with the default settings stays under
    512 MiB of Python-side memory at its peak (DSI, focus bands, peaks, selection, points),
    measured with tracemalloc (numpy registers its buffers there), and still reads the plane's
    depth. The DSI takes fewer planes than the 100 asked for: as many as fit in max_dsi_bytes."""
    import tracemalloc

    from focus_ros.camera import SENSORS
    from focus_ros.estimators.depth import DepthEstimator, DepthSettings

    calibration = SENSORS["imx636"].calibration()
    plane = plane_events(calibration, depth_m=1.5, event_count=300_000, duration_s=0.5, speed_m_s=0.2,
                         points=20_000, seed=3)
    tracemalloc.start()
    try:
        estimator = DepthEstimator(calibration, DepthSettings(auto_depth_range=False, z_min_m=0.5, z_max_m=5.0))
        keyframe = estimator.estimate(plane.events, plane.trajectory)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert estimator.dsi.nbytes <= 256 * 2**20 and 20 <= estimator.planes < 100
    assert peak < 512 * 2**20, f"peak {peak / 2**20:.0f} MiB"
    depths = keyframe.depth_m[keyframe.mask]
    assert keyframe.point_count > 1000
    assert np.median(np.abs(depths - 1.5) / 1.5) < 0.02
