"""optical_flow_node as `ros2 run` starts it, over real topics on loopback: its 32FC2 flow images
equal `focus-ros flow`'s flow.csv on the same windows."""

from __future__ import annotations

import csv

import numpy as np
import pytest

rclpy = pytest.importorskip("rclpy")
pytest.importorskip("dvs_msgs.msg", reason="interface packages not built: run `make setup`")

from dvs_msgs.msg import EventArray  # noqa: E402
from sensor_msgs.msg import Image  # noqa: E402

from conftest import REPOSITORY_ROOT  # noqa: E402
from flow_scenes import translating_dots  # noqa: E402
from focus_ros import codecs  # noqa: E402
from focus_ros.estimators.optical_flow import OpticalFlowEstimator, OpticalFlowSettings  # noqa: E402
from focus_ros.events import Events  # noqa: E402
from focus_ros.windows import count_windows  # noqa: E402
from ros_harness import check_worker_restart_reported, node_session, spin_until  # noqa: E402

PARAMS_FILE = REPOSITORY_ROOT / "config" / "optical_flow.yaml"
TRUE_FLOW = np.array([120.0, -90.0])


def _focus_ros_flow_csv(events, tmp_path) -> list[np.ndarray]:
    """`focus-ros flow` on the same events (an ECD folder): (rows, columns, 2) flows per window."""
    from focus_ros.camera import Calibration
    from focus_ros.cli import main

    folder = tmp_path / "sequence"
    folder.mkdir()
    np.savetxt(folder / "events.txt", np.column_stack([events.t / 1e9, events.x, events.y, (events.p > 0)]),
               fmt=["%.9f", "%d", "%d", "%d"])
    (folder / "calib.txt").write_text(Calibration.davis240c().to_ecd_line() + "\n")
    assert main(["flow", str(folder), "-o", str(tmp_path / "flow"), "--picture-every", "0", "--quiet",
                 "--min-patch-events", str(SCENE_MIN_EVENTS)]) == 0
    with open(tmp_path / "flow" / "flow.csv") as handle:
        rows = list(csv.DictReader(handle))
    flows = np.array([[float(row["vx"]), float(row["vy"])] for row in rows]).reshape(-1, 12, 16, 2)
    return list(flows)


#: the scene (30,000 events per window over 192 patches: ~160 per patch) was sized for a threshold
#: of 100 events per patch, below the default of 150; the node and the command get the same value
SCENE_MIN_EVENTS = 100


def test_node_publishes_the_flow_of_focus_ros_flow(tmp_path, monkeypatch):
    events = translating_dots(TRUE_FLOW, dots=1500, events=75_000, duration_s=0.04)
    # the events as the ECD text stores them (microseconds), so that both sides see the same times
    events = Events(events.x, events.y, (events.t // 1000) * 1000, events.p)
    windows = list(count_windows([events], 30_000))
    assert len(windows) == 2
    command_flows = _focus_ros_flow_csv(events, tmp_path)
    assert len(command_flows) == 2
    estimator = OpticalFlowEstimator(240, 180, OpticalFlowSettings(min_events_per_patch=SCENE_MIN_EVENTS))
    expected = [estimator.estimate(window) for window in windows]

    with node_session("flow_test_client", monkeypatch, tmp_path) as ros:
        reports = ros.reports
        flows = ros.collect(Image, "/optical_flow", 10)
        pictures = ros.collect(Image, "/optical_flow/image", 10)
        process = ros.start("optical_flow_node", "-r", "events:=/dvs/events", "-p", "queue_policy:=all",
                            "-p", "camera_info_timeout_s:=0.3", "-p", "image_rate_hz:=100.0",
                            "-p", f"min_events_per_patch:={SCENE_MIN_EVENTS}", params_file=PARAMS_FILE,
                            reliable=True, log_name="optical_flow_node")
        publisher = ros.publisher(EventArray, "/dvs/events", 100)
        ros.spin(1.0)  # fallback calibration in place, image subscription seen
        for start in range(0, len(events), 5000):
            publisher.publish(codecs.encode_event_array(events[start:start + 5000], 180, 240, "dvs"))
            ros.executor.spin_once(timeout_sec=0.01)
        assert spin_until(ros.executor, lambda: len(flows) >= 2 and pictures, 90.0), process.log()
        reports.clear()
        assert spin_until(ros.executor, lambda: reports, 5.0)

    for message, estimate, command_flow in zip(flows, expected, command_flows):
        assert message.encoding == "32FC2"
        assert (message.height, message.width) == (estimate.grid.rows, estimate.grid.columns) == (12, 16)
        assert message.step == message.width * 8 and message.header.frame_id == "dvs"
        assert message.header.stamp.sec * 1_000_000_000 + message.header.stamp.nanosec == estimate.t_ref_ns
        flow = np.frombuffer(bytes(message.data), dtype="<f4").reshape(message.height, message.width, 2)
        np.testing.assert_array_equal(np.isnan(flow), np.isnan(command_flow))
        np.testing.assert_allclose(flow[np.isfinite(flow)], command_flow[np.isfinite(command_flow)], rtol=1e-6,
                                   atol=1e-5)  # float32 message vs the CSV's 6 decimals
        valid = np.isfinite(flow[..., 0])
        assert valid.sum() > 100
        assert np.median(np.linalg.norm(flow[valid] - TRUE_FLOW, axis=1)) < 20.0
    picture = pictures[0]
    assert picture.encoding == "rgb8" and (picture.height, picture.width) == (540, 720)
    values = {item.key: item.value for item in reports[-1].status[0].values}
    assert int(values["windows_processed"]) == 2 and int(values["windows_dropped"]) == 0
    assert 0.5 < float(values["valid_patch_share"]) <= 1.0
    last = expected[-1]
    assert int(values["patches_valid"]) == int(last.valid.sum())
    assert sum(int(values[f"patches_{key}"]) for key in ("valid", "few_events", "flat", "aperture", "out_of_range")) \
        == int((last.event_counts > 0).sum())


def _flow_values(report, node_name: str) -> dict:
    statuses = [status for status in report.status if status.name.startswith(node_name + ":")]
    return {item.key: item.value for item in statuses[0].values} if statuses else {}


def test_estimator_process_and_thread_publish_the_same_flow_and_a_killed_worker_is_restarted(tmp_path, monkeypatch):
    """Two nodes on the same events: one with the estimator in a process of its own (the
    default), one with it in a thread of the node (estimator_process false). Same estimator
    code on the same windows in the same order, so the flows must be bit-identical (the
    float32 messages compared byte for byte): any difference would mean events lost, reordered
    or altered on the way through shared memory, or state (the warm start) not carried.
    Then the process is killed: the node logs it, restarts it, counts it in /diagnostics
    and estimates the next windows."""
    import os
    import signal

    events = translating_dots(TRUE_FLOW, dots=1500, events=90_000, duration_s=0.045, seed=3)
    later = translating_dots(TRUE_FLOW, dots=1500, events=60_000, duration_s=0.03, seed=4)
    later = Events(later.x, later.y, later.t - int(later.t[0]) + int(events.t[-1]) + 1000, later.p)  # continues

    with node_session("flow_paths_client", monkeypatch, tmp_path, reports_depth=50) as ros:
        node, executor, reports = ros.node, ros.executor, ros.reports
        flows = {"process": [], "thread": []}
        processes = {}
        for name, in_process in (("process", "true"), ("thread", "false")):
            flows[name] = ros.collect(Image, f"/{name}/optical_flow", 10)
            processes[name] = ros.start("optical_flow_node", "-r", f"__node:=flow_{name}", "-r", "events:=/dvs/events",
                                        "-r", f"optical_flow:=/{name}/optical_flow", "-p", "queue_policy:=all",
                                        "-p", "camera_info_timeout_s:=0.3", "-p", f"estimator_process:={in_process}",
                                        "-p", f"min_events_per_patch:={SCENE_MIN_EVENTS}", params_file=PARAMS_FILE,
                                        reliable=True, log_name=f"flow_{name}", wait_for_report=False)
        publisher = node.create_publisher(EventArray, "/dvs/events", 100)
        assert spin_until(executor, lambda: publisher.get_subscription_count() >= 2, 30.0), \
            processes["process"].log() + processes["thread"].log()
        assert spin_until(executor, lambda: all(any(_flow_values(r, f"flow_{name}") for r in reports)
                                               for name in processes), 30.0)
        spin_until(executor, lambda: False, 0.5)  # both on the fallback calibration

        def publish(stream):
            for start in range(0, len(stream), 5000):
                publisher.publish(codecs.encode_event_array(stream[start:start + 5000], 180, 240, "dvs"))
                executor.spin_once(timeout_sec=0.01)

        publish(events)
        assert spin_until(executor, lambda: len(flows["process"]) >= 2 and len(flows["thread"]) >= 2, 90.0), \
            (len(flows["process"]), len(flows["thread"]), [_flow_values(r, "flow_process") for r in reports[-3:]],
             [_flow_values(r, "flow_thread") for r in reports[-3:]])
        for from_process, from_thread in zip(flows["process"], flows["thread"]):
            assert from_process.header.stamp == from_thread.header.stamp
            assert bytes(from_process.data) == bytes(from_thread.data)
        valid = np.isfinite(np.frombuffer(bytes(flows["process"][-1].data), dtype="<f4"))
        assert valid.sum() > 100  # the comparison covers real flows, not only NaN

        # the worker of the process node killed: reported, restarted, estimating again
        reports.clear()
        assert spin_until(executor, lambda: any(_flow_values(r, "flow_process") for r in reports), 5.0)
        values = [_flow_values(r, "flow_process") for r in reports if _flow_values(r, "flow_process")][-1]
        pid = int(values["estimator_process_pid"])
        assert pid not in (0, processes["process"].process.pid)
        thread_values = [_flow_values(r, "flow_thread") for r in reports if _flow_values(r, "flow_thread")]
        assert not thread_values or int(thread_values[-1]["estimator_process_pid"]) == 0
        os.kill(pid, signal.SIGKILL)
        count = len(flows["process"])
        publish(later)
        assert spin_until(executor, lambda: len(flows["process"]) >= count + 1, 60.0), processes["process"].log()
        reports.clear()
        assert spin_until(executor, lambda: any(_flow_values(r, "flow_process") for r in reports), 5.0)
        values = [_flow_values(r, "flow_process") for r in reports if _flow_values(r, "flow_process")][-1]
        check_worker_restart_reported(pid, values, processes["process"])
    assert "Traceback" not in processes["process"].log()  # nor at shutdown
