"""The optical-flow task's one loop (focus_ros.pipelines.optical_flow): how it plans windows, what an
estimate reports, its settings declared once, and that `focus-ros flow` and optical_flow_node, both
running it, give the same flows for the same bag."""

from __future__ import annotations

import argparse
import csv
from decimal import Decimal

import numpy as np
import pytest

from flow_scenes import translating_dots
from focus_ros.estimators.optical_flow import (REASONS, OpticalFlowEstimator, OpticalFlowSettings,
                                               default_window_events)
from focus_ros.events import Events
from focus_ros.pipelines.optical_flow import FlowCounts, FlowWindowSettings, OpticalFlowPipeline, events_per_window
from focus_ros.settings import declared
from focus_ros.windows import count_windows, duration_windows, thin_events

TRUE_FLOW = np.array([120.0, -90.0])


def _dots(count: int, duration_s: float, seed: int = 0, **scene) -> Events:
    """Exactly ``count`` events of dots translating at TRUE_FLOW over about ``duration_s`` (s)
    (``translating_dots`` drops the events beyond the sensor: it is asked for more, then cut)."""
    events = translating_dots(TRUE_FLOW, events=int(count * 1.5), duration_s=duration_s * 1.5, seed=seed, **scene)
    assert len(events) >= count
    return events[:count]


def _batches(events: Events, sizes=(7000, 1, 12345, 30000, 999)) -> list[Events]:
    """The events in batches of uneven sizes (as messages bring them), cycling through ``sizes``."""
    batches, start, index = [], 0, 0
    while start < len(events):
        size = sizes[index % len(sizes)]
        batches.append(events[start:start + size])
        start, index = start + size, index + 1
    return batches


def _same_events(first: Events, second: Events) -> bool:
    return all(np.array_equal(getattr(first, name), getattr(second, name)) for name in ("x", "y", "t", "p"))


# ----------------------------------------------------------------- window planning
def test_windows_are_the_sensors_default_count_whatever_the_batches():
    events = _dots(95_000, 0.06)
    pipeline = OpticalFlowPipeline(240, 180)
    assert pipeline.window_events == default_window_events(240, 180) == 30_000
    windows = [window for batch in _batches(events) for window in pipeline.feed(batch)]
    expected = list(count_windows([events], 30_000))
    assert len(windows) == len(expected) == 3  # the last 5,000 events: no complete window
    assert all(_same_events(window, cut) for window, cut in zip(windows, expected))


def test_windows_of_a_duration_start_at_the_first_event():
    events = _dots(50_000, 0.05)
    pipeline = OpticalFlowPipeline(240, 180, windows=FlowWindowSettings(window_events=5000, window_duration_s=0.012))
    assert pipeline.window_events == 0  # a duration wins over a number of events
    windows = [window for batch in _batches(events) for window in pipeline.feed(batch)]
    expected = list(duration_windows([events], 12_000_000))
    span_ns = int(events.t[-1]) - int(events.t[0])
    assert len(windows) == len(expected) == span_ns // 12_000_000 >= 3  # the whole 12-ms windows
    assert all(_same_events(window, cut) for window, cut in zip(windows, expected))


def test_windows_of_a_large_sensor_are_thinned_to_the_estimators_bound_as_they_are_cut():
    events = _dots(140_000, 0.1, seed=9, dots=6000, width=640, height=480)
    pipeline = OpticalFlowPipeline(640, 480, windows=FlowWindowSettings(window_events=60_000))
    # pixels binned 2 x 2 on a 640 px wide sensor: the bound is the default window of the 320x240 image
    assert pipeline.estimator.binning == 2 and pipeline.max_window_events == default_window_events(320, 240)
    windows = [window for batch in _batches(events) for window in pipeline.feed(batch)]
    expected = [thin_events(window, pipeline.max_window_events) for window in count_windows([events], 60_000)]
    assert len(windows) == 2 and all(len(window) == pipeline.max_window_events for window in windows)
    assert all(_same_events(window, thinned) for window, thinned in zip(windows, expected))
    unbounded = OpticalFlowPipeline(640, 480, OpticalFlowSettings(max_window_events=0),
                                    FlowWindowSettings(window_events=60_000))
    assert [len(window) for window in unbounded.feed(events)] == [60_000, 60_000]


def test_a_restart_forgets_the_window_being_cut_and_the_warm_start():
    events = _dots(65_000, 0.045)
    pipeline = OpticalFlowPipeline(240, 180)
    first = pipeline.feed(events[:40_000])
    assert len(first) == 1 and pipeline.estimator.previous is None
    pipeline.estimate(first[0])
    assert pipeline.estimator.previous is not None
    assert pipeline.feed(events[40_000:55_000]) == []  # 25,000 events of the next window held
    pipeline.reset()
    assert pipeline.estimator.previous is None
    # the held events are gone: the next window starts with the first event after the restart
    after = pipeline.feed(events[55_000:])
    assert after == []
    later = _dots(30_000, 0.02, seed=5)
    later = Events(later.x, later.y, later.t - int(later.t[0]) + int(events.t[-1]) + 1000, later.p)
    window = pipeline.feed(later)
    assert len(window) == 1 and _same_events(window[0][:10_000], events[55_000:])


def test_the_offline_loop_is_the_estimator_on_the_windows_in_order():
    """run() estimates each window as it is cut, warm-started from the previous one: the estimator
    fed the same windows in the same order gives the same flows to the bit."""
    events = _dots(75_000, 0.05, seed=2)
    settings = OpticalFlowSettings(min_events_per_patch=100)
    estimates = list(OpticalFlowPipeline(240, 180, settings).run(_batches(events)))
    estimator = OpticalFlowEstimator(240, 180, settings)
    expected = [estimator.estimate(window) for window in count_windows([events], 30_000)]
    assert len(estimates) == len(expected) == 2
    for estimate, reference in zip(estimates, expected):
        assert estimate.t_ref_ns == reference.t_ref_ns
        np.testing.assert_array_equal(estimate.flow, reference.flow)
        np.testing.assert_array_equal(estimate.confidence, reference.confidence)
    assert np.median(np.linalg.norm(estimates[-1].flow[estimates[-1].valid] - TRUE_FLOW, axis=1)) < 20.0


def test_events_per_window_say_the_size_in_use():
    assert events_per_window(FlowWindowSettings(), 240, 180) == 30_000
    assert events_per_window(FlowWindowSettings(), 346, 260) == default_window_events(346, 260)
    assert events_per_window(FlowWindowSettings(window_events=12_000), 240, 180) == 12_000
    assert events_per_window(FlowWindowSettings(window_duration_s=0.01), 240, 180) == 0


def test_what_a_window_reports_counts_the_patches_with_events():
    events = _dots(30_000, 0.02, seed=4)
    pipeline = OpticalFlowPipeline(240, 180)
    estimate = pipeline.estimate(pipeline.feed(events)[0])
    counts = pipeline.take(estimate)
    with_events = estimate.event_counts > 0
    assert counts == FlowCounts.of(estimate)
    assert counts.with_events == int(with_events.sum()) and sum(counts.reasons) == counts.with_events
    assert counts.valid == counts.reasons[0] == int(estimate.valid.sum()) > 0
    assert counts.valid_share == pytest.approx(float(estimate.valid[with_events].mean()))
    values = counts.diagnostic_values()
    assert values["patches_valid"] == counts.valid and values["valid_patch_share"] == counts.valid_share
    assert {key for key in values if key.startswith("patches_")} == \
        {"patches_borrowed", "patches_normal_flow", "patches_valid", "patches_few_events", "patches_flat",
         "patches_aperture", "patches_out_of_range", "patches_imprecise"}
    assert len(counts.reasons) == len(REASONS)


def test_unusable_settings_are_refused_when_the_pipeline_is_built():
    with pytest.raises(ValueError, match="unknown loss 'sharpness'"):
        OpticalFlowPipeline(240, 180, OpticalFlowSettings(loss="sharpness"))
    with pytest.raises(ValueError, match="exceeds the 240x180 sensor"):
        OpticalFlowPipeline(240, 180, OpticalFlowSettings(patch_size_px=500))


# ----------------------------------------------------------------- the settings, declared once
#: field -> (command-line option, ROS parameter): the names users know, kept as they were
FLOW_NAMES = {
    "loss": ("--loss", "loss"), "use_polarity": ("--polarity", "use_polarity"),
    "patch_size_px": ("--patch-size", "patch_size_px"), "patch_stride_px": ("--patch-stride", "patch_stride_px"),
    "margin_px": ("--margin", "margin_px"), "t_ref": ("--t-ref", "reference_time"),
    "blur_sigma_px": ("--blur-sigma", "blur_sigma_px"),
    "min_events_per_patch": ("--min-patch-events", "min_events_per_patch"),
    "borrowing": ("--no-borrowing", "borrowing"), "min_borrowing_events": ("--min-borrowing-events",
                                                                           "min_borrowing_events"),
    "smoothing": ("--no-smoothing", "smoothing"), "pixel_binning": ("--pixel-binning", "pixel_binning"),
    "max_window_events": ("--max-window-events", "max_window_events"),
    "min_confidence": ("--min-confidence", "min_confidence"),
    "min_motion_confidence": ("--min-motion-confidence", "min_motion_confidence"),
    "slow_motion_px": ("--slow-motion-px", "slow_motion_px"), "window_motion_px": ("--window-motion-px",
                                                                                   "window_motion_px"),
    "min_motion_px": ("--min-motion-px", "min_motion_px"), "min_relative_speed": ("--min-relative-speed",
                                                                                  "min_relative_speed"),
    "max_window_extension": ("--max-window-extension", "max_window_extension"),
    "extended_events_factor": ("--extended-events-factor", "extended_events_factor"),
    "min_aperture_ratio": ("--min-aperture-ratio", "min_aperture_ratio"),
    "pyramid_patch_sizes": (None, "pyramid_patch_sizes"),  # the command line's --pyramid takes "60,30"
    "window_events": ("--window-events", "window_events"),
    "window_duration_s": (None, "window_duration_s"),  # the command line's --window-ms takes ms
}


def test_the_option_and_parameter_names_are_those_users_know():
    items = [item for cls in (OpticalFlowSettings, FlowWindowSettings) for item in declared(cls)
             if item.option is not None or item.parameter is not None]
    assert {item.name: (item.option, item.parameter) for item in items} == FLOW_NAMES
    internal = [item for item in declared(OpticalFlowSettings) if item.option is None and item.parameter is None]
    assert all(item.declaration.help for item in items + internal)


def test_a_ros_integer_array_of_zero_means_no_pyramid():
    assert OpticalFlowSettings(pyramid_patch_sizes=[0]).pyramid_patch_sizes == ()
    assert OpticalFlowSettings(pyramid_patch_sizes=(60, 30)).pyramid_patch_sizes == (60, 30)
    assert OpticalFlowSettings().pyramid_patch_sizes == (45,)


def test_the_command_lines_options_make_the_settings():
    from focus_ros.cli.flow import add_arguments, settings_from_flow_arguments, window_settings_from_arguments

    parser = argparse.ArgumentParser(exit_on_error=False)
    add_arguments(parser)
    args = parser.parse_args(["seq", "-o", "out", "--no-borrowing", "--patch-stride", "10", "--pyramid", "60,30",
                              "--blur-sigma", "0.5", "--max-window-events", "0", "--t-ref", "end", "--polarity",
                              "--loss", "variance", "--window-ms", "12.5", "--min-patch-events", "80"])
    assert settings_from_flow_arguments(args) == OpticalFlowSettings(
        borrowing=False, patch_stride_px=10, pyramid_patch_sizes=(60, 30), blur_sigma_px=0.5, max_window_events=0,
        t_ref="end", use_polarity=True, loss="variance", min_events_per_patch=80)
    assert window_settings_from_arguments(args) == FlowWindowSettings(window_duration_s=0.0125)
    defaults = parser.parse_args(["seq", "-o", "out"])
    assert settings_from_flow_arguments(defaults) == OpticalFlowSettings()
    assert window_settings_from_arguments(defaults) == FlowWindowSettings()
    with pytest.raises(argparse.ArgumentError, match="must be 1 to 10000000, got 0"):
        parser.parse_args(["seq", "-o", "out", "--window-events", "0"])


# ----------------------------------------------------------------- the node and the command line
#: `focus-ros flow`'s options and the node's parameters for the same windows: 12-ms windows (the
#: duration path), each thinned to 12,000 events (the bag's hold about 17,000)
COMMAND_OPTIONS = ("--window-ms", "12", "--max-window-events", "12000")
NODE_PARAMETERS = ("-p", "window_duration_s:=0.012", "-p", "max_window_events:=12000")


def test_the_node_and_the_command_line_give_the_flows_of_the_one_pipeline_on_a_bag(tmp_path, monkeypatch):
    """A simulated rotation written as a ROS 2 bag; `focus-ros flow` on it (another process) and
    optical_flow_node with the bag replayed into it (`focus-ros replay`, queue_policy all: every
    window, in order), both with 12-ms windows thinned to 12,000 events. The node's estimator runs in
    its worker process on the windows its pipeline cut from the messages; the command's inline on the
    windows cut from the bag read in chunks. Same windows in the same order through the same
    estimator: the node's flows equal the pipeline's run in this process to the bit (float32 both),
    and its stamps its reference times exactly. flow.csv holds the command's flows with 6 decimals of
    px/s and its t_ref with 9 of s (exact ns): compared within half a unit of the last decimal (5e-7
    px/s, plus float32's relative 6e-8 on the node's side)."""
    pytest.importorskip("rclpy")
    pytest.importorskip("dvs_msgs.msg", reason="interface packages not built: run `make setup`")
    import subprocess

    from sensor_msgs.msg import Image

    from conftest import REPOSITORY_ROOT
    from focus_ros.camera import Calibration
    from focus_ros.sources.bags import write_bag
    from focus_ros.sources.scenes import PanoramaScene
    from focus_ros.sources.sequence import iter_sequence_events
    from focus_ros.sources.simulator import ConstantAngularVelocity, EventSimulator, Trajectory
    from ros_harness import NodeProcess, executable, node_session, spin_until

    recording = EventSimulator(PanoramaScene.generate(1, shapes_per_megapixel=600),
                               Trajectory(ConstantAngularVelocity((0.5, -1.0, 2.0)), 0.06),
                               Calibration.davis240c(), seed=1).simulate()
    bag = tmp_path / "rotation.bag2"
    write_bag(bag, recording, version=2, storage="mcap", events_per_message=5000)
    pipeline = OpticalFlowPipeline(240, 180, OpticalFlowSettings(max_window_events=12_000),
                                   FlowWindowSettings(window_duration_s=0.012))
    expected = list(pipeline.run(iter_sequence_events(bag)))
    assert len(expected) >= 4 and sum(int(estimate.valid.sum()) for estimate in expected) > 200

    output = tmp_path / "offline"
    result = subprocess.run([executable("focus-ros"), "flow", str(bag), "-o", str(output), "--picture-every", "0",
                             "--quiet", *COMMAND_OPTIONS], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    with open(output / "flow.csv") as handle:
        rows = list(csv.DictReader(handle))
    patches = expected[0].grid.count
    assert len(rows) == len(expected) * patches
    for index, estimate in enumerate(expected):
        window_rows = rows[index * patches:(index + 1) * patches]
        assert {int(Decimal(row["t_ref"]) * 10**9) for row in window_rows} == {estimate.t_ref_ns}
        command_flow = np.array([[float(row["vx"]), float(row["vy"])] for row in window_rows])
        np.testing.assert_array_equal(np.isnan(command_flow), np.isnan(estimate.flow))
        np.testing.assert_allclose(command_flow, estimate.flow, rtol=0, atol=5e-7)

    with node_session("flow_pipeline_client", monkeypatch, tmp_path) as ros:
        flows = ros.collect(Image, "/optical_flow", 50)
        process = ros.start("optical_flow_node", "-r", "events:=/dvs/events", "-p", "queue_policy:=all",
                            *NODE_PARAMETERS, params_file=REPOSITORY_ROOT / "config" / "optical_flow.yaml",
                            reliable=True, log_name="optical_flow_node")
        replay = NodeProcess([executable("focus-ros"), "replay", str(bag), "--rate", "0.5", "--topics", "/dvs/events",
                              "/dvs/camera_info"], {**ros.env, "PYTHONUNBUFFERED": "1"}, tmp_path / "replay.log")
        spin_until(ros.executor, lambda: not replay.alive(), 120.0)
        assert replay.process.wait(timeout=1) == 0, replay.log()
        assert spin_until(ros.executor, lambda: len(flows) >= len(expected), 90.0), (len(flows), process.log())
        ros.spin(0.5)
    assert len(flows) == len(expected) and "Traceback" not in process.log()
    for message, estimate in zip(flows, expected):
        assert message.header.stamp.sec * 1_000_000_000 + message.header.stamp.nanosec == estimate.t_ref_ns
        flow = np.frombuffer(bytes(message.data), dtype="<f4").reshape(estimate.grid.rows, estimate.grid.columns, 2)
        np.testing.assert_array_equal(flow, estimate.flow_image())
