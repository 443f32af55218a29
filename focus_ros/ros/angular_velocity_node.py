"""ROS 2 node: angular velocity of a rotating event camera by focus-loss maximisation.

Subscribes (raw, decoded with numpy) to ``dvs_msgs/EventArray`` or
``event_camera_msgs/EventPacket`` on ``events`` (remap it, e.g. ``events:=/dvs/events``),
and ``sensor_msgs/CameraInfo`` on the ``camera_info_topic`` parameter. Publishes

- ``angular_velocity`` (geometry_msgs/TwistStamped): rad/s in the events' frame
  (REP-103), stamp = the window's reference time; ``twist.linear`` is not estimated (0);
- ``iwe/uncompensated`` and ``iwe/compensated`` (sensor_msgs/Image, rgb8): the image of
  warped events before and after compensation, only while someone subscribes, at most
  ``image_rate_hz``;
- ``/diagnostics`` (diagnostic_msgs/DiagnosticArray) once a second.

Keeping up: the subscription callback only decodes and buffers; a worker thread runs the
optimisation (Numba releases the GIL). When windows complete faster than they are
processed, the worker skips to the newest complete window, keeps the warm start, and
counts the skipped windows as dropped (``queue_policy: newest``, for live use); with
``queue_policy: all`` (bag evaluation) it processes every window in order, dropping the
oldest only beyond ``max_pending_windows``. Buffers are bounded (``max_buffered_events``).
"""

from __future__ import annotations

import re
import sys
import threading
import time
from collections import deque
from dataclasses import replace

import numpy as np
import rclpy
import rclpy.executors
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from geometry_msgs.msg import TwistStamped
from rcl_interfaces.msg import FloatingPointRange, IntegerRange, ParameterDescriptor, SetParametersResult
from focus_ros.ros.parameters import FocusNode
from rclpy.qos import HistoryPolicy, QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import CameraInfo, Image

from focus_ros.camera import Calibration
from focus_ros.estimators.angular_velocity import (ROTATION_WARPS, T_REF_CHOICES, WARM_STARTS,
                                                   AngularVelocityEstimator, AngularVelocitySettings,
                                                   real_time_settings)
from focus_ros.iwe import KERNELS
from focus_ros.losses import LOSSES
from focus_ros.optimize import OPTIMIZERS
from focus_ros.ros import messages
from focus_ros.ros.entry_point import run_node
from focus_ros.stream import StreamGuard
from focus_ros.transport import EventDecodeError
from focus_ros.visualization import iwe_to_rgb, saturation_scale
from focus_ros.windows import CountWindowCutter, DurationWindowCutter

EVENT_MESSAGE_TYPES = ("dvs_msgs/EventArray", "event_camera_msgs/EventPacket")
#: the estimator's defaults for live use (BFGS, stopped at a relative change of 1e-5, extrapolated warm start)
REAL_TIME = real_time_settings()


def _descriptor(description: str, *, integer_range=None, float_range=None, read_only=False,
                dynamic_typing=False) -> ParameterDescriptor:
    descriptor = ParameterDescriptor(description=description, read_only=read_only,
                                     dynamic_typing=dynamic_typing)
    if integer_range:
        descriptor.integer_range = [IntegerRange(from_value=integer_range[0], to_value=integer_range[1], step=1)]
    if float_range:
        descriptor.floating_point_range = [FloatingPointRange(from_value=float_range[0],
                                                              to_value=float_range[1], step=0.0)]
    return descriptor


#: name -> (default, description, options); options: integer_range / float_range / read_only
PARAMETERS = {
    "event_message_type": ("dvs_msgs/EventArray",
                           "input message type: dvs_msgs/EventArray or event_camera_msgs/EventPacket", {"read_only": True}),
    "qos_reliability": ("best_effort", "events subscription reliability: best_effort (accepts reliable and "
                        "best-effort publishers) or reliable", {"read_only": True}),
    "qos_depth": (1000, "events subscription queue depth (messages)", {"integer_range": (1, 100000), "read_only": True}),
    "camera_info_topic": ("/dvs/camera_info", "sensor_msgs/CameraInfo topic with the intrinsics", {"read_only": True}),
    "camera_info_timeout_s": (2.0, "wait this long (s) for camera_info before using the calibration parameters",
                              {"float_range": (0.0, 60.0), "read_only": True}),
    "calibration.file": ("", "calibration file (ECD calib.txt or focus_ros YAML), used when camera_info is absent",
                         {"read_only": True}),
    "calibration.width": (0, "sensor width (px); 0 = unknown", {"integer_range": (0, 8192), "read_only": True}),
    "calibration.height": (0, "sensor height (px); 0 = unknown", {"integer_range": (0, 8192), "read_only": True}),
    "calibration.fx": (0.0, "focal length x (px)", {"float_range": (0.0, 1e5), "read_only": True}),
    "calibration.fy": (0.0, "focal length y (px)", {"float_range": (0.0, 1e5), "read_only": True}),
    "calibration.cx": (0.0, "principal point x (px)", {"float_range": (-1e5, 1e5), "read_only": True}),
    "calibration.cy": (0.0, "principal point y (px)", {"float_range": (-1e5, 1e5), "read_only": True}),
    "calibration.distortion": ([0.0, 0.0, 0.0, 0.0, 0.0], "radial-tangential k1 k2 p1 p2 k3", {"read_only": True}),
    "window_events": (30000, "events per window", {"integer_range": (100, 10_000_000)}),
    "window_stride_events": (0, "events between consecutive window starts; 0 = window_events (no overlap)",
                             {"integer_range": (0, 10_000_000)}),
    "window_duration_s": (0.0, "> 0: fixed-duration windows of this length (s) instead of event counts",
                          {"float_range": (0.0, 10.0), "read_only": True}),
    "gap_reset_windows": (10.0, "reset the warm start after a gap of this many window durations",
                          {"float_range": (0.0, 1e6)}),
    "max_buffered_events": (2_000_000, "bound on buffered events; older ones are dropped",
                            {"integer_range": (1000, 100_000_000)}),
    "queue_policy": ("newest", "when windows complete faster than they are processed: newest (skip to the "
                     "newest window, live use) or all (process every window in order, for bag evaluation)", {}),
    "max_pending_windows": (100, "queue_policy all: bound on queued windows; beyond it the oldest are dropped",
                            {"integer_range": (1, 100000)}),
    "loss": ("variance", "focus loss (see focus_ros.losses.LOSSES)", {}),
    "use_polarity": (False, "image of warped events with polarity (b_k = p_k) or counts (b_k = 1)", {}),
    "kernel": ("bilinear", "event voting kernel: bilinear or gaussian", {}),
    "kernel_sigma_px": (1.0, "Gaussian kernel standard deviation (px)", {"float_range": (0.1, 10.0)}),
    "blur_sigma_px": (-1.0, "Gaussian blur of the IWE before the loss (px), the paper's epsilon; 0 = none; "
                      "-1 = the loss's default (1 px for spatial losses, 0 otherwise)", {"float_range": (-1.0, 5.0)}),
    "reference_time": ("middle", "window reference time: start, middle or end", {}),
    "warp": ("exact", "rotation warp: exact (exponential map) or small_angle", {}),
    "optimizer": (REAL_TIME.optimizer, "bfgs (default, fastest) or cg (non-linear conjugate gradient, the "
                  "paper's) or lbfgs", {}),
    "max_iterations": (REAL_TIME.optimizer_settings.max_iterations, "optimizer iteration cap per window",
                       {"integer_range": (1, 1000)}),
    "gradient_tolerance": (REAL_TIME.optimizer_settings.gradient_tolerance,
                           "optimizer stops when the gradient norm falls below this", {"float_range": (0.0, 1.0)}),
    "value_tolerance": (REAL_TIME.optimizer_settings.value_tolerance,
                        "optimizer stops when the relative change of the loss falls below this",
                        {"float_range": (0.0, 1.0)}),
    "warm_start": (REAL_TIME.warm_start, "extrapolate (from the last two estimates) or previous (the last "
                   "estimate, the paper's)", {}),
    "image_rate_hz": (5.0, "IWE images per second at most (only while subscribed); 0 = never",
                      {"float_range": (0.0, 1000.0)}),
    "frame_id": ("", "output frame; empty = the frame of the events", {}),
}

ESTIMATOR_PARAMETERS = ("loss", "use_polarity", "kernel", "kernel_sigma_px", "blur_sigma_px", "reference_time",
                        "warp", "optimizer", "max_iterations", "gradient_tolerance", "value_tolerance",
                        "warm_start")
WINDOW_PARAMETERS = ("window_events", "window_stride_events")


class AngularVelocityNode(FocusNode):
    """Thin ROS wrapper around :class:`AngularVelocityEstimator` (see the module docstring)."""

    def __init__(self, **kwargs):
        super().__init__("angular_velocity_node", **kwargs)
        for name, (default, description, options) in PARAMETERS.items():
            self.declare_parameter(name, default, _descriptor(description, **options))
        reasons = self._check_choices({name: self.get_parameter(name).value for name in PARAMETERS})
        if reasons:
            raise ValueError("; ".join(reasons))

        self._lock = threading.Condition()
        self._warned: set[str] = set()
        self._calibration: Calibration | None = None
        self._calibration_source = ""
        self._guard: StreamGuard | None = None
        self._estimator: AngularVelocityEstimator | None = None
        self._windows = None               # CountWindowCutter or DurationWindowCutter, once configured
        self._pending = deque()            # complete windows waiting for the worker: (window, receive time)
        self._waiting = deque()    # (events, width, height, receive time) until the estimator is configured
        self._frame_id = ""
        self._last_image_time = 0.0
        self._settings_changed = False
        self._stats = dict(events_received=0, windows_processed=0, windows_dropped=0, malformed_messages=0,
                           degenerate_windows=0, last_latency_ms=float("nan"), last_iterations=0,
                           last_focus_gain=float("nan"), events_since_report=0, processing_s_since_report=0.0,
                           windows_since_report=0)
        self._last_report_time = time.monotonic()
        self._running = True

        self._twist_publisher = self.create_publisher(TwistStamped, "angular_velocity", 10)
        self._image_publishers = {
            "uncompensated": self.create_publisher(Image, "iwe/uncompensated", 1),
            "compensated": self.create_publisher(Image, "iwe/compensated", 1),
        }
        self._diagnostics_publisher = self.create_publisher(DiagnosticArray, "/diagnostics", 10)

        message_type = self.get_parameter("event_message_type").value
        self._message_class = messages.event_message_class(message_type)
        self._decode = messages.event_decoder(message_type)
        reliability = (ReliabilityPolicy.RELIABLE if self.get_parameter("qos_reliability").value == "reliable"
                       else ReliabilityPolicy.BEST_EFFORT)
        qos = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=self.get_parameter("qos_depth").value,
                         reliability=reliability)
        self.create_subscription(self._message_class, "events", self._on_events, qos, raw=True)
        camera_info_topic = self.get_parameter("camera_info_topic").value
        self.create_subscription(CameraInfo, camera_info_topic, self._on_camera_info, 10)
        self.add_on_set_parameters_callback(self._on_set_parameters)
        self.create_timer(1.0, self._publish_diagnostics)
        self._fallback_timer = self.create_timer(
            max(self.get_parameter("camera_info_timeout_s").value, 0.01), self._use_fallback_calibration)

        self._worker = threading.Thread(target=self._work, name="focus_ros_estimator", daemon=True)
        self._worker.start()
        self.get_logger().info(
            f"waiting for {message_type} on '{self.resolve_topic_name('events')}' and camera_info on "
            f"'{camera_info_topic}'; publishing rad/s on '{self.resolve_topic_name('angular_velocity')}'")

    # ----------------------------------------------------------------- parameters
    def _check_choices(self, values: dict) -> list[str]:
        """Reasons why the parameter values are unusable (empty when fine)."""
        reasons = []
        choices = {"event_message_type": EVENT_MESSAGE_TYPES, "qos_reliability": ("best_effort", "reliable"),
                   "queue_policy": ("newest", "all"),
                   "loss": tuple(LOSSES), "kernel": tuple(KERNELS), "reference_time": T_REF_CHOICES,
                   "warp": ROTATION_WARPS, "optimizer": tuple(OPTIMIZERS), "warm_start": WARM_STARTS}
        for name, allowed in choices.items():
            if name in values and values[name] not in allowed:
                reasons.append(f"{name} '{values[name]}' is not one of: {', '.join(allowed)}")
        return reasons

    def _on_set_parameters(self, parameters) -> SetParametersResult:
        values = {p.name: p.value for p in parameters}
        reasons = self._check_choices(values)
        if not reasons and any(name in values for name in ESTIMATOR_PARAMETERS):
            try:  # the combination, e.g. a loss that does not work with polarity
                AngularVelocityEstimator(self._calibration or Calibration.davis240c(),
                                         self._estimator_settings(values))
            except ValueError as error:
                reasons.append(str(error))
        if reasons:
            return SetParametersResult(successful=False, reason="; ".join(reasons))
        if any(name in values for name in ESTIMATOR_PARAMETERS + WINDOW_PARAMETERS):
            with self._lock:
                self._settings_changed = True
        return SetParametersResult(successful=True)

    def _estimator_settings(self, overrides: dict | None = None) -> AngularVelocitySettings:
        """The estimator settings from the parameters (``overrides``: values about to be set)."""
        overrides = overrides or {}
        value = lambda name: overrides.get(name, self.get_parameter(name).value)  # noqa: E731
        return replace(REAL_TIME, loss=value("loss"), use_polarity=value("use_polarity"), kernel=value("kernel"),
                       sigma=value("kernel_sigma_px"), t_ref=value("reference_time"), warp=value("warp"),
                       blur_sigma_px=None if value("blur_sigma_px") < 0 else value("blur_sigma_px"),
                       optimizer=value("optimizer"), gap_reset_windows=value("gap_reset_windows"),
                       warm_start=value("warm_start"),
                       optimizer_settings=replace(REAL_TIME.optimizer_settings,
                                                  max_iterations=value("max_iterations"),
                                                  gradient_tolerance=value("gradient_tolerance"),
                                                  value_tolerance=value("value_tolerance")))

    def _make_windows(self):
        window_events = self.get_parameter("window_events").value
        stride = self.get_parameter("window_stride_events").value or window_events
        duration = self.get_parameter("window_duration_s").value
        if duration > 0:
            return DurationWindowCutter(int(round(duration * 1e9)))
        return CountWindowCutter(window_events, stride)

    # ----------------------------------------------------------------- calibration
    def _on_camera_info(self, message: CameraInfo) -> None:
        if self._calibration_source == "camera_info":
            return
        try:
            calibration = Calibration.from_camera_info_message(message)
        except ValueError as error:
            self._warn_once("camera_info", f"camera_info unusable: {error}")
            return
        self._set_calibration(calibration, f"camera_info on '{self.get_parameter('camera_info_topic').value}'")

    def _use_fallback_calibration(self) -> None:
        self._fallback_timer.cancel()
        if self._calibration is not None:
            return
        try:
            calibration = messages.calibration_from_parameters(
                {name.split(".", 1)[1]: self.get_parameter(name).value
                 for name in PARAMETERS if name.startswith("calibration.")})
        except ValueError as error:
            self.get_logger().error(
                f"no calibration: nothing on '{self.get_parameter('camera_info_topic').value}' after "
                f"{self.get_parameter('camera_info_timeout_s').value} s and {error}; "
                "waiting for camera_info (events are buffered, bounded)")
            return
        self._set_calibration(calibration, "the calibration parameters (no camera_info arrived)")

    def _set_calibration(self, calibration: Calibration, source: str) -> None:
        previous = self._calibration
        with self._lock:
            self._calibration = calibration
            self._calibration_source = "camera_info" if source.startswith("camera_info") else "parameters"
            self._settings_changed = True
            if previous is None or (previous.width, previous.height) != (calibration.width, calibration.height):
                self._guard = StreamGuard(calibration.width, calibration.height)
            self._lock.notify()
        self.get_logger().info(
            f"using intrinsics from {source}: {calibration.width}x{calibration.height} px, "
            f"fx {calibration.fx:.2f} fy {calibration.fy:.2f} cx {calibration.cx:.2f} cy {calibration.cy:.2f}")

    # ----------------------------------------------------------------- input
    def _warn_once(self, kind: str, text: str) -> None:
        if kind not in self._warned:
            self._warned.add(kind)
            self.get_logger().warning(text + " (reported once)")

    def _on_events(self, serialized: bytes) -> None:
        received = time.monotonic()
        try:
            events, info = self._decode(serialized)
        except EventDecodeError as error:
            self._stats["malformed_messages"] += 1
            # once per kind of fault (the text without its numbers)
            self._warn_once("malformed:" + re.sub(r"\d+", "#", str(error)), f"event message ignored: {error}")
            return
        with self._lock:
            self._stats["events_received"] += len(events)
            self._stats["events_since_report"] += len(events)
            if info.frame_id:
                self._frame_id = info.frame_id
            if self._guard is None or self._windows is None or self._settings_changed:
                self._waiting.append((events, info.width, info.height, received))
                self._bound_waiting()
                self._lock.notify()
                return
            self._accept(events, info.width, info.height, received)

    def _bound_waiting(self) -> None:
        limit = self.get_parameter("max_buffered_events").value
        while sum(len(item[0]) for item in self._waiting) > limit and len(self._waiting) > 1:
            self._waiting.popleft()

    def _accept(self, events, width, height, received) -> None:
        """Guard, window and queue one batch (lock held)."""
        result = self._guard.check(events, width, height)
        for kind, text in result.problems:
            self._warn_once(kind, text)
        if result.restart:
            self._windows.reset()
            self._pending.clear()
            self._estimator.reset()
        # queue policy "newest": at most one window waits (the newest); "all": up to max_pending_windows
        limit = 1 if self.get_parameter("queue_policy").value == "newest" else \
            self.get_parameter("max_pending_windows").value
        for window in self._windows.push(result.events):
            self._pending.append((window, received))
            if len(self._pending) > limit:
                self._pending.popleft()
                self._stats["windows_dropped"] += 1
        if self._pending:
            self._lock.notify()

    # ----------------------------------------------------------------- work
    def _work(self) -> None:
        """Worker thread: estimate the newest complete window, publish, repeat."""
        while self._running:
            with self._lock:
                self._lock.wait_for(lambda: not self._running or self._pending or
                                    (self._settings_changed and self._calibration is not None), timeout=0.5)
                if not self._running:
                    return
                if self._settings_changed and self._calibration is not None:
                    try:
                        self._reconfigure()
                    except ValueError as error:  # checked when set; kept as a last resort
                        self.get_logger().error(f"settings not usable: {error}; keeping the previous ones")
                if not self._pending:
                    continue
                window, received = self._pending.popleft()
                estimator = self._estimator
            self._update_gap_limit(window)
            try:
                started = time.monotonic()
                estimate = estimator.estimate(window)
                with self._lock:
                    self._stats["processing_s_since_report"] += time.monotonic() - started
                    self._stats["windows_since_report"] += 1
                self._publish(estimate, received, estimator)
            except Exception as error:  # noqa: BLE001 - a bad window must not kill the node
                if not self.context.ok():
                    return  # shutting down: publishers are gone
                self._warn_once("estimate_failed", f"estimation failed on a window: {error}")

    def _update_gap_limit(self, window) -> None:
        """A gap longer than gap_reset_windows window durations restarts the windows too,
        so that no window mixes events from both sides of it."""
        windows = self.get_parameter("gap_reset_windows").value
        if windows > 0 and len(window) > 1 and self._guard is not None:
            self._guard.gap_s = max(windows * window.duration_s, 1e-3)

    def _reconfigure(self) -> None:
        """(Re)build estimator and windows from the parameters (lock held)."""
        self._settings_changed = False
        settings = self._estimator_settings()
        previous = self._estimator
        self._estimator = AngularVelocityEstimator(self._calibration, settings)
        if previous is not None and not self._estimator.degenerate_reason:
            self._estimator.previous = previous.previous  # keep the warm start across changes
        self._windows = self._make_windows()
        self._pending.clear()
        if self._estimator.degenerate_reason:
            self.get_logger().error(f"loss '{settings.loss}': {self._estimator.degenerate_reason}")
        self.get_logger().info(f"estimating with loss '{settings.loss}', polarity {settings.use_polarity}, "
                               f"windows of {self._window_description()}")
        while self._waiting:
            events, width, height, received = self._waiting.popleft()
            self._accept(events, width, height, received)

    def _window_description(self) -> str:
        duration = self.get_parameter("window_duration_s").value
        if duration > 0:
            return f"{duration} s"
        return (f"{self.get_parameter('window_events').value} events, stride "
                f"{self.get_parameter('window_stride_events').value or self.get_parameter('window_events').value}")

    def _publish(self, estimate, received, estimator) -> None:
        frame_id = self.get_parameter("frame_id").value or self._frame_id
        stamp = messages.time_from_ns(estimate.t_ref_ns)
        if estimate.degenerate:
            with self._lock:
                self._stats["degenerate_windows"] += 1
            self._warn_once("degenerate", f"no estimate published: {estimate.message}")
            return
        twist = TwistStamped()
        twist.header.stamp = stamp
        twist.header.frame_id = frame_id
        twist.twist.angular.x, twist.twist.angular.y, twist.twist.angular.z = (
            float(v) for v in estimate.angular_velocity)
        self._twist_publisher.publish(twist)
        latency_ms = (time.monotonic() - received) * 1e3
        with self._lock:
            self._stats["windows_processed"] += 1
            self._stats["last_latency_ms"] = latency_ms
            self._stats["last_iterations"] = estimate.iterations
            self._stats["last_focus_gain"] = (estimate.score / estimate.score_at_zero
                                              if estimate.score_at_zero else float("nan"))
        self._maybe_publish_images(estimator, estimate, stamp, frame_id)

    def _maybe_publish_images(self, estimator, estimate, stamp, frame_id) -> None:
        rate = self.get_parameter("image_rate_hz").value
        now = time.monotonic()
        if rate <= 0 or now - self._last_image_time < 1.0 / rate:
            return
        wanted = {name: publisher for name, publisher in self._image_publishers.items()
                  if publisher.get_subscription_count() > 0}
        if not wanted:
            return
        self._last_image_time = now
        # the objective still holds this window; both images share the compensated one's scale
        images = {"uncompensated": estimator.objective.image(np.zeros(3)).image,
                  "compensated": estimator.objective.image(estimate.angular_velocity).image}
        scale = saturation_scale(images["compensated"])
        for name, publisher in wanted.items():
            publisher.publish(messages.rgb_image(iwe_to_rgb(images[name], scale=scale), stamp, frame_id))

    # ----------------------------------------------------------------- diagnostics
    def _publish_diagnostics(self) -> None:
        now = time.monotonic()
        with self._lock:
            stats = dict(self._stats)
            elapsed = max(now - self._last_report_time, 1e-9)
            self._stats["events_since_report"] = 0
            self._stats["processing_s_since_report"] = 0.0
            self._stats["windows_since_report"] = 0
            self._last_report_time = now
            calibration_source = self._calibration_source or "none"
        status = DiagnosticStatus(name=f"{self.get_name()}: angular velocity", hardware_id=frame_id_or(self._frame_id))
        if calibration_source == "none":
            status.level, status.message = DiagnosticStatus.ERROR, "no calibration (camera_info or parameters)"
        elif stats["windows_dropped"] > 0 and stats["windows_dropped"] >= stats["windows_processed"]:
            status.level, status.message = DiagnosticStatus.WARN, "falling behind: most windows dropped"
        else:
            status.level, status.message = DiagnosticStatus.OK, "estimating"
        values = {
            "event_rate_mev_s": stats["events_since_report"] / elapsed / 1e6,
            "events_received": stats["events_received"],
            "windows_processed": stats["windows_processed"],
            "windows_dropped": stats["windows_dropped"],
            "degenerate_windows": stats["degenerate_windows"],
            "malformed_messages": stats["malformed_messages"],
            "latency_ms": stats["last_latency_ms"],
            "processing_ms_per_window": (1e3 * stats["processing_s_since_report"] / stats["windows_since_report"]
                                         if stats["windows_since_report"] else float("nan")),
            "iterations": stats["last_iterations"],
            "focus_gain": stats["last_focus_gain"],
            "calibration_source": calibration_source,
        }
        if self._guard is not None:
            values.update(self._guard.counts)
        status.values = [KeyValue(key=key, value=f"{value:.4g}" if isinstance(value, float) else str(value))
                         for key, value in values.items()]
        array = DiagnosticArray(status=[status])
        array.header.stamp = self.get_clock().now().to_msg()
        self._diagnostics_publisher.publish(array)

    def stop(self) -> None:
        with self._lock:
            self._running = False
            self._lock.notify_all()
        self._worker.join(timeout=5.0)


def frame_id_or(frame_id: str) -> str:
    return frame_id or "event_camera"


def main(argv=None) -> int:
    """Entry point of ``ros2 run focus_ros angular_velocity_node``."""
    return run_node("angular_velocity_node", AngularVelocityNode, rclpy.spin, argv)


if __name__ == "__main__":
    sys.exit(main())
