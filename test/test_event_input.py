"""The shared event input (focus_ros.ros.event_input) inside a real rclpy node, fed over real
topics on loopback by a second node: what a node built on it receives, in which order, and
what it counts."""

from __future__ import annotations

import numpy as np
import pytest

rclpy = pytest.importorskip("rclpy")
pytest.importorskip("dvs_msgs.msg", reason="interface packages not built: run `make setup`")

from dvs_msgs.msg import EventArray  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402
from sensor_msgs.msg import CameraInfo  # noqa: E402

from focus_ros import codecs  # noqa: E402
from focus_ros.camera import Calibration  # noqa: E402
from focus_ros.events import Events  # noqa: E402
from focus_ros.ros.event_input import EventInput, EventInputSettings  # noqa: E402
from focus_ros.settings import declared  # noqa: E402
from ros_harness import client_node, spin_until  # noqa: E402


def synthetic_events(count: int, t0_ns: int, width=240, height=180, seed=0) -> Events:
    rng = np.random.default_rng(seed)
    return Events.from_arrays(rng.integers(0, width, count), rng.integers(0, height, count),
                              t0_ns + np.arange(count, dtype=np.int64) * 1000, rng.integers(0, 2, count))


class Receiver:
    """What a node composing EventInput gets through its callbacks."""

    def __init__(self, context, overrides: dict, own_thread: bool = False):
        parameters = [Parameter(name, value=value) for name, value in overrides.items()]
        self.node = rclpy.create_node("receiver", context=context, parameter_overrides=parameters)
        self.batches, self.calibrations, self.log = [], [], []
        self.input = EventInput(self.node, self.batches.append,
                                lambda calibration, source: self.log.append(("calibration", source, calibration)),
                                own_thread=own_thread)


@pytest.fixture
def ros(monkeypatch):
    with client_node("event_input_client", monkeypatch) as (env, node, executor):
        receivers = []

        def make(own_thread=False, **overrides):
            receiver = Receiver(node.context, overrides, own_thread)
            executor.add_node(receiver.node)
            receivers.append(receiver)
            return receiver

        yield node, executor, make
        for receiver in receivers:
            receiver.input.close()
            executor.remove_node(receiver.node)
            receiver.node.destroy_node()


def connect(node, executor, topic="/events"):
    publisher = node.create_publisher(EventArray, topic, 100)
    assert spin_until(executor, lambda: publisher.get_subscription_count() > 0, 20.0)
    return publisher


def test_parameters_are_declared_with_descriptions_and_defaults(ros):
    _, _, make = ros
    receiver = make(camera_info_topic="/cam/info")
    for item in declared(EventInputSettings):
        name = item.parameter
        descriptor = receiver.node.describe_parameter(name)
        assert descriptor.description, name
        if name != "camera_info_topic":
            assert receiver.node.get_parameter(name).value == item.parameter_default, name
    assert receiver.input.camera_info_topic == "/cam/info"
    assert receiver.node.describe_parameter("qos_depth").integer_range[0].from_value == 1


def test_events_wait_for_camera_info_then_arrive_guarded_in_order(ros):
    node, executor, make = ros
    receiver = make(camera_info_timeout_s=30.0, qos_reliability="reliable")
    publisher = connect(node, executor)
    events = synthetic_events(3000, 10**9)
    # 3 messages before any calibration: held, not delivered
    for start in range(0, 3000, 1000):
        publisher.publish(codecs.encode_event_array(events[start:start + 1000], 180, 240, "cam"))
    assert spin_until(executor, lambda: receiver.input.diagnostics()["messages_received"] == 3, 10.0)
    assert receiver.batches == [] and receiver.input.calibration is None
    calibration = Calibration.davis240c()
    info = CameraInfo(width=240, height=180, distortion_model="plumb_bob")
    info.header.frame_id = "cam"
    info.k = [calibration.fx, 0.0, calibration.cx, 0.0, calibration.fy, calibration.cy, 0.0, 0.0, 1.0]
    info.d = list(calibration.distortion)
    info_publisher = node.create_publisher(CameraInfo, "/dvs/camera_info", 10)
    assert spin_until(executor, lambda: info_publisher.get_subscription_count() > 0, 20.0)
    info_publisher.publish(info)
    assert spin_until(executor, lambda: len(receiver.batches) == 3, 10.0)
    # the calibration came first, then the held batches in order, nothing lost
    assert receiver.log[0][:2] == ("calibration", "camera_info")
    assert receiver.input.calibration_source == "camera_info"
    assert receiver.input.calibration.fx == pytest.approx(calibration.fx)
    assert Events.concatenate([b.events for b in receiver.batches]).equals(events)
    assert all(b.frame_id == "cam" and not b.restart for b in receiver.batches)
    received = [b.received_s for b in receiver.batches]
    assert received == sorted(received)
    # an event outside the declared sensor (dropped alone), an event going back in time across
    # messages (dropped), a shuffled message (sorted, kept whole) and a jump back by 1.9 s
    # (the stream restarts)
    bad = synthetic_events(10, 2 * 10**9)
    publisher.publish(_raw_event_array(Events(np.where(np.arange(10) == 3, 500, bad.x), bad.y, bad.t, bad.p)))
    later = synthetic_events(10, int(bad.t[-1]) + 1000, seed=2)
    publisher.publish(codecs.encode_event_array(
        Events(later.x, later.y, np.where(np.arange(10) == 0, bad.t[-1] - 1, later.t), later.p), 180, 240, "cam"))
    shuffled = synthetic_events(50, int(later.t[-1]) + 1000, seed=3)
    order = np.random.default_rng(4).permutation(50)
    publisher.publish(codecs.encode_event_array(shuffled[order], 180, 240, "cam"))
    back = synthetic_events(100, 10**8, seed=1)
    publisher.publish(codecs.encode_event_array(back, 180, 240, "cam"))
    assert spin_until(executor, lambda: len(receiver.batches) == 7, 10.0)
    assert receiver.batches[3].events.equals(bad[np.arange(10) != 3])
    assert receiver.batches[4].events.equals(later[1:])
    assert receiver.batches[5].events.equals(shuffled) and not receiver.batches[5].restart
    assert receiver.batches[6].restart and receiver.batches[6].events.equals(back)
    values = receiver.input.diagnostics()
    assert values["events_received"] == 3170 and values["malformed_messages"] == 0
    assert values["out_of_range_events"] == 1 and values["out_of_order_events"] == 1
    assert values["unsorted_messages"] == 1 and values["restarts"] == 1
    assert values["calibration_source"] == "camera_info" and values["event_message_type"] == "dvs_msgs/EventArray"


def test_fallback_parameters_malformed_messages_and_bounded_buffer(ros):
    node, executor, make = ros
    receiver = make(camera_info_timeout_s=1.0, qos_reliability="reliable", max_buffered_events=2000,
                    **{"calibration.width": 240, "calibration.height": 180, "calibration.fx": 200.0,
                       "calibration.fy": 200.0, "calibration.cx": 120.0, "calibration.cy": 90.0})
    publisher = connect(node, executor)
    events = synthetic_events(5000, 10**9)
    good = codecs.encode_event_array(events[:1000], 180, 240, "cam")
    publisher.publish(good[: len(good) // 2])      # truncated
    for start in range(0, 5000, 1000):                # 5,000 events before the fallback: 2,000 kept
        publisher.publish(codecs.encode_event_array(events[start:start + 1000], 180, 240, "cam"))
    assert spin_until(executor, lambda: receiver.input.diagnostics()["messages_received"] == 5, 10.0)
    assert spin_until(executor, lambda: receiver.batches, 10.0)
    assert receiver.log[0][1] == "parameters" and receiver.input.calibration.fx == 200.0
    delivered = Events.concatenate([b.events for b in receiver.batches])
    assert delivered.equals(events[3000:])  # the newest messages within the bound, in order
    values = receiver.input.diagnostics()
    assert values["malformed_messages"] == 1
    assert values["events_dropped_unconfigured"] == 3000
    assert values["calibration_source"] == "parameters"


def _raw_event_array(events: Events, height: int = 180, width: int = 240) -> bytes:
    """An EventArray serialized by rclpy itself, whatever its coordinates."""
    from builtin_interfaces.msg import Time
    from dvs_msgs.msg import Event
    from rclpy.serialization import serialize_message

    message = EventArray(height=height, width=width)
    message.header.frame_id = "cam"
    message.events = [Event(x=int(x), y=int(y), ts=Time(sec=int(t) // 10**9, nanosec=int(t) % 10**9),
                            polarity=bool(p > 0)) for x, y, t, p in zip(events.x, events.y, events.t, events.p)]
    return serialize_message(message)


def test_a_burst_of_queued_messages_arrives_complete_and_in_order(ros):
    """Messages queued while the executor was busy (here: not spinning) are taken several per
    callback (MESSAGES_PER_CALLBACK): every one still arrives once, in order, one batch each,
    malformed ones among them counted and skipped, as one at a time."""
    from focus_ros.ros.event_input import MESSAGES_PER_CALLBACK

    node, executor, make = ros
    receiver = make(camera_info_timeout_s=0.0, qos_reliability="reliable",
                    **{"calibration.width": 240, "calibration.height": 180, "calibration.fx": 200.0,
                       "calibration.fy": 200.0, "calibration.cx": 120.0, "calibration.cy": 90.0})
    publisher = connect(node, executor)
    assert spin_until(executor, lambda: receiver.input.calibration is not None, 10.0)
    count = 2 * MESSAGES_PER_CALLBACK + 5
    events = synthetic_events(100 * count, 10**9)
    for index in range(count):
        message = codecs.encode_event_array(events[100 * index:100 * (index + 1)], 180, 240, "cam")
        publisher.publish(message[:20] if index == 7 else message)  # one truncated message in the burst
    assert spin_until(executor, lambda: receiver.input.diagnostics()["messages_received"] == count - 1, 10.0)
    assert len(receiver.batches) == count - 1
    kept = np.r_[0:700, 800:100 * count]
    assert Events.concatenate([b.events for b in receiver.batches]).equals(events[kept])
    assert receiver.input.diagnostics()["malformed_messages"] == 1


def test_own_thread_takes_every_message_in_order_off_the_executor(ros):
    """EventInput(own_thread=True): the executor never runs the events subscription; the
    input's thread takes the messages (a queued burst with a malformed one among them), each
    once, in order, with the same counts, and stops on close()."""
    import threading

    node, executor, make = ros
    receiver = make(own_thread=True, camera_info_timeout_s=0.0, qos_reliability="reliable",
                    **{"calibration.width": 240, "calibration.height": 180, "calibration.fx": 200.0,
                       "calibration.fy": 200.0, "calibration.cx": 120.0, "calibration.cy": 90.0})
    threads = set()
    receiver.input._on_events = lambda batch: (threads.add(threading.current_thread().name),
                                               receiver.batches.append(batch))
    publisher = connect(node, executor)
    assert spin_until(executor, lambda: receiver.input.calibration is not None, 10.0)
    count = 50
    events = synthetic_events(100 * count, 10**9)
    for index in range(count):
        message = codecs.encode_event_array(events[100 * index:100 * (index + 1)], 180, 240, "cam")
        publisher.publish(message[:20] if index == 7 else message)
    # the executor spins meanwhile, yet only the input's own thread receives
    assert spin_until(executor, lambda: receiver.input.diagnostics()["messages_received"] == count - 1, 10.0)
    assert len(receiver.batches) == count - 1 and threads == {"event_input"}
    kept = np.r_[0:700, 800:100 * count]
    assert Events.concatenate([b.events for b in receiver.batches]).equals(events[kept])
    assert receiver.input.diagnostics()["malformed_messages"] == 1
    receiver.input.close()
    assert not receiver.input._thread.is_alive()


CALIBRATION_PARAMETERS = {"calibration.width": 240, "calibration.height": 180, "calibration.fx": 200.0,
                          "calibration.fy": 200.0, "calibration.cx": 120.0, "calibration.cy": 90.0}


def camera_info(width=240, height=180, fx=None, fy=None, cx=None, cy=None) -> CameraInfo:
    """A CameraInfo of the DAVIS240C calibration, with the given fields changed."""
    calibration = Calibration.davis240c()
    fx, fy = calibration.fx if fx is None else fx, calibration.fy if fy is None else fy
    cx, cy = calibration.cx if cx is None else cx, calibration.cy if cy is None else cy
    info = CameraInfo(width=width, height=height, distortion_model="plumb_bob")
    info.k = [fx, 0.0, cx, 0.0, fy, cy, 0.0, 0.0, 1.0]
    info.d = list(calibration.distortion)
    return info


def test_unusable_camera_info_is_refused_a_changed_one_taken_an_identical_one_skipped(ros, capfd):
    """NaN fx, a 1x1 size and a 1e5-px focal length are refused with the reason (log, counter,
    input_problem); the first usable camera_info is taken; the same again changes nothing; a
    different one (another sensor size) replaces it: on_calibration is called again, the guard
    now bounds events by the new size; a bad one after that keeps the calibration in use."""
    node, executor, make = ros
    receiver = make(camera_info_timeout_s=30.0, qos_reliability="reliable", event_message_type="dvs_msgs/EventArray")
    info_publisher = node.create_publisher(CameraInfo, "/dvs/camera_info", 10)
    assert spin_until(executor, lambda: info_publisher.get_subscription_count() > 0, 20.0)
    for bad in (camera_info(fx=float("nan")), camera_info(width=1, height=1), camera_info(fx=1e5)):
        info_publisher.publish(bad)
    assert spin_until(executor, lambda: receiver.input.diagnostics()["camera_info_refused"] == 3, 10.0)
    assert receiver.input.calibration is None and receiver.log == []
    values = receiver.input.diagnostics()
    assert "refused" in values["input_problem"] and values["calibration_source"] == "none"
    assert receiver.input.problem()[0] == "warn"
    log = capfd.readouterr().err
    for words in ("non-finite values: fx nan", "size 1x1 px is not a sensor's", "fx 100000 px gives a"):
        assert len([line for line in log.splitlines() if words in line]) == 1, (words, log)
    info_publisher.publish(camera_info())
    assert spin_until(executor, lambda: len(receiver.log) == 1, 10.0)
    assert receiver.input.diagnostics()["input_problem"] == "" and receiver.input.problem() is None
    info_publisher.publish(camera_info())  # identical: skipped
    publisher = connect(node, executor)
    events = synthetic_events(1000, 10**9)
    publisher.publish(codecs.encode_event_array(events, 180, 240, "cam"))
    assert spin_until(executor, lambda: len(receiver.batches) == 1, 10.0)
    assert len(receiver.log) == 1 and receiver.input.diagnostics()["calibration_changes"] == 0
    # a changed calibration: DAVIS346 size
    info_publisher.publish(camera_info(346, 260, 243.0, 243.0, 173.0, 130.0))
    assert spin_until(executor, lambda: len(receiver.log) == 2, 10.0)
    assert receiver.log[1][:2] == ("calibration", "camera_info") and receiver.log[1][2].width == 346
    wide = synthetic_events(1000, 2 * 10**9, width=346, height=260, seed=5)
    publisher.publish(codecs.encode_event_array(wide, 260, 346, "cam"))
    assert spin_until(executor, lambda: len(receiver.batches) == 2, 10.0)
    assert receiver.batches[1].events.equals(wide)  # events beyond 240x180 are inside the new sensor
    info_publisher.publish(camera_info(fy=float("inf")))
    assert spin_until(executor, lambda: receiver.input.diagnostics()["camera_info_refused"] == 4, 10.0)
    assert receiver.input.calibration.width == 346 and receiver.input.problem() is None
    values = receiver.input.diagnostics()
    assert values["calibration_changes"] == 1 and values["size_mismatch_messages"] == 0
    log = capfd.readouterr().err
    assert "calibration changed: using intrinsics from camera_info on '/dvs/camera_info': 346x260 px" in log
    assert "was 240x180 px" in log and "keeping the calibration in use" in log


def test_garbage_headers_are_one_line_per_kind_of_fault(ros, capfd):
    """Six messages with six different garbage CDR encapsulation ids, and truncated messages
    cut at different lengths: one warning line per kind of fault, every message counted."""
    node, executor, make = ros
    receiver = make(camera_info_timeout_s=0.0, qos_reliability="reliable", event_message_type="dvs_msgs/EventArray",
                    **CALIBRATION_PARAMETERS)
    publisher = connect(node, executor)
    good = codecs.encode_event_array(synthetic_events(100, 10**9), 180, 240, "cam")
    for garbage_id in (b"\x12\x34", b"\xab\xcd", b"\x7f\x00", b"\xff\xee", b"\x00\x09", b"\x99\x99"):
        publisher.publish(garbage_id + good[2:])
    for cut in (3, 10, 30):  # all before the events: each a "truncated message"
        publisher.publish(good[:cut])
    assert spin_until(executor, lambda: receiver.input.diagnostics()["malformed_messages"] == 9, 10.0)
    lines = [line for line in capfd.readouterr().err.splitlines() if "event message ignored" in line]
    assert len([line for line in lines if "encapsulation id" in line]) == 1, lines
    assert len([line for line in lines if "truncated message" in line]) == 1, lines
    assert len(lines) == 2, lines


def test_header_size_zero_keeps_the_events_inside_the_calibration(ros):
    """A dvs_msgs EventArray declaring 0x0 (size not filled in): its events inside the
    calibration's sensor are kept, those outside dropped and counted."""
    node, executor, make = ros
    receiver = make(camera_info_timeout_s=0.0, qos_reliability="reliable", event_message_type="dvs_msgs/EventArray",
                    **CALIBRATION_PARAMETERS)
    publisher = connect(node, executor)
    assert spin_until(executor, lambda: receiver.input.calibration is not None, 10.0)
    events = synthetic_events(60, 10**9)
    x = np.where(np.arange(60) % 20 == 5, 240 + np.arange(60), events.x)  # 3 events beyond x = 239
    publisher.publish(_raw_event_array(Events(x, events.y, events.t, events.p), height=0, width=0))
    assert spin_until(executor, lambda: receiver.batches, 10.0)
    assert receiver.batches[0].events.equals(events[np.arange(60) % 20 != 5])
    values = receiver.input.diagnostics()
    assert values["out_of_range_events"] == 3 and values["malformed_messages"] == 0


def test_auto_type_waits_for_a_publisher_and_warns_about_an_undecodable_type(ros, capfd):
    """event_message_type auto (the default): no subscription while the topic has no
    publisher; a topic of a type we cannot decode is warned about within seconds, naming the
    type and the fix; a best-effort publisher against a reliable subscription too."""
    from std_msgs.msg import String

    node, executor, make = ros
    receiver = make(camera_info_timeout_s=0.0, qos_reliability="reliable", **CALIBRATION_PARAMETERS)
    assert "auto" in receiver.input.message_type and "dvs_msgs/EventArray" in receiver.input.message_type
    spin_until(executor, lambda: False, 1.0)
    assert receiver.input.diagnostics()["event_message_type"] == "auto (no publisher yet)"
    assert receiver.node.get_subscriptions_info_by_topic("/events") == []
    node.create_publisher(String, "/events", 10)
    assert spin_until(executor, lambda: "std_msgs/String" in capfd.readouterr().err, 5.0)
    assert "not an event message type" in receiver.input.diagnostics()["input_problem"]


def test_a_best_effort_publisher_against_a_reliable_subscription_is_warned_about(ros, capfd):
    from rclpy.qos import QoSProfile, ReliabilityPolicy

    node, executor, make = ros
    receiver = make(camera_info_timeout_s=0.0, qos_reliability="reliable", **CALIBRATION_PARAMETERS)
    node.create_publisher(EventArray, "/events", QoSProfile(depth=10, reliability=ReliabilityPolicy.BEST_EFFORT))
    seen = []
    assert spin_until(executor, lambda: seen.append(capfd.readouterr().err) or "qos_reliability:=best_effort"
                      in "".join(seen), 5.0)
    assert receiver.input.message_type == "dvs_msgs/EventArray"
    assert "cannot match" in receiver.input.diagnostics()["input_problem"]


def test_calibration_fallback_fires_with_sim_time_and_no_clock(ros):
    """use_sim_time true and nothing on /clock: the fallback timer runs on the steady clock."""
    node, executor, make = ros
    receiver = make(camera_info_timeout_s=0.3, use_sim_time=True, **CALIBRATION_PARAMETERS)
    assert spin_until(executor, lambda: receiver.input.calibration is not None, 5.0)
    assert receiver.node.get_clock().now().nanoseconds == 0  # the ROS clock never moved


# ----------------------------------------------------------------- nothing lost while the node starts


def _davis240c_parameters(fx_offset: float = 0.0) -> dict:
    """The calibration.* parameters of Calibration.davis240c() (what camera_info() carries), fx moved
    by fx_offset px."""
    calibration = Calibration.davis240c()
    return {"calibration.width": 240, "calibration.height": 180, "calibration.fx": calibration.fx + fx_offset,
            "calibration.fy": calibration.fy, "calibration.cx": calibration.cx, "calibration.cy": calibration.cy,
            "calibration.distortion": list(calibration.distortion)}


def test_camera_info_waiting_behind_a_busy_executor_is_used_before_the_fallback(ros, capfd):
    """camera_info came in time but the executor was busy past camera_info_timeout_s (here: not
    spinning the node for 1 s). rclpy runs the due timeout before the waiting subscription; the
    timeout must take the waiting camera_info, not the calibration parameters (which differ by 1
    px in fx): one calibration, from camera_info, no fallback line, the held events delivered."""
    from rclpy.executors import SingleThreadedExecutor

    node, executor, _ = ros
    receiver = Receiver(node.context, dict(camera_info_timeout_s=0.3, qos_reliability="reliable",
                                           event_message_type="dvs_msgs/EventArray",
                                           **_davis240c_parameters(fx_offset=1.0)))
    busy = SingleThreadedExecutor(context=node.context)
    try:
        info_publisher = node.create_publisher(CameraInfo, "/dvs/camera_info", 10)
        publisher = node.create_publisher(EventArray, "/events", 100)
        # matching is DDS's business: spinning the test's node alone, the receiver's timer stays due
        assert spin_until(executor, lambda: info_publisher.get_subscription_count() > 0
                          and publisher.get_subscription_count() > 0, 20.0)
        info_publisher.publish(camera_info())
        events = synthetic_events(2000, 10**9)
        for start in (0, 1000):
            publisher.publish(codecs.encode_event_array(events[start:start + 1000], 180, 240, "cam"))
        spin_until(executor, lambda: False, 1.0)  # the receiver's executor busy: its 0.3-s timeout is due
        busy.add_node(receiver.node)
        assert spin_until(busy, lambda: len(receiver.batches) == 2, 10.0)
        spin_until(busy, lambda: False, 0.5)
        assert [source for _, source, _ in receiver.log] == ["camera_info"]
        assert receiver.input.calibration.fx == pytest.approx(Calibration.davis240c().fx)
        assert Events.concatenate([b.events for b in receiver.batches]).equals(events)
        values = receiver.input.diagnostics()
        assert values["calibration_source"] == "camera_info" and values["camera_info_received"] == 1
        log = capfd.readouterr().err
        assert "calibration parameters" not in log and "no calibration" not in log, log
    finally:
        receiver.input.close()
        busy.shutdown()
        receiver.node.destroy_node()


def test_camera_info_equal_to_the_parameters_in_use_only_changes_the_source(ros, capfd):
    """The fallback parameters were taken (no camera_info within the timeout); a camera_info with
    the same numbers arrives later (a bag or driver that started after the node): the source
    becomes camera_info, without a calibration change (the node would reconfigure its estimator
    for nothing); a different one later is still a change."""
    node, executor, make = ros
    receiver = make(camera_info_timeout_s=0.0, qos_reliability="reliable", event_message_type="dvs_msgs/EventArray",
                    **_davis240c_parameters())
    assert spin_until(executor, lambda: receiver.input.calibration is not None, 10.0)
    assert receiver.input.calibration_source == "parameters"
    info_publisher = node.create_publisher(CameraInfo, "/dvs/camera_info", 10)
    assert spin_until(executor, lambda: info_publisher.get_subscription_count() > 0, 20.0)
    info_publisher.publish(camera_info())
    assert spin_until(executor, lambda: receiver.input.calibration_source == "camera_info", 10.0)
    assert [source for _, source, _ in receiver.log] == ["parameters"]
    assert receiver.input.diagnostics()["calibration_changes"] == 0
    assert "agrees with the calibration parameters in use" in capfd.readouterr().err
    info_publisher.publish(camera_info(fx=190.0))
    assert spin_until(executor, lambda: len(receiver.log) == 2, 10.0)
    assert receiver.log[1][2].fx == 190.0 and receiver.input.diagnostics()["calibration_changes"] == 1


def test_the_first_take_of_the_own_thread_is_held_what_follows_is_live(ros):
    """own_thread: the kernels load before the first take; the messages of that take (queued
    meanwhile, or the first one) reach the node flagged held, later ones not."""
    node, executor, make = ros
    receiver = make(own_thread=True, camera_info_timeout_s=0.0, qos_reliability="reliable",
                    event_message_type="dvs_msgs/EventArray", **CALIBRATION_PARAMETERS)
    assert spin_until(executor, lambda: receiver.input.calibration is not None, 10.0)
    publisher = connect(node, executor)
    events = synthetic_events(4000, 10**9)
    for start in (0, 1000, 2000):  # a burst: the first take holds the first message, maybe more
        publisher.publish(codecs.encode_event_array(events[start:start + 1000], 180, 240, "cam"))
    assert spin_until(executor, lambda: len(receiver.batches) == 3, 10.0)
    spin_until(executor, lambda: False, 0.3)
    publisher.publish(codecs.encode_event_array(events[3000:], 180, 240, "cam"))  # after the first take: live
    assert spin_until(executor, lambda: len(receiver.batches) == 4, 10.0)
    held = [batch.held for batch in receiver.batches]
    assert held[0] and not held[3] and held == sorted(held, reverse=True), held  # the held ones first
    assert Events.concatenate([b.events for b in receiver.batches]).equals(events)


def test_load_kernels_runs_the_decoders_and_the_guard_of_each_subscribable_type():
    """load_kernels decodes (EventArray) and guards synthetic messages without error and is fast
    once loaded: a second call in the same process costs milliseconds."""
    import time

    from focus_ros.ros.event_input import SUBSCRIBABLE_TYPES, load_kernels

    for message_type in SUBSCRIBABLE_TYPES:
        load_kernels(message_type)
        started = time.perf_counter()
        assert load_kernels(message_type) < 0.5
        assert time.perf_counter() - started < 0.5

