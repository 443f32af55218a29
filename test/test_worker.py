"""The estimator in its own process (focus_ros.runtime: EstimatorProcess, EstimatorRunner) against
the estimator in this process, on the same windows; a worker that dies is reported and restarted."""

from __future__ import annotations

import os
import re
import signal
import threading
import time

import numpy as np
import pytest

from conftest import slice_folder
from focus_ros.camera import Calibration
from focus_ros.estimators.angular_velocity import AngularVelocityEstimator, real_time_settings
from focus_ros.runtime import (EstimatorProcess, EstimatorRunner, InlineEstimator, Job, WorkerDied, format_cpu_list,
                               parse_cpu_list)
from focus_ros.events import Events
from focus_ros.sources.ecd import read_ecd_folder


@pytest.fixture(scope="module")
def windows() -> list[Events]:
    """Consecutive 7,500-event windows of the real boxes_rotation slice (4 windows)."""
    events = read_ecd_folder(slice_folder("boxes_rotation")).events
    return [events[start:start + 7500] for start in range(0, 30000, 7500)]


@pytest.fixture
def worker():
    process = EstimatorProcess(Calibration.davis240c(), real_time_settings(), capacity_events=5000)
    yield process
    process.close()


def test_process_gives_the_estimates_of_the_estimator_in_this_process(worker, windows):
    """Same code on the same events, warm start carried from window to window: the same
    floating-point operations in the same order, so the estimates must be identical (any
    difference would mean events or state lost in the transfer). The windows are larger
    than the initial shared block: it grows."""
    local = AngularVelocityEstimator(Calibration.davis240c(), real_time_settings())
    inline = InlineEstimator(Calibration.davis240c(), real_time_settings())
    for window in windows:
        expected = local.estimate(window, covariance=True)  # a job without an extra gets the covariance
        remote = worker.estimate(window)
        in_thread = inline.estimate(window)
        for result in (remote, in_thread):
            np.testing.assert_array_equal(result.estimate.angular_velocity, expected.angular_velocity)
            assert result.estimate.t_ref_ns == expected.t_ref_ns
            assert result.estimate.evaluations == expected.evaluations
            assert result.estimator_s > 0
    # the warm start carries over a configuration change; reset forgets it (as in this process)
    settings = real_time_settings(loss="mean_square")
    worker.configure(Calibration.davis240c(), settings)
    inline.configure(Calibration.davis240c(), settings)
    np.testing.assert_array_equal(worker.estimate(windows[0]).estimate.initial,
                                  inline.estimate(windows[0]).estimate.initial)
    worker.reset()
    assert not worker.estimate(windows[1]).estimate.initial.any()


def test_images_come_back_when_asked(worker, windows):
    """The IWEs at omega = 0 and at the estimate, as the objective in this process draws them."""
    result = worker.estimate(windows[0], images=True)
    local = AngularVelocityEstimator(Calibration.davis240c(), real_time_settings())
    omega = local.estimate(windows[0]).angular_velocity
    before, after = result.images
    np.testing.assert_array_equal(before, local.objective.image(np.zeros(3)).image)
    np.testing.assert_array_equal(after, local.objective.image(omega).image)
    assert after.max() > before.max()  # compensated: sharper
    assert worker.estimate(windows[1]).images is None


def test_bad_settings_are_refused_in_the_caller(worker):
    with pytest.raises(ValueError, match="loss"):
        worker.configure(Calibration.davis240c(), real_time_settings(loss="sharpness"))
    assert worker.alive()


def test_a_killed_worker_is_reported_and_restarted(worker, windows):
    worker.estimate(windows[0])
    first_pid = worker.pid
    os.kill(first_pid, signal.SIGKILL)
    with pytest.raises(WorkerDied, match=f"pid {first_pid}.*signal 9"):
        worker.estimate(windows[1])
    worker.restart()
    assert worker.restarts == 1 and worker.pid != first_pid and worker.alive()
    restarted = worker.estimate(windows[1]).estimate
    fresh = AngularVelocityEstimator(Calibration.davis240c(), real_time_settings()).estimate(windows[1])
    np.testing.assert_array_equal(restarted.angular_velocity, fresh.angular_velocity)  # warm start reset


@pytest.mark.parametrize("text, cpus", [("", set()), (" ", set()), ("0", {0}), ("0,0", {0}), ("0-0", {0}),
                                        ("0, 0", {0})])
def test_cpu_lists_are_read_in_taskset_syntax(text, cpus):
    assert parse_cpu_list(text) == cpus


def test_cpu_ranges_and_lists_of_this_machine():
    available = sorted(os.sched_getaffinity(0))
    assert parse_cpu_list(",".join(map(str, reversed(available)))) == set(available)
    neighbours = [cpu for cpu in available if cpu + 1 in available]
    if neighbours:
        assert parse_cpu_list(f"{neighbours[0]}-{neighbours[0] + 1}") == {neighbours[0], neighbours[0] + 1}
    assert format_cpu_list({0, 1, 2, 5, 7, 8}) == "0-2,5,7-8" and format_cpu_list([]) == ""


@pytest.mark.parametrize("text, words", [("one", "'one' is not a CPU number"), ("3-1", "'3-1' is not a CPU number"),
                                         ("-1", "'-1' is not"), ("0,,1", "'' is not"), ("1.5", "'1.5' is not"),
                                         ("4096", "CPU 4096 is not on this machine (CPUs 0-")])
def test_unusable_cpu_lists_are_refused_naming_the_part(text, words):
    with pytest.raises(ValueError, match=re.escape(words)):
        parse_cpu_list(text)


def test_a_pinned_worker_runs_on_its_cpu_and_keeps_it_after_a_restart(windows):
    """``cpus``: the worker process may run only there (the OS's own answer), from its start
    and again after a restart; the estimates are those of the estimator in this process."""
    cpu = max(os.sched_getaffinity(0))
    process = EstimatorProcess(Calibration.davis240c(), real_time_settings(), capacity_events=5000, cpus={cpu})
    try:
        assert os.sched_getaffinity(process.pid) == {cpu} and process.cpus_in_use() == {cpu}
        first = process.estimate(windows[0]).estimate
        expected = AngularVelocityEstimator(Calibration.davis240c(), real_time_settings()).estimate(windows[0])
        np.testing.assert_array_equal(first.angular_velocity, expected.angular_velocity)
        os.kill(process.pid, signal.SIGKILL)
        with pytest.raises(WorkerDied):
            process.estimate(windows[1])
        process.restart()
        assert os.sched_getaffinity(process.pid) == {cpu}
    finally:
        process.close()
    assert process.cpus_in_use() == set()


def test_cpus_the_os_refuses_leave_the_worker_unpinned_and_say_why(windows):
    """When the OS refuses the pinning (here CPU 1000, which this machine lacks, past the
    check of parse_cpu_list; in a container, CPUs outside its cpuset), the worker still
    starts, runs where the parent may run, estimates as before, and ``pinning_error`` names
    the CPU and the OS's reason."""
    process = EstimatorProcess(Calibration.davis240c(), real_time_settings(), capacity_events=5000,
                               cpus=frozenset({1000}))
    try:
        assert "could not pin the estimator process to CPU 1000 (Invalid argument)" in process.pinning_error
        assert process.cpus_in_use() == frozenset(os.sched_getaffinity(0))
        expected = AngularVelocityEstimator(Calibration.davis240c(), real_time_settings()).estimate(windows[0])
        np.testing.assert_array_equal(process.estimate(windows[0]).estimate.angular_velocity,
                                      expected.angular_velocity)
    finally:
        process.close()


def test_a_cpu_list_for_an_estimator_in_a_thread_is_refused():
    log = _Log()
    with pytest.raises(ValueError, match="needs the estimator in a process of its own"):
        EstimatorRunner("angular_velocity", Calibration.davis240c(), real_time_settings(), in_process=False,
                        on_result=lambda job, result: None, logger=log, warn_once=log.warn_once, cpus="0")


def test_pipelined_windows_come_back_in_order_and_stale_ones_are_skipped(worker, windows):
    """submit() queues windows without waiting; collect() returns them in order. Not
    skippable: every window estimated, as one after the other in this process. Skippable: a
    queued window with a newer one behind it is skipped (the node's queue_policy newest)."""
    local = AngularVelocityEstimator(Calibration.davis240c(), real_time_settings())
    expected = [local.estimate(window).angular_velocity for window in windows[:3]]
    for window in windows[:3]:
        assert worker.can_submit()
        worker.submit(window)
    assert worker.in_flight == 3 and not worker.can_submit()
    results = [worker.collect() for _ in range(3)]
    for result, omega in zip(results, expected):
        np.testing.assert_array_equal(result.estimate.angular_velocity, omega)
    assert worker.in_flight == 0 and worker.collect(timeout_s=0.1) is None
    worker.reset()
    # the worker busy with a whole 30,000-event window (milliseconds), two windows sent back to
    # back behind it (a submit copies 7,500 events: well under a millisecond)
    whole = Events.concatenate(windows)
    worker.submit(whole)
    worker.submit(windows[0], skippable=True)
    worker.submit(windows[1], skippable=True)
    results = [worker.collect() for _ in range(3)]
    assert [result.estimate is None for result in results] == [False, True, False]


def test_flow_and_depth_kinds_give_in_the_process_what_their_estimators_give_here():
    """The other two kinds through the same process: optical flow (windows, warm start carried)
    and depth (a keyframe's events through the shared slots, grown from 5,000 events to the
    keyframe's; its poses pickled beside them). Same code, same inputs: identical results,
    pictures included."""
    from flow_scenes import translating_dots

    from focus_ros.depth.pictures import depth_picture, event_image
    from focus_ros.estimators.depth import DepthEstimator, DepthSettings
    from focus_ros.estimators.optical_flow import OpticalFlowEstimator, OpticalFlowSettings
    from focus_ros.flow.pictures import compensated_image, flow_arrows_image
    from focus_ros.poses import Trajectory
    from focus_ros.sources.simulator import simulate_preset

    calibration = Calibration.davis240c()
    settings = OpticalFlowSettings(min_events_per_patch=100)
    events = translating_dots(np.array([120.0, -90.0]), dots=1500, events=75_000, duration_s=0.04)
    windows = [events[:30_000], events[30_000:60_000]]
    local = OpticalFlowEstimator(calibration.width, calibration.height, settings)
    flow = EstimatorProcess(calibration, settings, kind="optical_flow", capacity_events=5000)
    try:
        for index, window in enumerate(windows):
            expected = local.estimate(window)
            result = flow.estimate(window, images=index == 1)
            np.testing.assert_array_equal(result.estimate.flow, expected.flow)
            np.testing.assert_array_equal(result.estimate.reason, expected.reason)
        assert np.isfinite(expected.flow).sum() > 100
        np.testing.assert_array_equal(result.images[0], flow_arrows_image(compensated_image(local, expected),
                                                                          expected))
    finally:
        flow.close()

    recording = simulate_preset("slider", duration_s=0.4, seed=2)
    trajectory = Trajectory.from_poses(recording.poses)
    depth_settings = DepthSettings()
    local = DepthEstimator(recording.calibration, depth_settings)
    expected = local.estimate(recording.events, trajectory)
    assert expected.point_count > 1000 and len(recording.events) > 100_000
    depth = EstimatorProcess(recording.calibration, depth_settings, kind="depth", capacity_events=5000)
    try:
        result = depth.estimate(recording.events, images=True, extra=trajectory)
    finally:
        depth.close()
    keyframe = result.estimate
    assert keyframe.t_ref_ns == expected.t_ref_ns and keyframe.event_count == len(recording.events)
    np.testing.assert_array_equal(keyframe.depth_m, expected.depth_m)
    np.testing.assert_array_equal(keyframe.points_world, expected.points_world)
    np.testing.assert_array_equal(result.images[0], depth_picture(expected.depth_m, event_image(local.dsi.votes),
                                                                  *expected.z_range_m))


def test_unknown_kind_is_refused_with_the_known_ones():
    with pytest.raises(ValueError, match="kind 'sharpness' is not one of: angular_velocity, optical_flow, depth"):
        InlineEstimator(Calibration.davis240c(), real_time_settings(), kind="sharpness")


def wait_until(condition, timeout_s: float = 60.0) -> None:
    """Sleep in steps of 50 ms until condition() is true or timeout_s (s) passed (the asserts after it say which)."""
    deadline = time.monotonic() + timeout_s
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.05)


class _Log:
    """A logger and a warn_once that keep what they are told (the node's stand-ins for text only)."""

    def __init__(self):
        self.lines = []

    def info(self, text):
        self.lines.append(("info", text))

    def warning(self, text):
        self.lines.append(("warning", text))

    def error(self, text):
        self.lines.append(("error", text))

    def warn_once(self, key, text):
        self.lines.append(("once:" + key, text))


@pytest.mark.parametrize("in_process", [True, False])
def test_runner_queues_counts_and_survives_a_failing_job(windows, in_process):
    """EstimatorRunner as the nodes use it: jobs wait until configured; with a queue of one,
    windows pushed faster than estimated are dropped (counted, health "warn" once most are);
    each result comes back with its job's context, in order, equal to the estimator here; a job
    that raises is counted as failed, said once, and the next job is estimated."""
    log = _Log()
    results = []

    def on_result(job, result):
        results.append((job.context, result.estimate))

    runner = EstimatorRunner("angular_velocity", Calibration.davis240c(), real_time_settings(), in_process=in_process,
                             on_result=on_result, logger=log, warn_once=log.warn_once, max_pending=lambda: 1,
                             capacity_events=5000)
    try:
        for index, window in enumerate(windows):   # before the configuration: only the newest waits
            runner.push(Job(window, context=index, received_s=time.monotonic()))
        assert runner.counts["dropped"] == 3 and not results
        runner.configure(Calibration.davis240c(), real_time_settings())
        wait_until(lambda: runner.counts["estimated"] >= 1)   # counted once on_result has returned
        assert [context for context, _ in results] == [3]
        expected = AngularVelocityEstimator(Calibration.davis240c(), real_time_settings()).estimate(windows[3])
        np.testing.assert_array_equal(results[0][1].angular_velocity, expected.angular_velocity)
        assert runner.health() == ("warn", "falling behind: most windows dropped")
        values = runner.diagnostic_values()
        assert values["windows_completed"] == 4 and values["windows_dropped"] == 3
        assert values["processed_ratio"] == 0.25 and values["processing_ms_per_window"] > 0
        assert (values["estimator_process_pid"] > 0) == in_process
        # a job the estimator refuses (events outside the sensor): failed, said once, the runner goes on
        bad = Events(np.full(1000, 60000, np.uint16), windows[0].y[:1000], windows[0].t[:1000], windows[0].p[:1000])
        runner.push(Job(bad, context="bad", received_s=time.monotonic()))
        runner.push(Job(windows[1], context="good", received_s=time.monotonic()))
        wait_until(lambda: len(results) >= 2)
    finally:
        runner.stop()
    assert [context for context, _ in results] == [3, "good"]
    assert runner.counts["failed"] == 1
    # (a first start with an empty Numba cache also says, once, that it compiles)
    assert [kind for kind, _ in log.lines if kind.startswith("once:") and kind != "once:compiling"] == [
        "once:estimate_failed"]


def test_a_reset_before_any_configuration_is_no_failure(windows):
    """A stream restart said before the calibration is known (nothing estimated yet, no warm
    start to forget) is not an estimation failure: nothing is counted or warned, and the first
    window after the configuration is estimated."""
    log = _Log()
    results = []
    runner = EstimatorRunner("angular_velocity", Calibration.davis240c(), real_time_settings(), in_process=False,
                             on_result=lambda job, result: results.append(job.context), logger=log,
                             warn_once=log.warn_once)
    try:
        runner.reset()
        time.sleep(1.0)   # the runner's thread takes the reset
        runner.configure(Calibration.davis240c(), real_time_settings())
        runner.push(Job(windows[0], context="first", received_s=time.monotonic()))
        wait_until(lambda: results)
    finally:
        runner.stop()
    assert results == ["first"]
    assert runner.counts["failed"] == 0
    assert [line for line in log.lines if line[0] != "info"] == []


def test_forgetting_the_warm_start_keeps_the_waiting_jobs(windows):
    """forget_warm_start (the angular velocity node's, after an estimate it withheld as a runaway):
    the next job starts cold, as a new estimator would start, and the jobs waiting stay (reset, a
    restart of the stream, drops them)."""
    log = _Log()
    results = []
    runner = EstimatorRunner("angular_velocity", Calibration.davis240c(), real_time_settings(), in_process=False,
                             on_result=lambda job, result: results.append((job.context, result.estimate)),
                             logger=log, warn_once=log.warn_once, max_pending=lambda: 4)
    try:
        runner.configure(Calibration.davis240c(), real_time_settings())
        runner.push(Job(windows[0], context=0, received_s=time.monotonic()))
        wait_until(lambda: len(results) == 1)
        runner.forget_warm_start()
        for index in (1, 2):
            runner.push(Job(windows[index], context=index, received_s=time.monotonic()))
        wait_until(lambda: len(results) == 3)
    finally:
        runner.stop()
    assert [context for context, _ in results] == [0, 1, 2] and runner.counts["dropped"] == 0
    warm = AngularVelocityEstimator(Calibration.davis240c(), real_time_settings())
    warm.estimate(windows[0])
    cold = AngularVelocityEstimator(Calibration.davis240c(), real_time_settings()).estimate(windows[1])
    np.testing.assert_array_equal(results[1][1].angular_velocity, cold.angular_velocity)
    assert not np.array_equal(warm.estimate(windows[1]).angular_velocity, cold.angular_velocity)


def test_a_worker_killed_while_no_job_flows_is_noticed_and_restarted_at_once(windows):
    """A worker killed between jobs (nothing submitted, nothing in flight) is noticed by the
    runner's watch without a job to reveal it: restart counted, said once with how it ended, a
    new process; the next job is estimated by it. How soon (within about WATCH_PERIOD_S) is
    measured by benchmarks/bench_dead_worker.py."""
    log = _Log()
    results = []
    runner = EstimatorRunner("angular_velocity", Calibration.davis240c(), real_time_settings(), in_process=True,
                             on_result=lambda job, result: results.append(job.context), logger=log,
                             warn_once=log.warn_once, capacity_events=5000)
    try:
        runner.configure(Calibration.davis240c(), real_time_settings())
        wait_until(lambda: runner.pid != 0)
        first = runner.pid
        assert first > 0
        time.sleep(0.5)  # the configuration taken: the runner's thread idles
        os.kill(first, signal.SIGKILL)
        wait_until(lambda: runner.counts["restarts"] > 0, 10.0)  # no job pushed: the watch alone notices
        assert runner.counts["restarts"] == 1
        wait_until(lambda: runner.pid not in (0, first))
        assert runner.pid not in (0, first)
        runner.push(Job(windows[0], context="after", received_s=time.monotonic()))
        wait_until(lambda: results)
    finally:
        runner.stop()
    assert results == ["after"]
    errors = [text for kind, text in log.lines if kind == "error"]
    assert len(errors) == 1 and re.search(rf"pid {first}\) stopped \(killed by signal 9\).*restarting", errors[0])
    assert runner.counts["lost"] == 0 and runner.counts["failed"] == 0


def test_jobs_before_the_engine_is_ready_are_held_then_all_estimated_then_the_live_policy_applies(windows):
    """Queue policy "newest" (max_pending 1, skippable) with hold_events: windows pushed before the
    configuration (the estimator not ready) are held, not dropped; once configured, every one is
    estimated in order, none skipped; afterwards a burst is cut down to the newest again. Beyond the
    hold's event budget the oldest held windows are dropped."""
    log = _Log()
    results = []
    held = list(windows) * 2  # 8 windows
    budget = sum(len(window) for window in held)
    runner = EstimatorRunner("angular_velocity", Calibration.davis240c(), real_time_settings(), in_process=True,
                             on_result=lambda job, result: results.append(job.context), logger=log,
                             warn_once=log.warn_once, max_pending=lambda: 1, skippable=lambda: True,
                             hold_events=lambda: budget, capacity_events=5000)
    try:
        for index, window in enumerate(held):
            runner.push(Job(window, context=index, received_s=time.monotonic()))
        runner.push(Job(windows[0], context="beyond the budget", received_s=time.monotonic()))
        assert runner.counts["dropped"] == 1 and runner.pending == len(held)  # the oldest went
        runner.configure(Calibration.davis240c(), real_time_settings())
        wait_until(lambda: len(results) >= len(held), 120.0)
        assert results == list(range(1, len(held))) + ["beyond the budget"]
        assert runner.counts["dropped"] == 1
        time.sleep(0.5)  # caught up: the live policy from now on
        for index, window in enumerate(held):
            runner.push(Job(window, context=f"live {index}", received_s=time.monotonic()))
        wait_until(lambda: runner.counts["estimated"] + runner.counts["dropped"] - 1 >= 2 * len(held))
    finally:
        runner.stop()
    assert runner.counts["dropped"] > 1  # a burst of 8 pushed at once: most of it dropped or skipped
    assert results[-1] == f"live {len(held) - 1}"


def test_a_runner_outlives_the_middleware_shutting_down_before_it_stops(windows):
    """On SIGINT or SIGTERM rclpy's own handler invalidates the context before the node stops its
    runner (CI caught this once in test_node_stop): a real publisher's subscriber count then
    raises RCLError. The runner's thread asks it with every job (``images_wanted``), so jobs
    still estimated then come back without pictures, and no exception ends the thread."""
    rclpy = pytest.importorskip("rclpy", reason="rclpy is not installed (make setup installs it)")
    from focus_ros.runtime import PictureRate
    from std_msgs.msg import Header

    context = rclpy.Context()
    rclpy.init(context=context)
    node = rclpy.create_node("runner_after_shutdown", context=context)
    publisher = node.create_publisher(Header, "runner_after_shutdown/image", 1)
    node.create_subscription(Header, "runner_after_shutdown/image", lambda message: None, 1)
    log, results, escaped = _Log(), [], []
    previous_hook = threading.excepthook
    threading.excepthook = lambda arguments: escaped.append(arguments.exc_value)
    runner = EstimatorRunner("angular_velocity", Calibration.davis240c(), real_time_settings(), in_process=True,
                             on_result=lambda job, result: results.append((job.context, result.images is not None)),
                             logger=log, warn_once=log.warn_once, max_pending=lambda: 4, capacity_events=5000,
                             images_wanted=PictureRate(lambda: 1000.0,
                                                       lambda: publisher.get_subscription_count() > 0))
    try:
        runner.configure(Calibration.davis240c(), real_time_settings())
        runner.push(Job(windows[0], context="before", received_s=time.monotonic()))
        wait_until(lambda: results)
        context.handle.shutdown()  # what rclpy's SIGINT/SIGTERM handler does: rcl's context ends, the node stays
        with pytest.raises(Exception, match="context is invalid"):
            publisher.get_subscription_count()
        runner.push(Job(windows[1], context="after", received_s=time.monotonic()))
        wait_until(lambda: len(results) >= 2)
        assert runner.state == "running"
    finally:
        runner.stop()
        threading.excepthook = previous_hook
        node.destroy_node()
        context.try_shutdown()
    assert results == [("before", True), ("after", False)]
    assert escaped == [] and [line for line in log.lines if line[0] == "error"] == []


def test_held_jobs_are_all_estimated_in_order_whatever_the_live_policy(windows):
    """Jobs cut from held events (``push(job, held=True)``: events that came before the node could
    use them) are queued past the live bound (1) and estimated in order, none dropped or skipped,
    although the runner is ready and the policy is live; once the last has left the queue, the
    live policy applies again: a burst of live jobs keeps the newest, the others dropped."""
    log, done = _Log(), []
    runner = EstimatorRunner("angular_velocity", Calibration.davis240c(), real_time_settings(), in_process=False,
                             on_result=lambda job, result: done.append(job.context), logger=log,
                             warn_once=log.warn_once, max_pending=lambda: 1, skippable=lambda: True,
                             hold_events=lambda: 1_000_000)
    halves = [half for window in windows for half in (window[:3750], window[3750:])]
    try:
        runner.configure(Calibration.davis240c(), real_time_settings())
        runner.push(Job(halves[0], context="first"))
        wait_until(lambda: done == ["first"])  # ready: the catch-up of the start is over
        for index, events in enumerate(halves):  # a burst of held jobs, faster than estimated
            runner.push(Job(events, context=index), held=True)
        assert runner.pending >= len(halves) - 2 and runner.counts["dropped"] == 0
        wait_until(lambda: len(done) == 1 + len(halves))
        assert done == ["first", *range(len(halves))] and runner.counts["dropped"] == 0
        for index, events in enumerate(halves):  # the same burst, live
            runner.push(Job(events, context=f"live {index}"))
        assert runner.pending <= 1 and runner.counts["dropped"] >= len(halves) - 3
    finally:
        runner.stop()
