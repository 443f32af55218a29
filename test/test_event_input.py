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
from focus_ros.ros.event_input import PARAMETERS, EventInput  # noqa: E402
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
    for name, (default, _, _) in PARAMETERS.items():
        descriptor = receiver.node.describe_parameter(name)
        assert descriptor.description, name
        if name != "camera_info_topic":
            assert receiver.node.get_parameter(name).value == default, name
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
    # an event outside the declared sensor (the decoder refuses the message), an event going
    # back in time (dropped) and a jump back by 0.9 s (the stream restarts)
    bad = synthetic_events(10, 2 * 10**9)
    publisher.publish(_raw_event_array(Events(np.where(np.arange(10) == 3, 500, bad.x), bad.y, bad.t, bad.p)))
    publisher.publish(codecs.encode_event_array(
        Events(bad.x, bad.y, np.where(np.arange(10) == 3, bad.t[0] - 1, bad.t), bad.p), 180, 240, "cam"))
    back = synthetic_events(100, 10**8, seed=1)
    publisher.publish(codecs.encode_event_array(back, 180, 240, "cam"))
    assert spin_until(executor, lambda: len(receiver.batches) == 5, 10.0)
    assert len(receiver.batches[3].events) == 9 and not receiver.batches[3].restart
    assert receiver.batches[4].restart and receiver.batches[4].events.equals(back)
    values = receiver.input.diagnostics()
    assert values["events_received"] == 3110 and values["malformed_messages"] == 1
    assert values["out_of_order_events"] == 1 and values["restarts"] == 1
    assert values["calibration_source"] == "camera_info"


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


def _raw_event_array(events: Events) -> bytes:
    """An EventArray serialized by rclpy itself, whatever its coordinates."""
    from builtin_interfaces.msg import Time
    from dvs_msgs.msg import Event
    from rclpy.serialization import serialize_message

    message = EventArray(height=180, width=240)
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
