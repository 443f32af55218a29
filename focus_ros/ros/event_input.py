"""One way in for events, shared by every focus_ros node.

:class:`EventInput` is composed by a node and owns everything about getting events in:

- its parameters, declared on the node with descriptions and ranges (:data:`PARAMETERS`:
  ``event_message_type``, ``qos_reliability``, ``qos_depth``, ``camera_info_topic``,
  ``camera_info_timeout_s``, ``calibration.*``, ``max_buffered_events``);
- the raw subscription on ``events`` (serialized bytes, decoded with numpy by
  :func:`focus_ros.ros.messages.event_decoder`: one decoder per subscription, they may keep
  state from one message to the next), of the type ``event_message_type`` names or, with
  ``auto`` (the default), the type the topic's publishers offer (subscribed as soon as one
  appears; one log line says which); messages already queued behind the one the executor
  hands over are taken in the same callback (up to :data:`MESSAGES_PER_CALLBACK`), so that a
  burst costs one pass of rclpy's wait set, not one per message;
- a look at the ROS graph every :data:`GRAPH_CHECK_PERIOD_S` (steady clock): a warning,
  naming the fix, when the events topic carries a type we cannot decode or another than the
  one subscribed to, or when a publisher's QoS cannot match the subscription (a best-effort
  driver against ``qos_reliability: reliable``), which would otherwise be total silence;
- the :class:`~focus_ros.stream.StreamGuard` (sensor bounds, time order, gaps, restarts);
- the compiled code every message runs (the decoder of the subscribed type, the stream guard),
  loaded or compiled by :func:`load_kernels` before the subscription is made, not inside the
  first message's decoding (with an empty Numba cache that took about a second while the
  sensor's messages piled up, and a live node then kept only the newest of the windows of that
  burst); the messages of the own thread's first take reach the node flagged as held;
- the calibration: a usable ``sensor_msgs/CameraInfo`` on ``camera_info_topic`` (an unusable
  one, NaN or implausible, is refused with its reason; a later, different one replaces the
  calibration in use and ``on_calibration`` is called again; identical ones are skipped; one
  identical to the parameters' calibration in use only changes ``calibration_source``), or
  after ``camera_info_timeout_s`` (steady clock: it fires with ``use_sim_time`` and no
  ``/clock`` too) the ``calibration.*`` parameters / ``calibration.file``; one log line says
  which is used, one error line when there is none (camera_info is then still awaited). The
  timeout first takes any camera_info already waiting in the subscription's queue: rclpy's
  executor runs a due timer before a ready subscription, so after a long callback the
  fallback would otherwise win over a camera_info that came in time;
- buffering while there is no calibration yet (bounded by ``max_buffered_events``, oldest
  messages dropped first and counted); held batches reach the node flagged
  :attr:`EventBatch.held`, so that it works them off in order instead of treating them as a
  live burst (its runner's ``push(job, held=True)``);
- warn-once logging of input faults (one line per kind of fault) and the diagnostic counters
  (:meth:`EventInput.diagnostics`) a node adds to its own ``/diagnostics`` status, with
  :meth:`EventInput.problem` for its level.

It hands the node guarded :class:`EventBatch` es (events inside the sensor, time never going
back, receive time, frame_id, restart flag) and calibration changes through callbacks, both
called on the executor thread that runs the subscriptions, in arrival order.

Usage (the node stays thin)::

    class MyNode(Node):
        def __init__(self):
            super().__init__("my_node")
            self._input = EventInput(self, self._on_events, self._on_calibration)

        def _on_calibration(self, calibration: Calibration, source: str) -> None:
            ...  # (re)build what depends on the intrinsics, restart the estimator's state (called
                 # again when a different calibration arrives); source: "camera_info" or "parameters"

        def _on_events(self, batch: EventBatch) -> None:
            if batch.restart:
                ...  # the stream restarted (gap or jump back in time): drop buffered windows, warm starts
            ...  # batch.events (Events), batch.received_s (time.monotonic()), batch.frame_id

        def _publish_diagnostics(self):
            values = {"my_counter": 3, **self._input.diagnostics()}

Locking: the callbacks run with the input's internal lock held (so batches stay in order even
under a multi-threaded executor). A node may take its own lock inside them; it must then not
wait for anything the callbacks wait for. :meth:`diagnostics`, :meth:`set_gap_s`,
:meth:`warn_once` and the properties never take that lock.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import Callable

import numpy as np
from rclpy.callback_groups import CallbackGroup
from rclpy.clock import Clock, ClockType
from rclpy.exceptions import InvalidHandle
from rclpy.impl.implementation_singleton import rclpy_implementation as _rclpy
from rclpy.qos import HistoryPolicy, QoSCompatibility, QoSProfile, ReliabilityPolicy, qos_check_compatible
from sensor_msgs.msg import CameraInfo

from focus_ros.camera import Calibration
from focus_ros.codecs import message_types
from focus_ros.events import Events
from focus_ros.ros import messages
from focus_ros.ros.log import WarnOnce, fault_kind
from focus_ros.ros.parameters import declare_settings, settings_from_parameters
from focus_ros.settings import declared, setting
from focus_ros.stream import COUNTERS, StreamGuard

#: the event message types a ROS 2 node can subscribe to (``event_message_type``)
SUBSCRIBABLE_TYPES = message_types.SUBSCRIBABLE_EVENT_MESSAGE_TYPES
#: ``event_message_type`` value: subscribe with the type the topic's publishers offer
AUTO = "auto"
#: event messages handled per subscription callback at most (the first and those already queued
#: behind it), so that a burst does not keep the executor from its other callbacks for long
MESSAGES_PER_CALLBACK = 32
QOS_RELIABILITIES = ("best_effort", "reliable")
#: period (s, steady clock) of the look at the ROS graph: the events topic's type (``auto``)
#: and whether its publishers' QoS and type can match the subscriptions; a fault is warned
#: about within about this long of a publisher appearing
GRAPH_CHECK_PERIOD_S = 0.25


@dataclass(frozen=True)
class EventInputSettings:
    """The event input's parameters, declared by every node (:mod:`focus_ros.settings`): the
    subscription, and the calibration used when no camera_info comes."""

    event_message_type: str = setting(AUTO, f"input message type; {AUTO} = the type the topic's publishers "
                                      "offer", choices=(AUTO, *SUBSCRIBABLE_TYPES), read_only=True)
    qos_reliability: str = setting("best_effort", "events subscription reliability: best_effort accepts reliable and "
                                   "best-effort publishers", choices=QOS_RELIABILITIES, read_only=True)
    qos_depth: int = setting(1000, "events subscription queue depth", unit="messages", minimum=1, maximum=100000,
                             read_only=True)
    camera_info_topic: str = setting("/dvs/camera_info", "sensor_msgs/CameraInfo topic with the intrinsics",
                                     read_only=True)
    camera_info_timeout_s: float = setting(2.0, "wait this long for camera_info before using the calibration "
                                           "parameters", unit="s", minimum=0.0, maximum=60.0, read_only=True)
    calibration_file: str = setting("", "calibration file (ECD calib.txt or focus_ros YAML), used when camera_info "
                                    "is absent", parameter="calibration.file", read_only=True)
    calibration_width: int = setting(0, "sensor width; 0 = unknown", unit="px", minimum=0, maximum=8192,
                                     parameter="calibration.width", read_only=True)
    calibration_height: int = setting(0, "sensor height; 0 = unknown", unit="px", minimum=0, maximum=8192,
                                      parameter="calibration.height", read_only=True)
    calibration_fx: float = setting(0.0, "focal length x", unit="px", minimum=0.0, maximum=1e5,
                                    parameter="calibration.fx", read_only=True)
    calibration_fy: float = setting(0.0, "focal length y", unit="px", minimum=0.0, maximum=1e5,
                                    parameter="calibration.fy", read_only=True)
    calibration_cx: float = setting(0.0, "principal point x", unit="px", minimum=-1e5, maximum=1e5,
                                    parameter="calibration.cx", read_only=True)
    calibration_cy: float = setting(0.0, "principal point y", unit="px", minimum=-1e5, maximum=1e5,
                                    parameter="calibration.cy", read_only=True)
    calibration_distortion: tuple[float, ...] = setting((0.0, 0.0, 0.0, 0.0, 0.0), "radial-tangential k1 k2 p1 p2 k3",
                                                        parameter="calibration.distortion", read_only=True)
    max_buffered_events: int = setting(2_000_000, "bound on events held while there is no calibration yet (oldest "
                                       "messages dropped first)", unit="events", minimum=1000, maximum=100_000_000)


#: the event input's ROS parameter names
PARAMETERS = tuple(item.parameter for item in declared(EventInputSettings))


@dataclass(frozen=True)
class EventBatch:
    """One message's usable events, as the node receives them.

    events: inside the sensor, timestamps (ns) never going back, never empty (messages left
    with no usable events are not delivered); received_s: ``time.monotonic()`` (s) when the message
    arrived (for latency); frame_id: the message's header frame; restart: the stream restarted
    just before these events (a gap longer than the guard's ``gap_s`` or a jump back in time):
    drop buffered windows and warm starts before using them; held: the message arrived before
    the input could use it (before a calibration, delivered right after ``on_calibration``; or
    in the own thread's first take, while an EventPacket's decoder compiled on the first
    message): one of a backlog delivered at once, not a sign that the node falls behind (a
    node pushes the jobs cut from it with :meth:`EstimatorRunner.push(job, held=True)
    <focus_ros.runtime.EstimatorRunner.push>`).
    """

    events: Events
    received_s: float
    frame_id: str
    restart: bool = False
    held: bool = False


#: the own thread's wait (ns) between checks that the input is still open
_WAIT_NS = 100_000_000

#: load_kernels taking longer than this (s) was a compile, not a load from Numba's cache: said once
_COMPILE_NOTICE_S = 0.5


def load_kernels(message_type: str) -> float:
    """Run the compiled code that a subscription of ``message_type`` runs on every message (the
    stream guard, and the decoder of an EventArray type) on small synthetic messages, one per
    frame-id alignment, and return the wall time this took (s).

    Why beforehand: numba compiles a kernel on its first call in a process (with an empty
    cache 0.8 s for the EventArray decoder and the guard on one core of a 2-core machine, 2 to
    3 times that while the estimator compiles beside it) or loads it from its cache
    (milliseconds). Compiled inside the first message's decoding, it held the input while the
    sensor's messages piled up; the node then cut a second of windows at once and a live node
    (``queue_policy: newest``) estimated only the newest of them. An EventPacket's decoder
    depends on its encoding, known from its first message only (compiling all four beforehand
    took 13 s): it compiles on that message, and the messages that queue meanwhile reach the
    node flagged as held (:attr:`EventBatch.held`; see :class:`EventInput`, ``own_thread``).
    Run before the subscription exists, this also keeps its CPU from the moment a waiting
    publisher starts (a burst of best-effort messages then lost for lack of a core)."""
    from focus_ros.kernels.precompile import decode_like_a_subscription

    started = time.perf_counter()
    decode_like_a_subscription(message_type, packet_encodings=())
    return time.perf_counter() - started


class _OutsideTheExecutor(CallbackGroup):
    """The callback group of a subscription that no executor runs (EventInput's own thread
    takes its messages)."""

    def can_execute(self, entity) -> bool:
        return False

    def beginning_execution(self, entity) -> bool:
        return False

    def ending_execution(self, entity) -> None:
        pass


class EventInput:
    """The event subscription, decoding, stream guard and calibration of a node (see the module
    docstring).

    node: the rclpy Node that owns it (parameters are declared on it);
    on_events(EventBatch): called for every message with usable events, in order;
    on_calibration(Calibration, source): called when the intrinsics become known or change
    (source "camera_info" or "parameters"): the node rebuilds what depends on them and
    restarts its estimator's state; buffered events follow it;
    parameter_defaults: overrides of :data:`PARAMETERS` defaults for this node;
    callback_group: for the subscriptions and the timers (None: the node's default);
    own_thread: take and handle the event messages on a thread of the input's own, waiting on
    the events subscription alone (rclpy's wait set, as ``rclpy.wait_for_message`` does),
    instead of the executor's thread: rclpy's executor costs about as much per message as
    all the input's own work (BENCHMARKS.md, "The executor's CPU per event message").
    ``on_events`` (and ``on_calibration`` for buffered events) then run on that thread,
    beside the executor's callbacks: the node must guard its state with a lock. The thread
    starts at once for an explicit ``event_message_type`` (when the topic's publishers show
    their type for ``auto``), loads the input's kernels (:func:`load_kernels`), makes the
    subscription and ends with the context, the node's destruction or :meth:`close`.
    """

    def __init__(self, node, on_events: Callable[[EventBatch], None],
                 on_calibration: Callable[[Calibration, str], None] | None = None, *,
                 parameter_defaults: dict | None = None, callback_group=None, own_thread: bool = False):
        self._node = node
        self._on_events = on_events
        self._on_calibration = on_calibration
        defaults = parameter_defaults or {}
        unknown = set(defaults) - set(PARAMETERS)
        if unknown:
            raise ValueError(f"unknown event input parameters: {', '.join(sorted(unknown))}")
        names = {item.parameter: item.name for item in declared(EventInputSettings)}
        declare_settings(node, EventInputSettings, defaults={names[name]: value for name, value in defaults.items()})
        settings_from_parameters(node, EventInputSettings)  # ValueError naming a value not among its choices
        value = lambda name: node.get_parameter(name).value  # noqa: E731

        self.camera_info_topic = value("camera_info_topic")
        self.warn_once = WarnOnce(node.get_logger())
        self._lock = threading.RLock()
        self._calibration: Calibration | None = None
        self._calibration_source = "none"
        self._camera_info_seen = None  # the fields of the last camera_info looked at (identical ones are skipped)
        self._guard: StreamGuard | None = None
        self._gap_s: float | None = None
        self._frame_id = ""
        self._camera_info_frame_id = ""
        self._waiting: deque = deque()  # (events, width, height, outside, received_s, frame_id) until calibrated
        self._waiting_events = 0
        self._counts = dict(messages_received=0, events_received=0, malformed_messages=0,
                            events_dropped_unconfigured=0, camera_info_received=0, camera_info_refused=0,
                            calibration_changes=0)
        self._problems: dict[str, str] = {}  # what keeps input from arriving, by topic ("events", "camera_info")
        self._events_since_report = 0
        self._last_report_s = time.monotonic()

        self._requested_type = value("event_message_type")
        self._message_type: str | None = None
        self._decode = None
        self._subscription = None
        self._own_thread = own_thread
        self._callback_group = callback_group
        self._thread = None
        self._closed = False
        reliability = (ReliabilityPolicy.RELIABLE if value("qos_reliability") == "reliable"
                       else ReliabilityPolicy.BEST_EFFORT)
        self._qos = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=value("qos_depth"), reliability=reliability)
        if self._requested_type != AUTO:
            self._subscribe(self._requested_type)
        self._camera_info_qos = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=10)
        self._camera_info_subscription = node.create_subscription(
            CameraInfo, self.camera_info_topic, self._on_camera_info, self._camera_info_qos,
            callback_group=callback_group)
        # timers on the steady clock: with use_sim_time and no /clock a timer on the node's clock never fires
        steady = Clock(clock_type=ClockType.STEADY_TIME)
        self._fallback_timer = node.create_timer(max(value("camera_info_timeout_s"), 0.01),
                                                 self._use_fallback_calibration, callback_group=callback_group,
                                                 clock=steady)
        self._graph_timer = node.create_timer(GRAPH_CHECK_PERIOD_S, self._check_graph,
                                              callback_group=callback_group, clock=steady)

    def close(self, timeout_s: float = 1.0) -> None:
        """Stop the input's own thread (``own_thread``), waiting up to timeout_s (s) for it."""
        self._closed = True
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout_s)

    # ----------------------------------------------------------------- state
    @property
    def message_type(self) -> str:
        """The event message type subscribed to; with ``auto`` before the topic's publishers
        showed theirs, the types it may become (for the node's "waiting for ..." line)."""
        if self._message_type is not None:
            return self._message_type
        return f"{' or '.join(SUBSCRIBABLE_TYPES)} (event_message_type auto: the type its publishers offer)"

    @property
    def calibration(self) -> Calibration | None:
        """The intrinsics in use (None until camera_info or the fallback gave them)."""
        return self._calibration

    @property
    def calibration_source(self) -> str:
        """"camera_info", "parameters" or "none"."""
        return self._calibration_source

    @property
    def frame_id(self) -> str:
        """The camera's frame: the last event message's frame_id, else camera_info's ('' before either)."""
        return self._frame_id or self._camera_info_frame_id

    @property
    def events_topic(self) -> str:
        return self._node.resolve_topic_name("events")

    def set_gap_s(self, gap_s: float | None) -> None:
        """A gap between events longer than this (s) restarts the stream (None: never)."""
        self._gap_s = gap_s
        guard = self._guard
        if guard is not None:
            guard.gap_s = gap_s

    def problem(self) -> tuple[str, str] | None:
        """("warn", what keeps input from arriving) or None: the events topic's type or QoS
        cannot match, camera_info refused while no calibration is in use. For the node's
        /diagnostics level (see :func:`focus_ros.ros.messages.estimator_status`)."""
        problems = dict(self._problems)
        if self._calibration is not None:
            problems.pop("camera_info_refused", None)
        return ("warn", "; ".join(problems.values())) if problems else None

    def diagnostics(self) -> dict:
        """Counters for the node's /diagnostics status: event_rate_mev_s (since the previous
        call), events_received, messages_received, malformed_messages,
        events_dropped_unconfigured (dropped while waiting for a calibration), camera_info_received
        (every camera_info message taken), camera_info_refused (distinct camera_info messages
        refused as unusable), calibration_changes (a later,
        different calibration taken), the stream guard's counts (:data:`focus_ros.stream.COUNTERS`:
        empty_messages, out_of_range_events, unsorted_messages, out_of_order_events, restarts,
        size_mismatch_messages), calibration_source, event_message_type (as subscribed, or
        "auto (no publisher yet)") and input_problem (what keeps input from arriving, '' when nothing)."""
        now = time.monotonic()
        since, self._events_since_report = self._events_since_report, 0
        elapsed = max(now - self._last_report_s, 1e-9)
        self._last_report_s = now
        values = {"event_rate_mev_s": since / elapsed / 1e6, **self._counts}
        guard = self._guard
        values.update(guard.counts if guard is not None else dict.fromkeys(COUNTERS, 0))
        values["calibration_source"] = self._calibration_source
        values["event_message_type"] = self._message_type or "auto (no publisher yet)"
        problem = self.problem()
        values["input_problem"] = problem[1] if problem else ""
        return values

    # ----------------------------------------------------------------- subscription
    def _load_kernels(self, message_type: str) -> None:
        """:func:`load_kernels`, the time said once when it was a compile (an empty or stale cache)."""
        took_s = load_kernels(message_type)
        if took_s > _COMPILE_NOTICE_S:
            row = message_types.event_message_type(message_type)
            what = "the stream guard" if row is not None and row.packet else f"the {message_type} decoder and guard"
            self.warn_once("compiled_input", f"compiled {what} in {took_s:.1f} s (not in Numba's cache; `python -m "
                           "focus_ros.kernels` at install does it beforehand); messages that came meanwhile are used")

    def _subscribe(self, message_type: str) -> None:
        """Subscribe to ``events`` as message_type (serialized bytes). The decoder and the guard
        are loaded first (:func:`load_kernels`), so that the subscription, which publishers that
        wait for subscribers (a bag player, a test) wait for, appears only once the input can
        take messages at full speed: on the own thread, which then subscribes and takes the
        messages (the executor is not held meanwhile), or here when the executor takes them."""
        message_class = messages.event_message_class(message_type)
        self._decode = messages.event_decoder(message_type)
        self._message_type = message_type
        if self._own_thread:
            self._thread = threading.Thread(target=self._take_loop, args=(message_class,), name="event_input",
                                            daemon=True)
            self._thread.start()
            return
        self._load_kernels(message_type)
        self._subscription = self._node.create_subscription(message_class, "events", self._on_message, self._qos,
                                                            raw=True, callback_group=self._callback_group)

    def _check_graph(self) -> None:
        """The steady timer's look at the graph: with ``auto``, subscribe as soon as the events
        topic's publishers show a type we decode; warn (once per kind) when its publishers offer
        a type we cannot decode or that differs from the one subscribed to, or a QoS that cannot
        match a subscription (events or camera_info), naming the parameter that fixes it."""
        if self._closed:
            return
        node, topic = self._node, self.events_topic
        try:
            publishers = node.get_publishers_info_by_topic(topic)
            camera_info_publishers = node.get_publishers_info_by_topic(self.camera_info_topic)
        except Exception:  # noqa: BLE001 - the node is being destroyed
            return
        offered = sorted({message_types.short_message_type(info.topic_type) for info in publishers})
        decodable = [name for name in offered if name in SUBSCRIBABLE_TYPES]
        type_problem = ""
        if self._message_type is None and decodable:
            try:
                self._subscribe(decodable[0])
            except ValueError as error:  # its interface package is not built here
                type_problem = f"'{topic}' carries {decodable[0]}: {error}"
            else:
                others = [name for name in offered if name != decodable[0]]
                node.get_logger().info(f"events on '{topic}' are {decodable[0]}, the type its publishers offer: "
                                       "subscribed" + (f" (it also carries {', '.join(others)})" if others else ""))
        elif offered and not decodable:
            type_problem = (f"'{topic}' carries {', '.join(offered)}, not an event message type focus_ros can "
                            f"subscribe to ({', '.join(SUBSCRIBABLE_TYPES)}): remap events:= to the camera's "
                            "event topic")
        elif self._message_type is not None and offered and self._message_type not in offered:
            type_problem = (f"the publishers on '{topic}' offer {', '.join(offered)}, not {self._message_type}: "
                            f"set event_message_type:={decodable[0]} (or {AUTO})")
        if type_problem:
            self.warn_once("topic_type:" + ",".join(offered), type_problem)
        problems = [type_problem] if type_problem else []
        if self._message_type is not None:
            problems += self._qos_mismatches(topic, publishers, self._qos)
        problems += self._qos_mismatches(self.camera_info_topic, camera_info_publishers, self._camera_info_qos)
        if problems:
            self._problems["graph"] = "; ".join(problems)
        else:
            self._problems.pop("graph", None)

    def _qos_mismatches(self, topic: str, publishers, subscription_qos: QoSProfile) -> list[str]:
        """One line per publisher on topic whose QoS cannot match subscription_qos (rclpy's
        compatibility check), each warned about once per reason, naming the fix."""
        lines = []
        for info in publishers:
            compatibility, reason = qos_check_compatible(info.qos_profile, subscription_qos)
            if compatibility != QoSCompatibility.ERROR:
                continue
            reason = reason.strip().rstrip(";")
            if (subscription_qos.reliability == ReliabilityPolicy.RELIABLE
                    and info.qos_profile.reliability == ReliabilityPolicy.BEST_EFFORT):
                fix = ("set qos_reliability:=best_effort" if subscription_qos is self._qos
                       else "publish camera_info reliable")
            else:
                fix = "publish with QoS this subscription can match"
            line = (f"the publisher '{info.node_namespace.rstrip('/')}/{info.node_name}' on '{topic}' offers a QoS "
                    f"this node's subscription cannot match ({reason}): nothing arrives from it; {fix}")
            self.warn_once(f"qos:{topic}:{reason}", line)
            lines.append(line)
        return lines

    # ----------------------------------------------------------------- events
    def _on_message(self, serialized: bytes) -> None:
        """The subscription's callback: this message, then those already waiting behind it
        (at most :data:`MESSAGES_PER_CALLBACK` in all), taken here in order: one pass of the
        executor's wait set (its Python costs about as much as decoding a message) for a burst
        of messages instead of one per message."""
        self._receive(serialized)
        subscription = self._subscription
        for _ in range(MESSAGES_PER_CALLBACK - 1):
            try:
                with subscription.handle:
                    taken = subscription.handle.take_message(subscription.msg_type, True)
            except Exception:  # noqa: BLE001 - destroyed (shutdown) or not takeable: the executor takes the rest
                return
            if taken is None:
                return
            self._receive(taken[0])

    def _take_loop(self, message_class) -> None:
        """``own_thread``: load the kernels, subscribe, then wait on the events subscription alone
        and take every queued message. The messages of the first take (the first message, an
        EventPacket's encoding compiled on it, and all that queued while it was decoded) are
        delivered as held: a backlog, not a live burst."""
        try:
            self._load_kernels(self._message_type)
        except Exception as error:  # noqa: BLE001 - the first message compiles then, as it used to
            self.warn_once("load_kernels", f"event input: loading the decoder beforehand failed: {error}")
        context = self._node.context
        try:
            if self._closed or not context.ok():
                return
            subscription = self._node.create_subscription(message_class, "events", self._on_message, self._qos,
                                                          raw=True, callback_group=_OutsideTheExecutor())
            wait_set = _rclpy.WaitSet(1, 0, 0, 0, 0, 0, context.handle)
        except Exception:  # noqa: BLE001 - the node was destroyed or shut down while the kernels loaded
            return
        self._subscription = subscription
        backlog = True
        while not self._closed and context.ok():
            try:
                with subscription.handle:
                    wait_set.clear_entities()
                    wait_set.add_subscription(subscription.handle)
                    wait_set.wait(_WAIT_NS)
                    if subscription.handle.pointer not in wait_set.get_ready_entities("subscription"):
                        continue
                    took = False
                    while not self._closed:
                        taken = subscription.handle.take_message(subscription.msg_type, True)
                        if taken is None:
                            break
                        self._receive(taken[0], held=backlog)
                        took = True
                    backlog = backlog and not took
            except InvalidHandle:  # the node (or its subscription) was destroyed
                return
            except Exception as error:  # noqa: BLE001 - the input keeps running; the executor would have raised
                if self._closed or not context.ok():
                    return
                self.warn_once("own_thread:" + fault_kind(error), f"event input: {error}")

    def _receive(self, serialized: bytes, held: bool = False) -> None:
        """Decode one message, count it, and hold it (no calibration yet) or deliver it; held: one
        of the input's first take (see :meth:`_take_loop`)."""
        received_s = time.monotonic()
        try:
            events, info = self._decode(serialized)
        except Exception as error:  # noqa: BLE001 - any undecodable message is a malformed one, not a crash
            self._counts["malformed_messages"] += 1
            # once per kind of fault (EventDecodeError.kind, else the text without its numbers)
            self.warn_once("malformed:" + fault_kind(error), f"event message ignored: {error} "
                           "(malformed_messages counts every one)")
            return
        # events outside the declared size: dropped by the decoder (every encoding), counted by the guard
        outside = getattr(info, "outside_events", 0)
        with self._lock:
            self._counts["messages_received"] += 1
            self._counts["events_received"] += len(events) + outside
            self._events_since_report += len(events) + outside
            if info.frame_id:
                self._frame_id = info.frame_id
            item = (events, info.width, info.height, outside, received_s, info.frame_id or self._frame_id)
            if self._guard is None:
                self._hold(item)
                return
            self._deliver(*item, held=held)

    def _hold(self, item) -> None:
        """Keep a message until there is a calibration (bounded; lock held)."""
        self._waiting.append(item)
        self._waiting_events += len(item[0])
        limit = self._node.get_parameter("max_buffered_events").value
        while self._waiting_events > limit and len(self._waiting) > 1:
            dropped = self._waiting.popleft()
            self._waiting_events -= len(dropped[0])
            self._counts["events_dropped_unconfigured"] += len(dropped[0])
            self.warn_once("unconfigured_overflow", f"more than {limit} events arrived before a calibration: "
                           "the oldest are dropped (max_buffered_events)")

    def _deliver(self, events, width, height, outside, received_s, frame_id, held: bool = False) -> None:
        """Guard one message's events and hand them to the node (lock held); held: it waited
        (:attr:`EventBatch.held`)."""
        result = self._guard.check(events, width, height, dropped_outside=outside)
        for kind, text in result.problems:
            self.warn_once(kind, text)
        if len(result.events):
            self._on_events(EventBatch(result.events, received_s, frame_id, result.restart, held))

    # ----------------------------------------------------------------- calibration
    def _on_camera_info(self, message: CameraInfo) -> None:
        """Take a usable camera_info that differs from the calibration in use (the first, or
        a changed one: a driver reconfigured, a bad one corrected); skip identical ones at the
        cost of comparing their fields; refuse an unusable one with a reason (once per kind),
        keeping the calibration in use."""
        self._counts["camera_info_received"] += 1
        self._camera_info_frame_id = message.header.frame_id or self._camera_info_frame_id
        seen = (int(message.width), int(message.height), message.distortion_model,
                np.asarray(message.k, np.float64).tobytes(), np.asarray(message.d, np.float64).tobytes())
        if seen == self._camera_info_seen:
            return
        self._camera_info_seen = seen
        try:
            calibration = Calibration.from_camera_info_message(message)
        except ValueError as error:
            self._counts["camera_info_refused"] += 1
            keeping = ("keeping the calibration in use" if self._calibration is not None
                       else "still waiting for a usable calibration")
            text = f"camera_info on '{self.camera_info_topic}' refused: {error}; {keeping}"
            self._problems["camera_info_refused"] = text
            self.warn_once("camera_info:" + fault_kind(error), text)
            return
        self._problems.pop("camera_info_refused", None)
        if calibration == self._calibration:
            if self._calibration_source != "camera_info":
                # the same numbers as the parameters in use (a params file written from this camera):
                # nothing to restart, no window to lose; only the source changes
                self._calibration_source = "camera_info"
                self._node.get_logger().info(f"camera_info on '{self.camera_info_topic}' agrees with the calibration "
                                             "parameters in use: calibration_source is now camera_info")
            return
        self._set_calibration(calibration, "camera_info", f"camera_info on '{self.camera_info_topic}'")

    def _take_waiting_camera_info(self) -> None:
        """Handle the camera_info messages already waiting in the subscription's queue, as its
        callback would. rclpy's executor runs a due timer before a ready subscription: after a
        callback that kept the executor busy past ``camera_info_timeout_s``, the timeout would
        otherwise be handled ahead of a camera_info that came in time."""
        subscription = self._camera_info_subscription
        while True:
            try:
                with subscription.handle:
                    taken = subscription.handle.take_message(subscription.msg_type, False)
            except Exception:  # noqa: BLE001 - destroyed (shutdown): nothing waits any more
                return
            if taken is None:
                return
            self._on_camera_info(taken[0])

    def _use_fallback_calibration(self) -> None:
        """The camera_info timeout: the calibration parameters, unless a usable camera_info came
        (also one still waiting in the queue). Said in one line: which calibration, or why none."""
        self._fallback_timer.cancel()
        self._take_waiting_camera_info()
        if self._calibration is not None:
            return
        node = self._node
        timeout_s = node.get_parameter("camera_info_timeout_s").value
        received = self._counts["camera_info_received"]
        camera_info = (f"{received} camera_info on '{self.camera_info_topic}' within {timeout_s} s, none usable"
                       if received else f"no camera_info on '{self.camera_info_topic}' within {timeout_s} s")
        try:
            calibration = messages.calibration_from_parameters(
                {name.split(".", 1)[1]: node.get_parameter(name).value
                 for name in PARAMETERS if name.startswith("calibration.")})
        except (ValueError, OSError) as error:
            node.get_logger().error(f"no calibration yet: {camera_info}, and {error}; waiting for camera_info "
                                    "(events are held, bounded by max_buffered_events)")
            return
        self._set_calibration(calibration, "parameters", f"the calibration parameters ({camera_info})")

    def _set_calibration(self, calibration: Calibration, source: str, description: str) -> None:
        with self._lock:
            previous = self._calibration
            self._calibration = calibration
            self._calibration_source = source
            if previous is None or (previous.width, previous.height) != (calibration.width, calibration.height):
                self._guard = StreamGuard(calibration.width, calibration.height, gap_s=self._gap_s)
            text = (f"using intrinsics from {description}: {calibration.width}x{calibration.height} px, "
                    f"fx {calibration.fx:.2f} fy {calibration.fy:.2f} cx {calibration.cx:.2f} cy {calibration.cy:.2f}")
            if previous is not None:
                self._counts["calibration_changes"] += 1
                text = (f"calibration changed: {text} (was {previous.width}x{previous.height} px, "
                        f"fx {previous.fx:.2f} fy {previous.fy:.2f} cx {previous.cx:.2f} cy {previous.cy:.2f}); "
                        "the estimator uses it from its next window")
            self._node.get_logger().info(text)
            if self._on_calibration is not None:
                self._on_calibration(calibration, source)
            while self._waiting:
                item = self._waiting.popleft()
                self._waiting_events -= len(item[0])
                self._deliver(*item, held=True)
