"""The angular velocity task's one loop (focus_ros.pipelines.angular_velocity): how it plans windows
from each estimate, counts what it withholds, and that the node and the command line, both built
on it, give the same outputs for the same input.

The planning tests take estimates made for the purpose (a WindowEstimate says a speed, or why it
was withheld): what is tested is the feedback, not the estimator. The last test runs the real
node on a replayed bag and the real command line on the same bag."""

from __future__ import annotations

import csv
import dataclasses
from argparse import Namespace

import numpy as np
import pytest

from focus_ros.camera import Calibration
from focus_ros.estimators.angular_velocity import WindowEstimate, real_time_settings
from focus_ros.events import Events
from focus_ros.settings import declared
from focus_ros.pipelines.angular_velocity import (WINDOW_LOG_PERIOD_S, AngularVelocityPipeline, WindowSettings,
                                                  real_time_defaults)
from focus_ros.windows import AdaptiveWindows, WindowRule

CALIBRATION = Calibration.davis240c()
PIXELS = CALIBRATION.width * CALIBRATION.height


def uniform_events(rate_hz: float, duration_s: float, start_ns: int = 1_000_000_000, seed: int = 0) -> Events:
    """Events spread over the DAVIS240C at ``rate_hz`` events/s for ``duration_s`` s."""
    rng = np.random.default_rng(seed)
    count = int(rate_hz * duration_s)
    t = np.sort(rng.integers(0, int(duration_s * 1e9), count)) + start_ns
    return Events.from_arrays(rng.integers(0, CALIBRATION.width, count), rng.integers(0, CALIBRATION.height, count),
                              t, rng.integers(0, 2, count))


def estimate_of(speed_rad_s: float, withheld: str = "", iterations: int = 7) -> WindowEstimate:
    """An estimate of |omega| = speed_rad_s about z, or withheld for ``withheld``."""
    omega = np.array([0.0, 0.0, speed_rad_s]) if not withheld else np.full(3, np.nan)
    return WindowEstimate(0, omega, 2.0, 1.0, 1.0, np.zeros(3), iterations, 10, 100, 0,
                          degenerate=bool(withheld), withheld=withheld, message=withheld)


def auto_pipeline(live: bool = False, **windows) -> AngularVelocityPipeline:
    return AngularVelocityPipeline(CALIBRATION, real_time_settings(pixel_binning=0), WindowSettings(**windows),
                                   live=live)


def test_the_next_auto_window_holds_the_rule_s_rotation_at_the_estimate_s_speed():
    pipeline = auto_pipeline()
    (job, *_) = list(pipeline.cut(uniform_events(1e6, 0.2)))
    assert isinstance(pipeline.windows, AdaptiveWindows) and job.cut is not None
    rate_hz = job.cut.raw_count / job.duration_s
    outcome = pipeline.take(job, estimate_of(2.0))
    assert outcome.publish and not outcome.withheld
    rule = WindowRule()
    assert pipeline.windows.duration_ns == rule.duration_ns(PIXELS, 2.0, rate_hz)
    # 3 deg at 2 rad/s: 26 ms, longer than the output period: windows overlap, one every 20 ms
    assert pipeline.windows.duration_ns == pytest.approx(np.deg2rad(3.0) / 2.0 * 1e9, rel=1e-6)
    assert pipeline.windows.stride_ns == 20_000_000
    # the gap beyond which the windows restart: gap_reset_windows window durations
    assert outcome.gap_limit_s == pytest.approx(10.0 * job.duration_s)


def test_withheld_estimates_plan_as_no_motion_or_as_unknown_and_are_counted_by_reason():
    pipeline = auto_pipeline()
    jobs = pipeline.cut(uniform_events(1e6, 0.5))
    little = pipeline.take(next(jobs), estimate_of(0.0, withheld="little_motion"))
    assert not little.publish and little.withheld == "little_motion"
    assert pipeline.windows.angular_speed_rad_s == 0.0  # the next window longer: the longest
    assert pipeline.windows.duration_ns == int(WindowRule().max_duration_s * 1e9)
    flat = pipeline.take(next(jobs), estimate_of(0.0, withheld="flat_focus"))
    assert not flat.publish and pipeline.windows.angular_speed_rad_s is None  # unknown: as at a start
    published = pipeline.take(next(jobs), estimate_of(3.0, iterations=5))
    assert published.publish
    pipeline.published(published.estimate)
    counts = pipeline.counts
    assert counts.withheld == {"little_motion": 1, "flat_focus": 1} and counts.degenerate_windows == 2
    assert counts.windows_processed == 1 and counts.last_iterations == 5 and counts.last_focus_gain == 2.0


def test_live_windows_are_cut_with_the_plan_known_offline_ones_each_after_the_previous_estimate():
    """One batch that completes many windows: the node's (feed) are all planned from the estimate known
    when the batch came; offline (cut) each is planned after the previous window's estimate."""
    events = uniform_events(2e6, 0.3)  # enough events per IWE pixel in a window of any length below
    live = auto_pipeline(live=True, max_window_events=150_000)
    jobs = live.feed(events)
    assert len(jobs) > 3 and len({job.cut.end_ns - job.cut.start_ns for job in jobs[1:]}) == 1
    offline = auto_pipeline()
    durations = []
    for job in offline.cut(events):
        durations.append(job.cut.end_ns - job.cut.start_ns)
        offline.take(job, estimate_of(4.0))
    # 3 deg at 4 rad/s: 13 ms windows from the second on
    assert len(set(durations[1:])) == 1 and durations[1] == pytest.approx(np.deg2rad(3.0) / 4.0 * 1e9, abs=2)


def test_the_compute_budget_follows_the_estimator_s_time_live_only():
    live = auto_pipeline(live=True)
    budget = live.windows.max_events
    for job in live.feed(uniform_events(2e6, 0.2))[:3]:
        live.take(job, estimate_of(2.0), estimator_s=1.0)  # far slower than a window's share of 20 ms
    assert live.windows.max_events < budget
    offline = auto_pipeline()
    assert offline.windows.budget is None and offline.windows.max_events == WindowRule().max_events


def test_the_windows_are_said_when_their_length_changed_twofold_at_most_every_period():
    pipeline = auto_pipeline()
    jobs = pipeline.cut(uniform_events(1e6, 1.0))
    assert pipeline.take(next(jobs), estimate_of(2.0), now_s=100.0).windows_changed  # the first: said
    assert not pipeline.take(next(jobs), estimate_of(2.2), now_s=101.0).windows_changed  # about the same
    assert not pipeline.take(next(jobs), estimate_of(8.0), now_s=102.0).windows_changed  # 4x, but too soon
    assert pipeline.take(next(jobs), estimate_of(8.0), now_s=100.0 + WINDOW_LOG_PERIOD_S).windows_changed


def test_event_and_duration_windows_and_what_the_diagnostics_say():
    events = uniform_events(1e6, 0.1)
    counted = auto_pipeline(window_events=20_000, window_stride_events=15_000)
    jobs = counted.feed(events)
    assert [len(job.events) for job in jobs] == [20_000] * len(jobs) and len(jobs) == (100_000 - 20_000) // 15_000 + 1
    assert jobs[1].events.t[0] == events.t[15_000] and jobs[0].cut is None
    assert counted.window_values() == {"window_mode": "events", "pixel_binning": 1}
    assert counted.description() == "20000 events, stride 15000"
    timed = auto_pipeline(window_duration_s=0.01)
    assert len(timed.feed(events)) == 9 and timed.window_settings.mode == "duration"
    auto = auto_pipeline(live=True)
    values = auto.window_values()
    assert values["window_mode"] == "auto" and values["max_window_events_now"] == auto.windows.max_events
    assert "the compute budget" in auto.description()


def test_the_node_and_command_line_defaults_are_the_real_time_settings():
    defaults = real_time_defaults()
    settings = real_time_settings()
    assert (defaults.optimizer, defaults.warm_start) == ("bfgs", "extrapolate")
    assert defaults.value_tolerance == settings.stopping_rules.value_tolerance == 1e-5
    assert defaults.pixel_binning == 0  # auto: 2 on a 1280x720 sensor
    # the node's parameters and the options default to those values (declared() of the instance), the
    # same estimator settings otherwise
    values = {item.name: item.default for item in declared(defaults)}
    assert (values["optimizer"], values["value_tolerance"], values["pixel_binning"]) == ("bfgs", 1e-5, 0)
    assert defaults.stopping_rules == settings.stopping_rules
    assert dataclasses.replace(defaults, pixel_binning=settings.pixel_binning).__dict__ == settings.__dict__ | {
        name: getattr(defaults, name) for name in ("max_iterations", "gradient_tolerance", "value_tolerance")}
    big = Calibration(1280, 720, 1000.0, 1000.0, 640.0, 360.0)
    assert AngularVelocityPipeline(big, real_time_settings(pixel_binning=0)).settings.pixel_binning == 2


# ----------------------------------------------------------------------------- node == command line

def test_the_node_and_the_command_line_give_the_same_estimates_for_the_same_bag(tmp_path, monkeypatch):
    """A simulated DAVIS240C rotation as a ROS 2 bag: ``focus-ros estimate`` on it, and
    ``angular_velocity_node`` (the demo's params file: windows of 30,000 events; queue_policy all)
    with the bag replayed at the estimator's pace. Both go through the one pipeline with the same
    windows and settings, and a warm start is deterministic given the same windows in the same
    order: the same window times and angular velocities, to the CSV's 9 decimals (rad/s).
    Fixed windows, not auto: the node's auto windows are planned from the estimate known when a
    message completes them (asynchronous), the command line's each from the previous estimate."""
    pytest.importorskip("rclpy")
    pytest.importorskip("dvs_msgs.msg", reason="interface packages not built: run `make setup`")
    from ros_harness import ros_environment

    from focus_ros.cli import main
    from focus_ros.ros.demos import rotation
    from focus_ros.sources.bags import write_bag
    from focus_ros.sources.simulator import simulate_preset

    monkeypatch.setenv("ROS_DOMAIN_ID", ros_environment()["ROS_DOMAIN_ID"])
    recording = simulate_preset("rotation_short", duration_s=0.4, seed=1)
    bag = tmp_path / "rotation.mcap_bag"
    write_bag(bag, recording, version=2, storage="mcap")
    output = tmp_path / "omega.csv"
    assert main(["estimate", str(bag), "-o", str(output), "--window-events", "30000", "--quiet"]) == 0
    with open(output) as handle:
        rows = [row for row in csv.DictReader(handle) if row["degenerate"] == "0"]
    cli_t_ns = np.array([round(float(row["t_ref"]) * 1e9) for row in rows])
    cli_omega = np.array([[float(row[key]) for key in ("wx", "wy", "wz")] for row in rows])
    assert len(rows) >= 10

    node_t_ns, node_omega, node_log = rotation.run_node_and_replay(Namespace(output=tmp_path, loss="variance"), bag)
    assert len(node_t_ns) == len(cli_t_ns), node_log.read_text()[-3000:]
    # t_ref printed with 9 decimals of a second: exact to the nanosecond up to float rounding
    np.testing.assert_allclose(node_t_ns, cli_t_ns, atol=2)
    np.testing.assert_allclose(node_omega, cli_omega, atol=1e-8)
