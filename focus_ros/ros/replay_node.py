"""Replay a ROS 1 or ROS 2 bag onto ROS 2 topics, events as raw bytes.

The Event Camera Dataset's own ROS 1 bags play without conversion: events are turned
from ROS 1 bytes into CDR with numpy (``focus_ros.codecs``; an
``event_camera_msgs/EventPacket`` keeps its event bytes untouched), the other messages
(IMU, camera_info, poses) with rosbags' converter. ROS 2 bags are published as stored;
the legacy ``event_array_msgs/EventArray`` goes out as the ``event_camera_msgs/EventPacket``
it equals field for field. A robot's TF (``/tf``, ``/tf_static``: tf2_msgs/TFMessage, or ROS 1's
tf/tfMessage) is replayed too, ``/tf_static`` transient local as tf2 publishes it. Event times
used for pacing follow the node's time convention (ROS time, ``codecs.EventMessageDecoder``), so
they compare with its estimates' stamps.

Pacing (``rate``):

- ``rate > 0``: at ``rate`` times real time (1.0 = as recorded);
- ``rate == 0``: as fast as the estimator consumes: after each event message the
  replayer waits until the estimates published on ``pace_topic`` (TwistStamped, stamp =
  window reference time) have caught up to within ``pace_lead_events`` events or
  ``pace_lead_s`` seconds of event time of what was published (whichever allows more; or
  ``pace_timeout_s`` passed), so no window is dropped for lack of time. The lead must hold
  more than half a window and a stride: the events bound serves fixed windows of events, the
  time bound the angular velocity node's auto windows (at most ``max_window_duration_s``,
  35 ms by default, whatever the sensor's event rate: on a 1280x720 sensor that is millions of events).

``ros2 run focus_ros replay_node --ros-args -p bag:=/data/boxes_rotation.bag -p rate:=0.5``
or ``focus-ros replay /data/boxes_rotation.bag --rate 0.5``.
"""

from __future__ import annotations

import importlib
import sys
import threading
import time
from bisect import bisect_right
from dataclasses import dataclass
from pathlib import Path

import rclpy
import rclpy.executors
from geometry_msgs.msg import TwistStamped
from focus_ros.ros.parameters import FocusNode, declare_settings
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy

from focus_ros.codecs.message_types import ROS2_REPUBLISHED_MESSAGE_TYPES
from focus_ros.events import NANOSECONDS_PER_SECOND
from focus_ros.sources import bags
from focus_ros.ros.entry_point import run_node
from focus_ros.settings import setting
from focus_ros.sources.errors import BagError

#: the ROS 2 types the replay publishes events as (the legacy type goes out as EventPacket)
EVENT_TYPES = ROS2_REPUBLISHED_MESSAGE_TYPES


def message_class(message_type: str):
    """The rclpy class of 'package/msg/Name'."""
    package, _, name = message_type.split("/")
    try:
        return getattr(importlib.import_module(f"{package}.msg"), name)
    except (ImportError, AttributeError):
        raise BagError(f"message type {message_type} is not available in this ROS environment") from None


@dataclass(frozen=True)
class ReplaySettings:
    """The replayer's parameters (:mod:`focus_ros.settings`)."""

    bag: str = setting("", "ROS 1 .bag file or ROS 2 bag folder", read_only=True)
    rate: float = setting(1.0, "replay rate factor: 1 = real time, 0 = as fast as the estimator consumes",
                          minimum=0.0, maximum=1000.0)
    topics: tuple[str, ...] = setting(("",), "topics to play; empty = all known types")
    pace_topic: str = setting("/angular_velocity", "TwistStamped estimates to pace on when rate is 0")
    pace_lead_events: int = setting(60000, "with rate 0: events published ahead of the last estimate (at least "
                                    "one window and a stride)", unit="events", minimum=1, maximum=100_000_000)
    pace_lead_s: float = setting(0.25, "with rate 0: or this much event time published ahead of the last estimate "
                                 "(at least half the longest window and a stride; the auto windows last at most "
                                 "35 ms by default)", unit="s", minimum=0.0, maximum=3600.0)
    pace_timeout_s: float = setting(2.0, "with rate 0: longest wait for an estimate", unit="s")
    wait_for_subscribers_s: float = setting(5.0, "wait this long for a subscriber to the events before playing",
                                            unit="s")


#: the settings whose parameters the node declares (for the generated reference, docs/nodes.md)
SETTINGS_CLASSES = (ReplaySettings,)


def _qos(topic: str) -> QoSProfile:
    """Reliable, 100 deep; /tf_static also transient local, as tf2's static broadcaster publishes
    it, so that a node started after the replay began still gets the static transforms."""
    qos = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=100, reliability=ReliabilityPolicy.RELIABLE)
    if topic.rstrip("/").endswith("tf_static"):
        qos.durability = DurabilityPolicy.TRANSIENT_LOCAL
    return qos


class BagReplayer(FocusNode):
    """Publishes a bag's messages (see the module docstring)."""

    def __init__(self, bag: str | None = None, rate: float | None = None, **kwargs):
        super().__init__("replay_node", **kwargs)
        defaults = {"bag": bag or ""} | ({"rate": float(rate)} if rate is not None else {})
        declare_settings(self, ReplaySettings, defaults=defaults)
        self.bag_path = Path(self.get_parameter("bag").value)
        self.rate = float(self.get_parameter("rate").value)
        topics = [t for t in self.get_parameter("topics").value if t]
        self._source = bags.open_bag_messages(self.bag_path, topics or None)
        self._topic_publishers = {topic: self.create_publisher(message_class(msgtype), topic, _qos(topic))
                                  for topic, msgtype in self._source.topics.items()}
        self._event_topics = [t for t, msgtype in self._source.topics.items() if msgtype in EVENT_TYPES]
        self._estimated_until_ns = -1
        self._estimate_count = 0
        self._estimate_arrived = threading.Event()
        if self.rate == 0:
            self.create_subscription(TwistStamped, self.get_parameter("pace_topic").value, self._on_estimate, 100)
        self.published_messages = 0
        self.published_events = 0

    def _on_estimate(self, message: TwistStamped) -> None:
        stamp_ns = message.header.stamp.sec * NANOSECONDS_PER_SECOND + message.header.stamp.nanosec
        self._estimated_until_ns = max(self._estimated_until_ns, stamp_ns)
        self._estimate_count += 1
        self._estimate_arrived.set()

    def _wait_for_subscribers(self, executor) -> None:
        deadline = time.monotonic() + self.get_parameter("wait_for_subscribers_s").value
        while time.monotonic() < deadline:
            if all(self._topic_publishers[t].get_subscription_count() > 0 for t in self._event_topics):
                time.sleep(0.2)  # let discovery settle on both sides
                return
            executor.spin_once(timeout_sec=0.05)
        self.get_logger().warning("no subscriber to the events yet: playing anyway")

    def play(self, executor, progress=None) -> int:
        """Publish every message; returns the number of messages published."""
        self._wait_for_subscribers(executor)
        self.get_logger().info(f"playing {self.bag_path} ({', '.join(self._topic_publishers)}) at "
                               + ("the estimator's pace" if self.rate == 0 else f"rate {self.rate}"))
        event_times: list[int] = []     # first timestamp of each published event message
        event_totals: list[int] = []    # events published up to and including that message
        start_wall = None
        first_t = None
        for topic, msgtype, t_ns, payload, event_count, first_event_ns in self._source.messages():
            if first_t is None:
                first_t, start_wall = t_ns, time.monotonic()
            if self.rate > 0:
                delay = start_wall + (t_ns - first_t) / NANOSECONDS_PER_SECOND / self.rate - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
            elif event_count and event_totals:
                self._wait_for_consumer(executor, event_times, event_totals)
            self._topic_publishers[topic].publish(payload)
            self.published_messages += 1
            if event_count:
                self.published_events += event_count
                event_times.append(first_event_ns)
                event_totals.append(self.published_events)
                if progress is not None:
                    progress.update(event_count)
            executor.spin_once(timeout_sec=0)
        if self.rate == 0 and event_totals:
            self._wait_for_consumer(executor, event_times, event_totals, final=True)
        from rclpy.duration import Duration
        for publisher in self._topic_publishers.values():  # deliver the last messages before exiting
            publisher.wait_for_all_acked(Duration(seconds=2.0))
        return self.published_messages

    def _wait_for_consumer(self, executor, event_times, event_totals, final=False) -> None:
        """Block until the estimates cover all but pace_lead_events (or pace_lead_s of event time)
        of what was published.

        An estimate stamped t_ref shows the estimator has taken in the events up to the
        message holding t_ref (at least). With ``final``, wait until estimates stop coming.
        """
        timeout = self.get_parameter("pace_timeout_s").value
        if final:
            while True:
                self._estimate_arrived.clear()
                deadline = time.monotonic() + min(timeout, 1.0)
                while not self._estimate_arrived.is_set() and time.monotonic() < deadline:
                    executor.spin_once(timeout_sec=0.01)
                if not self._estimate_arrived.is_set():
                    return
        lead = self.get_parameter("pace_lead_events").value
        lead_ns = int(self.get_parameter("pace_lead_s").value * NANOSECONDS_PER_SECOND)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            index = bisect_right(event_times, self._estimated_until_ns) - 1
            estimated_events = event_totals[index - 1] if index > 0 else 0
            estimated_until_ns = max(self._estimated_until_ns, event_times[0])
            if self.published_events - estimated_events <= lead or event_times[-1] - estimated_until_ns <= lead_ns:
                return
            executor.spin_once(timeout_sec=0.01)


def replay_bag(bag: str, rate: float, pace_topic: str, pace_lead_events: int, wait_for_subscribers_s: float,
               topics: list[str] | None = None, pace_lead_s: float = 0.25) -> tuple[int, int]:
    """``focus-ros replay``: play ``bag`` once in a ROS context of its own (``rate`` as the node's
    parameter: 0 = paced on ``pace_topic``), with a progress bar on stderr; returns (messages,
    events) published."""
    from rclpy.parameter import Parameter
    from tqdm import tqdm

    rclpy.init(args=["focus-ros-replay"])
    node = None
    try:
        overrides = [Parameter("pace_topic", value=pace_topic), Parameter("pace_lead_events", value=pace_lead_events),
                     Parameter("pace_lead_s", value=float(pace_lead_s)),
                     Parameter("wait_for_subscribers_s", value=float(wait_for_subscribers_s))]
        if topics:
            overrides.append(Parameter("topics", value=list(topics)))
        node = BagReplayer(bag=bag, rate=rate, parameter_overrides=overrides)
        executor = rclpy.executors.SingleThreadedExecutor()
        executor.add_node(node)
        with tqdm(unit="ev", unit_scale=True, desc="replay", file=sys.stderr, disable=None) as progress:
            node.play(executor, progress)
        return node.published_messages, node.published_events
    finally:
        if node is not None:
            node.destroy_node()
        rclpy.try_shutdown()


def main(argv=None) -> int:
    """Entry point of ``ros2 run focus_ros replay_node``."""
    def play(node: BagReplayer) -> None:
        executor = rclpy.executors.SingleThreadedExecutor()
        executor.add_node(node)
        node.play(executor)
        node.get_logger().info(f"done: {node.published_messages} messages, {node.published_events} events")

    return run_node("replay_node", BagReplayer, play, argv)


if __name__ == "__main__":
    sys.exit(main())
