"""The angular velocity node on the sensors people own (issue 21): each sensor preset is
simulated, written as a bag with its camera_info and its driver's encoding, replayed by
replay_node into the node started as `ros2 run` starts it with its defaults (auto windows,
compute budget, pixel binning), and its estimates compared with the ground truth within a
bound set from the same windows estimated offline. And an estimate from a window with too
little motion is withheld and counted, not published.

Real processes on loopback (test/ros_harness.py); the replay is slowed (and the node told
to estimate every window, queue_policy all) so that a CI machine keeps up: speed is the
benchmark's business (benchmarks/bench_sensors.py)."""

from __future__ import annotations

import re

import numpy as np
import pytest

from focus_ros.camera import SENSORS, sensor_model
from focus_ros.estimators.angular_velocity import (AngularVelocityEstimator, planning_speed_rad_s,
                                                   real_time_settings)
from focus_ros.evaluation.metrics import error_statistics
from focus_ros.events import Events
from focus_ros.iwe import coarse_grid_calibration, coarse_grid_factor
from focus_ros.sources import bags
from focus_ros.sources.simulator import make_preset
from focus_ros.windows import AdaptiveWindows, WindowRule, thin_events

try:
    from event_camera_msgs.msg import EventPacket
    from geometry_msgs.msg import TwistStamped

    from ros_harness import node_session, spin_until
except ImportError:  # the offline tests still run
    EventPacket = TwistStamped = None
needs_ros = pytest.mark.skipif(EventPacket is None or TwistStamped is None,
                               reason="rclpy or the interface packages missing: run `make setup`")

#: sensor -> (start, end) s of the rotation_short preset simulated: short for the large
#: sensors (their simulation is slow), a few of the node's 20-ms output periods each
SPANS_S = {"davis240c": (1.0, 1.4), "davis346": (1.0, 1.4), "dvxplorer": (1.0, 1.2), "imx636": (1.0, 1.08)}
#: the windows after a (re)start are solved cold; the comparison starts after this much of the stream
COLD_S = 0.02
SECOND = 1_000_000_000


@pytest.fixture
def ros(tmp_path, monkeypatch):
    with node_session("large_sensors_client", monkeypatch, tmp_path) as session:
        yield session


_RECORDINGS: dict = {}


def recording_of(sensor: str):
    """The sensor's rotation_short slice (simulated once per test run)."""
    if sensor not in _RECORDINGS:
        start_s, end_s = SPANS_S[sensor]
        _RECORDINGS[sensor] = make_preset("rotation_short", camera=sensor).simulate(start_s=start_s, end_s=end_s)
    return _RECORDINGS[sensor]


def truth_at(recording, t_ns: np.ndarray) -> np.ndarray:
    """Ground-truth omega (rad/s) at the times (ns)."""
    gyro = recording.imu
    return np.stack([np.interp(t_ns, gyro.t, gyro.angular_velocity[:, axis]) for axis in range(3)], axis=1)


def offline_estimates(recording, max_events: int) -> tuple[np.ndarray, np.ndarray]:
    """(t_ref ns, omega rad/s) of the node's default windows and estimator offline, every window
    thinned to ``max_events`` (as ``focus-ros estimate`` does); withheld windows left out."""
    calibration = recording.calibration
    estimator = AngularVelocityEstimator(calibration, real_time_settings(
        pixel_binning=coarse_grid_factor(calibration.width, calibration.height)))
    grid = estimator.grid_calibration
    windows = AdaptiveWindows(WindowRule(), grid.width * grid.height, max_events)
    stamps, omegas = [], []
    for window in windows.cut(recording.events):
        estimate = estimator.estimate(window.events)
        windows.after_estimate(window, planning_speed_rad_s(estimate))
        if not estimate.degenerate:
            stamps.append(estimate.t_ref_ns)
            omegas.append(estimate.angular_velocity)
    return np.array(stamps), np.array(omegas)


def rms_after_cold_start(recording, stamps: np.ndarray, omegas: np.ndarray) -> float:
    used = stamps >= int(recording.events.t[0]) + COLD_S * SECOND
    assert used.sum() >= 2, stamps
    return error_statistics(omegas[used], truth_at(recording, stamps[used]), 1.0).rms


def write_sensor_bag(path, recording, sensor: str) -> None:
    """The recording as its driver would record it: EventPackets of about 1 ms in the sensor's
    encoding, camera_info, IMU."""
    events = recording.events
    per_ms = max(1000, int(len(events) / (events.duration_s * 1e3)))
    bags.write_bag(path, recording, version=2, event_encoding=SENSORS[sensor].encoding,
                   events_per_message=per_ms, frame_id="camera")


def all_diagnostics_values(ros) -> list[dict]:
    """The angular velocity node's /diagnostics values, every report in the order received."""
    return [{kv.key: kv.value for kv in status.values} for array in ros.reports for status in array.status
            if status.name.startswith("angular_velocity_node")]


def diagnostics_values(ros) -> dict:
    """The angular velocity node's latest /diagnostics values ({} before its first report)."""
    return (all_diagnostics_values(ros) or [{}])[-1]


@needs_ros
@pytest.mark.parametrize("sensor", ["davis346", "dvxplorer", "imx636"])
def test_sensor_bag_through_the_node_with_its_defaults(ros, tmp_path, sensor):
    model = SENSORS[sensor]
    recording = recording_of(sensor)
    assert recording.calibration.width == model.width and recording.calibration.height == model.height
    bag = tmp_path / f"{sensor}_bag"
    write_sensor_bag(bag, recording, sensor)
    # the bag holds the sensor's camera_info and encoding
    assert bags.read_bag_calibration(bag) == recording.calibration
    first_events, first_info = next(bags.iter_bag_events(bag))
    assert len(first_events)
    reader = bags.open_bag(bag)
    try:
        assert bags.bag_topics(reader)["/dvs/events"] == "event_camera_msgs/msg/EventPacket"
    finally:
        reader.close()
    assert first_info.encoding == model.encoding, first_info

    # the bound, from the offline accuracy of the same windows at the smallest compute budget
    # the node may choose (its budget lies between WindowRule.min_events and .max_events)
    stamps, omegas = offline_estimates(recording, WindowRule.min_events)
    offline_rms = rms_after_cold_start(recording, stamps, omegas)
    bound_deg_s = 1.5 * offline_rms + 1.0

    estimates = ros.collect(TwistStamped, "/angular_velocity", depth=1000)
    node = ros.start("angular_velocity_node", "-r", "events:=/dvs/events", "-p", "queue_policy:=all",
                     "-p", "camera_info_timeout_s:=30.0", reliable=True)
    replay = ros.start("replay_node", "-p", f"bag:={bag}", "-p", "rate:=0.05", "-p", "wait_for_subscribers_s:=20.0",
                       wait_for_report=False)
    assert spin_until(ros.executor, lambda: not replay.alive(), 300.0), replay.log()
    spin_until(ros.executor, lambda: False, 3.0)  # the last estimates on their way
    assert estimates, node.log() + replay.log()
    published = np.array([e.header.stamp.sec * SECOND + e.header.stamp.nanosec for e in estimates])
    omega = np.array([[e.twist.angular.x, e.twist.angular.y, e.twist.angular.z] for e in estimates])
    node_rms = rms_after_cold_start(recording, published, omega)
    assert node_rms <= bound_deg_s, (sensor, node_rms, offline_rms, node.log())
    # an estimate every output period at least, and no more than the offline windows give: live,
    # windows overlap (a new one every half window, as offline) only as far as the estimator takes
    # a whole window within the compute budget's share of the stride; beyond that the stride grows
    # up to the output period (judged against event time, as for a camera: also at this slow replay)
    span_s = (int(recording.events.t[-1]) - int(recording.events.t[0])) / SECOND
    periods = int(span_s / WindowRule().output_period_s)
    assert 0.8 * periods <= len(estimates) <= len(stamps) + 2, (len(estimates), periods, len(stamps))
    values = diagnostics_values(ros)
    assert values.get("window_mode") == "auto", values
    assert int(values["pixel_binning"]) == coarse_grid_factor(model.width, model.height)
    # kept_share: the median share of each auto window's events kept (thinned to the compute
    # budget) over the windows estimated since the previous report; "nan" in a report with no
    # window since the previous one (as the last reports, after the bag). While the bag played,
    # reports had windows: a share each, of the events, so in (0, 1]
    shares = [float(v["kept_share"]) for v in all_diagnostics_values(ros) if v.get("kept_share", "nan") != "nan"]
    assert shares and all(0.0 < share <= 1.0 for share in shares), shares
    log = node.log()
    assert re.search(r"windows of [0-9.]+ ms every [0-9.]+ ms", log), log
    assert "Traceback" not in log and node.alive()


@needs_ros
def test_a_window_with_too_little_motion_is_withheld_and_counted(ros, tmp_path):
    """The same DAVIS346 bag, with min_motion_px above the motion its windows hold: nothing
    published, the windows counted as withheld for little motion, one warning."""
    recording = recording_of("davis346")
    bag = tmp_path / "davis346_bag"
    write_sensor_bag(bag, recording, "davis346")
    # the most image motion of any window: |omega| f over the longest window the rule allows
    fastest = float(np.linalg.norm(recording.imu.angular_velocity, axis=1).max())
    too_much = fastest * recording.calibration.fx * WindowRule.max_duration_s * 1.5
    estimates = ros.collect(TwistStamped, "/angular_velocity", depth=1000)
    node = ros.start("angular_velocity_node", "-r", "events:=/dvs/events", "-p", "queue_policy:=all",
                     "-p", "camera_info_timeout_s:=30.0", "-p", f"min_motion_px:={too_much}", reliable=True)
    replay = ros.start("replay_node", "-p", f"bag:={bag}", "-p", "rate:=0.1", "-p", "wait_for_subscribers_s:=20.0",
                       wait_for_report=False)
    assert spin_until(ros.executor, lambda: not replay.alive(), 300.0), replay.log()
    assert spin_until(ros.executor, lambda: int(diagnostics_values(ros).get("withheld_little_motion", 0)) >= 3,
                      10.0), node.log()
    values = diagnostics_values(ros)
    assert not estimates
    assert int(values["windows_processed"]) == 0
    # (withheld for little motion, the next window is planned longer: some then hold more
    # motion than the sensor could see, withheld as beyond_sensor)
    reasons = ("little_motion", "beyond_sensor")
    assert int(values["degenerate_windows"]) == sum(int(values[f"withheld_{reason}"]) for reason in reasons)
    log = node.log()
    assert log.count("estimate withheld (little_motion") == 1, log
    assert node.alive()


# ============================================================================ offline: the pieces the node uses

def test_coarse_grid_bins_see_the_bearing_of_their_centre():
    """A bin of the coarse grid looks along the sensor's bearing of the bin's centre, so the
    rad/s of a binned IWE mean what they meant (distortion included)."""
    calibration = sensor_model("imx636").calibration()
    coarse = coarse_grid_calibration(calibration, 2)
    assert (coarse.width, coarse.height) == (640, 360)
    bins = np.array([[0, 0], [639, 359], [100, 250], [320, 180]], dtype=np.float64)
    centres = 2 * bins + 0.5  # the centre of pixels 2u, 2u + 1
    np.testing.assert_allclose(coarse.undistort_pixels(bins), calibration.undistort_pixels(centres), atol=1e-9)
    events = Events.from_arrays([0, 1, 2, 1279], [0, 1, 3, 719], [0, 1, 2, 3], [1, 0, 1, 0])
    from focus_ros.iwe import events_on_coarse_grid
    binned = events_on_coarse_grid(events, 2)
    assert binned.x.tolist() == [0, 0, 1, 639] and binned.y.tolist() == [0, 0, 1, 359]
    assert coarse_grid_factor(1280, 720) == 2 and coarse_grid_factor(640, 480) == 1


def davis346_window():
    """A 20-ms window of the DAVIS346 slice (ground truth at its middle)."""
    recording = recording_of("davis346")
    t0 = int(recording.events.t[0]) + 100_000_000
    window = recording.events[(recording.events.t >= t0) & (recording.events.t < t0 + 20_000_000)]
    return recording, window


def test_binned_estimate_is_as_good_as_the_full_grid():
    recording, window = davis346_window()
    errors = {}
    for binning in (1, 2):
        estimate = AngularVelocityEstimator(recording.calibration,
                                            real_time_settings(pixel_binning=binning)).estimate(window)
        assert not estimate.degenerate, estimate.message
        truth = truth_at(recording, np.array([estimate.t_ref_ns]))[0]
        errors[binning] = np.rad2deg(np.linalg.norm(estimate.angular_velocity - truth))
    speed = np.rad2deg(np.linalg.norm(truth))
    assert errors[1] < 0.03 * speed and errors[2] < 0.05 * speed, (errors, speed)


def test_estimates_the_window_cannot_support_are_withheld_with_their_reason():
    recording, window = davis346_window()
    settings = real_time_settings()
    published = AngularVelocityEstimator(recording.calibration, settings).estimate(window)
    assert not published.degenerate and published.withheld == ""
    truth = truth_at(recording, np.array([published.t_ref_ns]))[0]
    motion_px = np.linalg.norm(truth) * recording.calibration.fx * window.duration_s
    assert motion_px > 3  # (the window moves the image by several px)
    # more motion asked than the window holds: too little motion
    little = AngularVelocityEstimator(recording.calibration, real_time_settings(min_motion_px=2 * motion_px))
    estimate = little.estimate(window)
    assert estimate.degenerate and estimate.withheld == "little_motion", estimate.message
    assert np.all(np.isnan(estimate.angular_velocity))
    # a sensor that could not see that much motion within the window
    small = AngularVelocityEstimator(recording.calibration, real_time_settings(
        max_motion_share=0.5 * motion_px / min(recording.calibration.width, recording.calibration.height)))
    assert small.estimate(window).withheld == "beyond_sensor"
    # noise without motion: a flat landscape, or no motion to speak of; never published
    rng = np.random.default_rng(0)
    count = len(window)
    noise = Events.from_arrays(rng.integers(0, 346, count), rng.integers(0, 260, count),
                               np.sort(rng.integers(int(window.t[0]), int(window.t[-1]), count)),
                               rng.integers(0, 2, count))
    estimate = AngularVelocityEstimator(recording.calibration, settings).estimate(noise)
    assert estimate.degenerate and estimate.withheld in ("flat_focus", "little_motion"), estimate


def test_thinned_window_estimates_close_to_the_whole_one():
    """Thinning to a third of the events moves the estimate little (the budget's premise)."""
    recording, window = davis346_window()
    whole = AngularVelocityEstimator(recording.calibration, real_time_settings()).estimate(window)
    thinned = AngularVelocityEstimator(recording.calibration, real_time_settings()).estimate(
        thin_events(window, len(window) // 3))
    truth = truth_at(recording, np.array([whole.t_ref_ns]))[0]
    assert np.linalg.norm(thinned.angular_velocity - truth) < 0.05 * np.linalg.norm(truth)


def test_focus_ros_estimate_uses_the_nodes_auto_windows(tmp_path):
    """`focus-ros estimate` on a DAVIS346 bag cuts the node's auto windows by default: its CSV
    holds the estimates of AdaptiveWindows + the node's estimator on the bag's events, to the
    digit (the windows do not depend on how the bag splits the stream into messages)."""
    import csv

    from focus_ros.cli import main

    recording = recording_of("davis346")
    bag = tmp_path / "davis346_bag"
    write_sensor_bag(bag, recording, "davis346")
    output = tmp_path / "omega.csv"
    assert main(["estimate", str(bag), "-o", str(output), "--max-window-events", "20000", "--quiet"]) == 0
    with open(output) as handle:
        rows = [row for row in csv.DictReader(handle) if row["degenerate"] == "0"]
    bag_events = Events.concatenate([events for events, _ in bags.iter_bag_events(bag)])
    stamps, omegas = offline_estimates(type(recording)(events=bag_events, calibration=recording.calibration),
                                       20000)
    assert len(rows) == len(stamps) >= 10
    np.testing.assert_allclose([float(row["t_ref"]) for row in rows], stamps / SECOND, atol=1e-9)
    np.testing.assert_allclose([[float(row[key]) for key in ("wx", "wy", "wz")] for row in rows], omegas, atol=1e-8)
