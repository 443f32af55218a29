"""Bad input that real drivers, bags and users produce, fed to the angular velocity node as
`ros2 run` starts it (test/ros_harness.py: its entry point in a process of its own, real
topics on loopback). For each: the node keeps estimating from the good input after the bad,
drops nothing good with it, and says on /diagnostics and in its log what happened. All three
estimating nodes take their events through one event input (focus_ros.ros.event_input), so
one node stands for the three.
"""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

rclpy = pytest.importorskip("rclpy")
pytest.importorskip("dvs_msgs.msg", reason="interface packages not built: run `make setup`")

from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus  # noqa: E402
from dvs_msgs.msg import EventArray  # noqa: E402
from event_camera_msgs.msg import EventPacket  # noqa: E402
from geometry_msgs.msg import TwistStamped  # noqa: E402
from sensor_msgs.msg import CameraInfo, Image  # noqa: E402

from conftest import REPOSITORY_ROOT, slice_events  # noqa: E402
from focus_ros import codecs  # noqa: E402
from focus_ros.camera import Calibration  # noqa: E402
from focus_ros.events import Events  # noqa: E402
from ros_harness import node_session, spin_until  # noqa: E402

PARAMS_FILE = REPOSITORY_ROOT / "config" / "davis240c.yaml"
#: events per window: the good input below is a whole number of windows, so one good event
#: lost would cost a window
WINDOW_EVENTS = 10000


@pytest.fixture
def ros(tmp_path, monkeypatch):
    with node_session("bad_input_client", monkeypatch, tmp_path, subscriber_settle_s=0.3) as session:
        yield session


def params_without_message_type(tmp_path, calibration: bool = True, **values) -> Path:
    """The DAVIS240C params file with no event_message_type (the default, auto), with or
    without its calibration.* fallback, and ``values`` added."""
    lines = PARAMS_FILE.read_text().splitlines()
    kept, skipping = [], False
    for line in lines:
        if "event_message_type" in line:
            continue
        if line.strip() == "calibration:":
            skipping = not calibration
        elif skipping and not line.startswith("      "):
            skipping = False
        if not skipping:
            kept.append(line)
    kept += [f"    {name}: {value}" for name, value in values.items()]
    path = tmp_path / "params.yaml"
    path.write_text("\n".join(kept) + "\n")
    return path


def latest_values(reports) -> dict:
    return {kv.key: kv.value for kv in reports[-1].status[0].values} if reports else {}


def wait_for_report(ros, reports, condition, timeout_s=10.0) -> dict:
    """The values of the first /diagnostics report (after now) for which condition(values) holds."""
    reports.clear()
    assert spin_until(ros.executor, lambda: reports and condition(latest_values(reports)), timeout_s), \
        (latest_values(reports), ros.processes[-1].log())
    return latest_values(reports)


def offline_estimates(windows, calibrations=None) -> tuple[np.ndarray, np.ndarray]:
    """(t_ref in ns (W,), omega in rad/s (W, 3)) of the estimator in this process on ``windows``
    (a list of Events) in order, with the node's settings for the params file (real_time_settings:
    the davis240c.yaml values are its defaults) and the warm start carried from window to window;
    ``calibrations``: one per window (default: the DAVIS240C's), the estimator configured
    with each new one before its window, the warm start kept (as the node's estimator takes a
    changed camera_info's intrinsics from its next window on)."""
    from focus_ros.estimators.angular_velocity import real_time_settings
    from focus_ros.runtime import InlineEstimator

    calibrations = calibrations or [Calibration.davis240c()] * len(windows)
    estimator = InlineEstimator(calibrations[0], real_time_settings())
    stamps, omegas, current = [], [], calibrations[0]
    for window, calibration in zip(windows, calibrations):
        if calibration != current:
            estimator.configure(calibration, real_time_settings())
            current = calibration
        estimate = estimator.estimate(window).estimate
        stamps.append(estimate.t_ref_ns)
        omegas.append(estimate.angular_velocity)
    return np.array(stamps, dtype=np.int64), np.array(omegas)


def check_against_offline(estimates, events: Events, calibrations=None) -> None:
    """The node's estimates are those of the estimator in this process on the same windows of
    WINDOW_EVENTS of ``events`` (the good events as the node must have kept them): the same
    reference times, the same angular velocities (the same code on the same events in the same
    order; a bad event kept, a good one lost or the windows cut elsewhere would change them; so
    does the order of events with equal timestamps: the estimator's result on the first, cold
    10,000-event window of the boxes moves by over 1 rad/s with it)."""
    windows = [events[start:start + WINDOW_EVENTS] for start in range(0, len(estimates) * WINDOW_EVENTS, WINDOW_EVENTS)]
    assert sum(map(len, windows)) == len(estimates) * WINDOW_EVENTS
    t_ref_ns, expected = offline_estimates(windows, calibrations)
    stamps = np.array([m.header.stamp.sec * 10**9 + m.header.stamp.nanosec for m in estimates], dtype=np.int64)
    omega = np.array([[m.twist.angular.x, m.twist.angular.y, m.twist.angular.z] for m in estimates])
    np.testing.assert_array_equal(stamps, t_ref_ns)
    np.testing.assert_allclose(omega, expected, rtol=0, atol=1e-6)
    assert np.all(np.linalg.norm(expected, axis=1) > 1.0)  # the boxes rotate fast: not a trivial answer


def expect_the_three_good_windows(ros, estimates, reports, node, events: Events) -> dict:
    """Exactly the 3 windows the good ``events`` make are estimated (one good event lost would
    leave the third incomplete), as the estimator in this process estimates them
    (check_against_offline); the /diagnostics values once the node reports all 3 processed."""
    assert spin_until(ros.executor, lambda: len(estimates) >= 3, 60.0), node.log()
    ros.spin(1.0)
    assert len(estimates) == 3, node.log()
    check_against_offline(estimates, events)
    return wait_for_report(ros, reports, lambda v: int(v.get("windows_processed", 0)) == 3)


def serialized_event_array(events: Events, height: int, width: int, frame_id="dvs") -> bytes:
    """An EventArray serialized by rclpy itself, whatever its coordinates (a driver with a bug)."""
    from builtin_interfaces.msg import Time
    from dvs_msgs.msg import Event
    from rclpy.serialization import serialize_message

    message = EventArray(height=height, width=width)
    message.header.frame_id = frame_id
    message.events = [Event(x=int(x), y=int(y), ts=Time(sec=int(t) // 10**9, nanosec=int(t) % 10**9),
                            polarity=bool(p > 0)) for x, y, t, p in zip(events.x, events.y, events.t, events.p)]
    return serialize_message(message)


def with_events_outside(events: Events, count: int, seed: int) -> Events:
    """events with ``count`` more inserted at random places, each beyond the 240x180 sensor,
    at its neighbour's time (so that only its position is wrong)."""
    rng = np.random.default_rng(seed)
    places = np.sort(rng.choice(len(events), count, replace=False))
    x = np.insert(events.x.astype(np.int64), places, 240 + rng.integers(0, 100, count))
    y = np.insert(events.y.astype(np.int64), places, rng.integers(0, 180, count))
    t = np.insert(events.t, places, events.t[places])
    p = np.insert(events.p, places, 1)
    return Events.from_arrays(x, y, t, p)


def camera_info(fx=None, width=240, height=180) -> CameraInfo:
    calibration = Calibration.davis240c()
    fx = calibration.fx if fx is None else fx
    info = CameraInfo(width=width, height=height, distortion_model="plumb_bob")
    info.k = [fx, 0.0, calibration.cx, 0.0, calibration.fy, calibration.cy, 0.0, 0.0, 1.0]
    info.d = list(calibration.distortion)
    return info


def test_bad_events_are_dropped_alone_and_every_good_window_is_estimated(ros):
    """Among 30,000 good events in messages of 1,000: events outside the sensor in a message
    declaring 240x180 and in one declaring 0x0 (23.3), a shuffled message (23.4) and six
    messages with garbage CDR headers (23.7). Exactly the three windows of the good events
    are estimated (one good event lost would leave the third window incomplete; before the
    fixes the shuffled message lost 99 % of its events and the two with events outside all);
    the log has one line per kind of fault; /diagnostics counts them."""
    node = ros.start("angular_velocity_node", "-r", "events:=/dvs/events", "-p", "camera_info_timeout_s:=0.3",
                     "-p", f"window_events:={WINDOW_EVENTS}", "-p", "queue_policy:=all",
                     params_file=PARAMS_FILE, reliable=True)
    estimates = ros.collect(TwistStamped, "/angular_velocity")
    reports = ros.collect(DiagnosticArray, "/diagnostics")
    publisher = ros.publisher(EventArray, "/dvs/events", 100)
    spin_until(ros.executor, lambda: "using intrinsics" in node.log(), 10.0)
    events = slice_events("boxes_rotation")[:3 * WINDOW_EVENTS]
    rng = np.random.default_rng(1)
    kept = []  # the good events as the node must keep them
    for index, start in enumerate(range(0, len(events), 1000)):
        good = events[start:start + 1000]
        kept.append(good)
        if index == 3:
            publisher.publish(serialized_event_array(with_events_outside(good, 3, seed=3), 180, 240))
        elif index == 5:
            publisher.publish(serialized_event_array(with_events_outside(good, 2, seed=5), 0, 0))
        elif index == 7:
            shuffled = good[rng.permutation(len(good))]
            publisher.publish(codecs.encode_event_array(shuffled, 180, 240, "dvs"))
            # sorted by time, equal timestamps left in arrival order (a stable sort): the
            # estimate of a cold 10,000-event window of the boxes moves by over 1 rad/s with
            # the order of its equal-time events (see check_against_offline)
            kept[-1] = shuffled[np.argsort(shuffled.t, kind="stable")]
        else:
            message = codecs.encode_event_array(good, 180, 240, "dvs")
            publisher.publish(message)
            if index in (10, 11, 12, 13, 14, 15):  # six garbage headers, six different ids
                publisher.publish(bytes([index * 17 % 256, 0x5A + index]) + message[2:])
        ros.executor.spin_once(timeout_sec=0.01)
    values = expect_the_three_good_windows(ros, estimates, reports, node, Events.concatenate(kept))
    assert int(values["malformed_messages"]) == 6 and int(values["out_of_range_events"]) == 5
    assert int(values["unsorted_messages"]) == 1 and int(values["out_of_order_events"]) == 0
    assert int(values["events_received"]) == 3 * WINDOW_EVENTS + 5
    log = node.log()
    for pattern in ("encapsulation id", "events outside the 240x180 px sensor dropped, the others kept",
                    "out of time order .* sorted by time, none dropped"):
        assert len(re.findall(pattern, log)) == 1, (pattern, log)
    assert "Traceback" not in log and node.alive()


def test_unusable_camera_info_is_refused_then_a_good_and_a_changed_one_are_taken(ros, tmp_path):
    """camera_info with NaN fx, a 1x1 size and a focal length of 1e5 px (23.1): each refused
    with its reason, /diagnostics says so (WARN or ERROR, input_problem), nothing estimated;
    a good one: the buffered events are estimated; a changed one (23.2): logged, taken, the
    next windows estimated with it; the same one again changes nothing."""
    params = params_without_message_type(tmp_path, calibration=False, camera_info_timeout_s=0.3,
                                         window_events=WINDOW_EVENTS, queue_policy="all")
    node = ros.start("angular_velocity_node", "-r", "events:=/dvs/events", params_file=params, reliable=True)
    estimates = ros.collect(TwistStamped, "/angular_velocity")
    reports = ros.collect(DiagnosticArray, "/diagnostics")
    info_publisher = ros.publisher(CameraInfo, "/dvs/camera_info", 10)
    for bad in (camera_info(fx=float("nan")), camera_info(width=1, height=1), camera_info(fx=1e5)):
        info_publisher.publish(bad)
    values = wait_for_report(ros, reports, lambda v: v.get("camera_info_refused") == "3")
    assert "refused" in values["input_problem"] and values["calibration_source"] == "none"
    assert reports[-1].status[0].level != DiagnosticStatus.OK
    events = slice_events("boxes_rotation")[:3 * WINDOW_EVENTS]
    publisher = ros.publisher(EventArray, "/dvs/events", 100)
    for start in range(0, WINDOW_EVENTS, 1000):
        publisher.publish(codecs.encode_event_array(events[start:start + 1000], 180, 240, "dvs"))
    ros.spin(1.0)
    assert not estimates
    info_publisher.publish(camera_info())
    assert spin_until(ros.executor, lambda: len(estimates) == 1, 60.0), node.log()  # the buffered window
    changed = camera_info(fx=Calibration.davis240c().fx * 1.02)
    info_publisher.publish(changed)
    assert spin_until(ros.executor, lambda: "calibration changed" in node.log(), 10.0), node.log()
    info_publisher.publish(changed)  # identical: nothing happens
    for start in range(WINDOW_EVENTS, len(events), 1000):
        publisher.publish(codecs.encode_event_array(events[start:start + 1000], 180, 240, "dvs"))
        ros.executor.spin_once(timeout_sec=0.01)
    assert spin_until(ros.executor, lambda: len(estimates) == 3, 60.0), node.log()
    # the first window with the good camera_info, the next two with the changed one
    changed_calibration = replace(Calibration.davis240c(), fx=Calibration.davis240c().fx * 1.02)
    check_against_offline(estimates, events, [Calibration.davis240c()] + [changed_calibration] * 2)
    values = wait_for_report(ros, reports, lambda v: int(v.get("windows_processed", 0)) == 3)
    assert values["camera_info_refused"] == "3" and values["calibration_changes"] == "1"
    assert values["input_problem"] == "" and values["calibration_source"] == "camera_info"
    assert reports[-1].status[0].level == DiagnosticStatus.OK
    log = node.log()
    for words in ("non-finite values: fx nan", "size 1x1 px is not a sensor's", "fx 100000 px gives a 0.138 deg"):
        assert len(re.findall(re.escape(words), log)) == 1, (words, log)
    assert len(re.findall("calibration changed", log)) == 1 and "fx 203.07" in log
    assert "Traceback" not in log and node.alive()


def test_no_type_given_the_node_subscribes_to_the_event_packets_it_finds(ros, tmp_path):
    """event_message_type not given (22.2): the startup line says what it waits for, the node
    subscribes with the type the topic's publishers offer (EventPacket, evt3) and estimates."""
    params = params_without_message_type(tmp_path, camera_info_timeout_s=0.3, window_events=WINDOW_EVENTS,
                                         queue_policy="all")
    node = ros.start("angular_velocity_node", "-r", "events:=/event_camera/events", params_file=params,
                     reliable=True)
    assert re.search(r"waiting for dvs_msgs/EventArray or event_camera_msgs/EventPacket \(event_message_type "
                     r"auto.*\) on '/event_camera/events'", node.log()), node.log()
    estimates = ros.collect(TwistStamped, "/angular_velocity")
    events = slice_events("boxes_rotation")[:3 * WINDOW_EVENTS]
    events = Events(events.x, events.y, (events.t + 500) // 1000 * 1000, events.p)  # EVT3 carries microseconds
    publisher = ros.publisher(EventPacket, "/event_camera/events", 100)
    for seq, start in enumerate(range(0, len(events), 3000)):
        publisher.publish(codecs.encode_event_packet(events[start:start + 3000], 180, 240, "evt3",
                                                     frame_id="event_camera", seq=seq,
                                                     evt3_time_offset_ns=int(events.t[0]) // 1000 * 1000))
        ros.executor.spin_once(timeout_sec=0.01)
    assert spin_until(ros.executor, lambda: len(estimates) == 3, 60.0), node.log()
    check_against_offline(estimates, events)
    assert "events on '/event_camera/events' are event_camera_msgs/EventPacket" in node.log()
    assert estimates[0].header.frame_id == "event_camera"


def test_a_topic_of_a_type_we_cannot_decode_is_warned_about_within_seconds(ros, tmp_path):
    """The events topic carries sensor_msgs/Image (a remap gone wrong): a warning naming the
    type and the fix within seconds, and /diagnostics says it; the node keeps running."""
    params = params_without_message_type(tmp_path, camera_info_timeout_s=0.3)
    node = ros.start("angular_velocity_node", "-r", "events:=/camera/image", params_file=params)
    reports = ros.collect(DiagnosticArray, "/diagnostics")
    ros.node.create_publisher(Image, "/camera/image", 10)
    assert spin_until(ros.executor, lambda: "sensor_msgs/Image" in node.log(), 5.0), node.log()
    assert "not an event message type" in node.log() and "remap events:=" in node.log()
    values = wait_for_report(ros, reports, lambda v: "sensor_msgs/Image" in v.get("input_problem", ""))
    assert values["event_message_type"] == "auto (no publisher yet)"
    # the status level says it too: nothing can arrive, so not OK
    from diagnostic_msgs.msg import DiagnosticStatus
    assert reports[-1].status[0].level == DiagnosticStatus.WARN and "sensor_msgs/Image" in reports[-1].status[0].message
    assert "Traceback" not in node.log() and node.alive()


def test_sim_time_without_clock_still_takes_the_calibration_parameters(ros):
    """use_sim_time:=true and nothing on /clock (22.4): the calibration fallback fires (steady
    clock) and events are estimated."""
    node = ros.start("angular_velocity_node", "-r", "events:=/dvs/events", "-p", "camera_info_timeout_s:=0.3",
                     "-p", "use_sim_time:=true", "-p", f"window_events:={WINDOW_EVENTS}", "-p", "queue_policy:=all",
                     params_file=PARAMS_FILE, reliable=True, wait_for_report=False)
    estimates = ros.collect(TwistStamped, "/angular_velocity")
    assert spin_until(ros.executor, lambda: "using intrinsics from the calibration parameters" in node.log(), 20.0), \
        node.log()
    publisher = ros.publisher(EventArray, "/dvs/events", 100)
    events = slice_events("boxes_rotation")[:2 * WINDOW_EVENTS]
    for start in range(0, len(events), 1000):
        publisher.publish(codecs.encode_event_array(events[start:start + 1000], 180, 240, "dvs"))
        ros.executor.spin_once(timeout_sec=0.01)
    assert spin_until(ros.executor, lambda: len(estimates) == 2, 60.0), node.log()
    check_against_offline(estimates, events)


def with_size(buffer: bytes, height: int, width: int) -> bytes:
    """The same EventPacket declaring another sensor size (rewritten by rclpy's serializer)."""
    from rclpy.serialization import deserialize_message, serialize_message

    message = deserialize_message(buffer, EventPacket)
    message.height, message.width = height, width
    return serialize_message(message)


def test_event_packets_with_events_outside_the_sensor_keep_their_other_events(ros):
    """EventPackets (libcaer_cmp, as libcaer_driver publishes a DAVIS240C's events) of which
    two hold events beyond the 240x180 px they declare (23.3): only those 5 events are
    dropped, so exactly the three windows of the good events are estimated;
    out_of_range_events counts them, the log says it once, nothing is malformed."""
    node = ros.start("angular_velocity_node", "-r", "events:=/event_camera/events", "-p", "camera_info_timeout_s:=0.3",
                     "-p", "event_message_type:=event_camera_msgs/EventPacket",
                     "-p", f"window_events:={WINDOW_EVENTS}", "-p", "queue_policy:=all",
                     params_file=PARAMS_FILE, reliable=True)
    estimates = ros.collect(TwistStamped, "/angular_velocity")
    reports = ros.collect(DiagnosticArray, "/diagnostics")
    publisher = ros.publisher(EventPacket, "/event_camera/events", 100)
    spin_until(ros.executor, lambda: "using intrinsics" in node.log(), 10.0)
    events = slice_events("boxes_rotation")[:3 * WINDOW_EVENTS]
    events = Events(events.x, events.y, events.t // 1000 * 1000, events.p)  # libcaer_cmp carries microseconds
    outside = {3: 3, 5: 2}  # packet: events outside
    for seq, start in enumerate(range(0, len(events), 1000)):
        good = events[start:start + 1000]
        if seq in outside:  # encoded for a sensor 100 px wider, sent declaring 240x180
            wide = codecs.encode_event_packet(with_events_outside(good, outside[seq], seed=seq), 180, 340,
                                              "libcaer_cmp", frame_id="event_camera", seq=seq)
            publisher.publish(with_size(wide, 180, 240))
        else:
            publisher.publish(codecs.encode_event_packet(good, 180, 240, "libcaer_cmp", frame_id="event_camera",
                                                         seq=seq))
        ros.executor.spin_once(timeout_sec=0.01)
    values = expect_the_three_good_windows(ros, estimates, reports, node, events)
    assert int(values["out_of_range_events"]) == 5 and int(values["malformed_messages"]) == 0
    assert int(values["events_received"]) == 3 * WINDOW_EVENTS + 5
    log = node.log()
    assert len(re.findall("events outside the 240x180 px sensor dropped, the others kept", log)) == 1, log
    assert "Traceback" not in log and node.alive()
