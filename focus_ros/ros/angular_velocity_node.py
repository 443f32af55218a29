"""ROS 2 node: angular velocity of a rotating event camera by focus-loss maximisation.

Subscribes (raw, decoded with numpy) to ``dvs_msgs/EventArray`` or
``event_camera_msgs/EventPacket`` on ``events`` (remap it, e.g. ``events:=/dvs/events``),
and ``sensor_msgs/CameraInfo`` on the ``camera_info_topic`` parameter. Publishes

- ``angular_velocity`` (geometry_msgs/TwistStamped): rad/s in the camera's optical frame
  (x right, y down, z forward; frame_id: the ``frame_id`` parameter or the events' frame),
  stamp = the window's reference time; ``twist.linear`` is not estimated (0);
- ``imu`` (sensor_msgs/Imu, REP-145): the same angular velocity with its covariance
  ((rad/s)^2, from the focus's curvature: :mod:`focus_ros.estimators.covariance`); orientation
  and linear acceleration absent (element 0 of their covariances -1);
- ``twist`` (geometry_msgs/TwistWithCovarianceStamped): the same, the linear part unknown
  (variance ``messages.UNKNOWN_LINEAR_VARIANCE_M2_S2``), for filters such as robot_localization;
  ``imu`` and ``twist`` come only while someone subscribes to one of them: the covariance costs
  the estimator 3 more gradient evaluations per window, skipped otherwise;
- ``iwe/uncompensated`` and ``iwe/compensated`` (sensor_msgs/Image, rgb8): the image of
  warped events before and after compensation, only while someone subscribes, at most
  ``image_rate_hz``;
- ``/diagnostics`` (diagnostic_msgs/DiagnosticArray) once a second.

Events come in through :class:`~focus_ros.ros.event_input.EventInput` (subscription, numpy
decoding, stream guard, calibration from camera_info or parameters, input diagnostics),
shared with the other nodes.

Windows (``window_events: 0``, the default): :class:`~focus_ros.windows.AdaptiveWindows`, the
rule of :class:`~focus_ros.windows.WindowRule` (the camera turns ``window_rotation_deg`` within
a window at the last estimate's speed; enough events per IWE pixel at the measured rate; at
most ``output_period_s`` between estimates), each window thinned to the compute budget (the
events the estimator takes in 0.6 of the time between windows, from its measured time per window; or
``max_window_events``), the IWE binned on large sensors (``pixel_binning``). The windows in use
are logged (at the start and when their length changes twofold, at most every 10 s) and reported in /diagnostics
(``window_duration_ms``, ``kept_share``, ...). Estimates the window does not support are
withheld, counted by reason (``withheld_<reason>``) and warned once per reason.

Keeping up: the subscription callback only decodes, checks and cuts windows, and hands each
complete window to the estimator through shared memory; the estimator runs in a process of
its own (``estimator_process``, default) so that its time per window does not depend on the
executor thread, and a thread of the node collects its results and publishes them
(:class:`~focus_ros.runtime.EstimatorRunner`, the execution model of all three
nodes). A dead estimator process is restarted and counted. When
windows complete faster than they are estimated, the newest one is taken, the warm start
kept, and the skipped ones counted as dropped (``queue_policy: newest``, for live use); with
``queue_policy: all`` (bag evaluation) every window is processed in order, dropping the
oldest only beyond ``max_pending_windows``. Nothing that arrives before the node can estimate is
skipped as live: events held before a calibration is known (bounded by ``max_buffered_events``)
and windows cut while the estimator starts or compiles (bounded by the same number of events)
are all estimated, in order, once it can (then ``newest`` applies again); the decoder and the
stream guard are loaded before the node subscribes (:func:`~focus_ros.ros.event_input.load_kernels`).
``/diagnostics`` says whether the node keeps up:
``processed_ratio``, ``processing_ms_per_window`` (and its CPU time), ``latency_ms``.
"""

from __future__ import annotations

import sys
import threading
import time
from dataclasses import replace

import numpy as np
import rclpy
import rclpy.executors
from geometry_msgs.msg import TwistStamped, TwistWithCovarianceStamped
from rcl_interfaces.msg import SetParametersResult
from sensor_msgs.msg import Image, Imu

from focus_ros.camera import Calibration
from focus_ros.estimators.angular_velocity import (ROTATION_WARPS, T_REF_CHOICES, WARM_STARTS, WITHHELD_REASONS,
                                                   AngularVelocityEstimator, AngularVelocitySettings,
                                                   degeneracy_of, planning_speed_rad_s, real_time_settings)
from focus_ros.runtime import EstimatorRunner, Job, PictureRate
from focus_ros.iwe import KERNELS, coarse_grid_factor
from focus_ros.losses import LOSSES, get_loss
from focus_ros.optimize import OPTIMIZERS
from focus_ros.ros import messages
from focus_ros.ros.entry_point import run_node
from focus_ros.ros.estimating_node import RUNNER_PARAMETERS, EstimatingNode
from focus_ros.ros.event_input import Backlog, EventBatch, EventInput
from focus_ros.ros.parameters import descriptor
from focus_ros.visualization import iwe_to_rgb, saturation_scale
from focus_ros.windows import AdaptiveWindows, CountWindowCutter, CutWindow, DurationWindowCutter, WindowRule

#: auto windows: their length is logged when it has changed twofold, at most once in this many seconds
WINDOW_LOG_PERIOD_S = 10.0

#: the estimator's defaults for live use (BFGS, stopped at a relative change of 1e-5, extrapolated warm start)
REAL_TIME = real_time_settings()


#: name -> (default, description, options); options: integer_range / float_range / read_only.
#: The event input's parameters (message type, QoS, camera_info, calibration.*, buffers) are
#: declared by :class:`~focus_ros.ros.event_input.EventInput`.
PARAMETERS = {
    "window_events": (0, "events per window; 0 = auto: windows that fit the sensor and the motion "
                      "(window_rotation_deg, output_period_s, max_window_events)", {"integer_range": (0, 10_000_000)}),
    "window_stride_events": (0, "events between consecutive window starts; 0 = window_events (no overlap)",
                             {"integer_range": (0, 10_000_000)}),
    "window_duration_s": (0.0, "> 0: fixed-duration windows of this length (s) instead of event counts",
                          {"float_range": (0.0, 10.0), "read_only": True}),
    "window_rotation_deg": (WindowRule.rotation_deg, "auto windows: the camera's rotation within a window at the "
                            "last estimate's speed (deg); an image motion of about f times it",
                            {"float_range": (0.1, 90.0)}),
    "output_period_s": (WindowRule.output_period_s, "auto windows: at most this long between estimates (s)",
                        {"float_range": (0.001, 1.0)}),
    "max_window_duration_s": (WindowRule.max_duration_s, "auto windows: the longest window (s), also while the "
                              "camera stands still", {"float_range": (0.001, 10.0)}),
    "max_window_events": (0, "auto windows: thin each window to at most this many events (uniformly, in time "
                          "order); 0 = the compute budget: what the estimator takes in 0.6 of the time between windows",
                          {"integer_range": (0, 10_000_000)}),
    "pixel_binning": (0, "IWE on a grid of bins of this many pixels per side; 0 = auto (2 on a 1280x720 sensor, "
                      "1 below)", {"integer_range": (0, 8)}),
    "min_motion_px": (1.0, "withhold an estimate that moves the image by less than this (px of the IWE grid) "
                      "within its window: it cannot be told from no motion", {"float_range": (0.0, 1000.0)}),
    "min_focus_gain": (0.01, "withhold an estimate whose image is sharper than with no motion by less than this share "
                       "(a flat focus landscape does not support it)", {"float_range": (0.0, 10.0)}),
    "gap_reset_windows": (10.0, "reset the warm start after a gap of this many window durations",
                          {"float_range": (0.0, 1e6)}),
    "queue_policy": ("newest", "when windows complete faster than they are processed: newest (skip to the "
                     "newest window, live use) or all (process every window in order, for bag evaluation)", {}),
    "max_pending_windows": (100, "queue_policy all, and the windows of events held before the node could use "
                            "them: bound on queued windows; beyond it the oldest are dropped",
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
    **RUNNER_PARAMETERS,
    "image_rate_hz": (5.0, "IWE images per second at most (only while subscribed); 0 = never",
                      {"float_range": (0.0, 1000.0)}),
    "frame_id": ("", "output frame; empty = the frame of the events", {}),
}

ESTIMATOR_PARAMETERS = ("loss", "use_polarity", "kernel", "kernel_sigma_px", "blur_sigma_px", "reference_time",
                        "warp", "optimizer", "max_iterations", "gradient_tolerance", "value_tolerance",
                        "warm_start", "pixel_binning", "min_motion_px", "min_focus_gain")
WINDOW_PARAMETERS = ("window_events", "window_stride_events", "window_rotation_deg", "output_period_s",
                     "max_window_duration_s", "max_window_events")


class AngularVelocityNode(EstimatingNode):
    """Thin ROS wrapper around :class:`AngularVelocityEstimator` (see the module docstring)."""

    def __init__(self, **kwargs):
        super().__init__("angular_velocity_node", **kwargs)
        for name, (default, description, options) in PARAMETERS.items():
            self.declare_parameter(name, default, descriptor(description, **options))
        reasons = self._check_choices({name: self.get_parameter(name).value for name in PARAMETERS})
        if reasons:
            raise ValueError("; ".join(reasons))

        self._lock = threading.Lock()
        self._calibration: Calibration | None = None
        self._windows = None               # CountWindowCutter or DurationWindowCutter, once configured
        self._settings_changed = False
        self._stats = dict(windows_processed=0, degenerate_windows=0, windows_recovered=0, windows_accelerated=0,
                           last_iterations=0, last_focus_gain=float("nan"))
        self._withheld: dict[str, int] = {}  # withheld estimates by reason (WITHHELD_REASONS)
        self._kept_shares: list[float] = []  # auto windows: share of each window's events kept, since the last report
        self._said_duration_ns = 0           # auto windows: the duration last logged, and when (monotonic s)
        self._said_s = float("-inf")

        self._twist_publisher = self.create_publisher(TwistStamped, "angular_velocity", 10)
        self._imu_publisher = self.create_publisher(Imu, "imu", 10)
        self._twist_covariance_publisher = self.create_publisher(TwistWithCovarianceStamped, "twist", 10)
        self._image_publishers = {
            "uncompensated": self.create_publisher(Image, "iwe/uncompensated", 1),
            "compensated": self.create_publisher(Image, "iwe/compensated", 1),
        }
        # the estimator (process or inline) starts now with a stand-in calibration, so that its
        # compiled code is loaded before data flows; windows wait for the real configuration
        self._runner = EstimatorRunner(
            "angular_velocity", Calibration.davis240c(), self._estimator_settings(),
            on_result=self._publish, **self.runner_options(),
            logger=self.get_logger(), warn_once=lambda key, text: self._input.warn_once(key, text), unit="window",
            max_pending=lambda: 1 if self._live() else self.get_parameter("max_pending_windows").value,
            skippable=self._live,
            # windows cut before the estimator is ready are held (up to the events the input holds
            # before a calibration), then all estimated: a bag played as the node starts loses none
            hold_events=lambda: self.get_parameter("max_buffered_events").value,
            images_wanted=PictureRate(lambda: self.get_parameter("image_rate_hz").value,
                                      lambda: any(publisher.get_subscription_count() > 0
                                                  for publisher in self._image_publishers.values())))
        self._backlog = Backlog(self._runner)  # windows of held events: worked off in order (see _live)
        # the event messages are taken on the input's own thread, outside rclpy's executor (which
        # costs about as much per message as the input's own work: BENCHMARKS.md, "The executor's
        # CPU per event message"); _on_events and the parameter and calibration callbacks share self._lock
        self._input = EventInput(self, self._on_events, self._on_calibration, own_thread=True)
        self._warn_once = self._input.warn_once
        self.add_on_set_parameters_callback(self._on_set_parameters)
        self.start_diagnostics(self._publish_diagnostics)

        self.get_logger().info(
            f"waiting for {self._input.message_type} on '{self._input.events_topic}' and camera_info on "
            f"'{self._input.camera_info_topic}'; publishing rad/s on '{self.resolve_topic_name('angular_velocity')}'")

    # ----------------------------------------------------------------- parameters
    def _check_choices(self, values: dict) -> list[str]:
        """Reasons why the parameter values are unusable (empty when fine)."""
        reasons = []
        choices = {"queue_policy": ("newest", "all"),
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
                       warm_start=value("warm_start"), min_motion_px=value("min_motion_px"),
                       min_focus_gain=value("min_focus_gain"),
                       pixel_binning=self._pixel_binning(value("pixel_binning")),
                       optimizer_settings=replace(REAL_TIME.optimizer_settings,
                                                  max_iterations=value("max_iterations"),
                                                  gradient_tolerance=value("gradient_tolerance"),
                                                  value_tolerance=value("value_tolerance")))

    def _pixel_binning(self, parameter: int) -> int:
        """The IWE's bin size: the parameter, or (0) the calibration's coarse grid factor."""
        if parameter > 0:
            return int(parameter)
        calibration = self._calibration
        return coarse_grid_factor(calibration.width, calibration.height) if calibration is not None else 1

    def _window_mode(self) -> str:
        """auto (the default), or the explicit events / duration windows."""
        if self.get_parameter("window_duration_s").value > 0:
            return "duration"
        return "events" if self.get_parameter("window_events").value > 0 else "auto"

    def _make_windows(self):
        """The window cutter the parameters ask for (lock held, calibration known)."""
        mode = self._window_mode()
        if mode == "duration":
            return DurationWindowCutter(int(round(self.get_parameter("window_duration_s").value * 1e9)))
        window_events = self.get_parameter("window_events").value
        if mode == "events":
            return CountWindowCutter(window_events, self.get_parameter("window_stride_events").value or window_events)
        rule = replace(WindowRule(), rotation_deg=self.get_parameter("window_rotation_deg").value,
                       output_period_s=self.get_parameter("output_period_s").value,
                       max_duration_s=self.get_parameter("max_window_duration_s").value)
        binning = self._pixel_binning(self.get_parameter("pixel_binning").value)
        pixels = -(-self._calibration.width // binning) * -(-self._calibration.height // binning)
        return AdaptiveWindows(rule, pixels, self.get_parameter("max_window_events").value, live=True)

    def _live(self) -> bool:
        """The live queue policy is in force (``queue_policy: newest``: the newest window, the skipped
        ones dropped), except while windows cut from held events wait (events that came before the
        calibration, or queued while the first message's decoder compiled: at the sensor's rate,
        before the node could use them): those are all estimated, in order
        (:class:`~focus_ros.ros.event_input.Backlog`; bounded by max_pending_windows). Called by
        the runner with its lock held: takes no lock of the node's."""
        return self.get_parameter("queue_policy").value == "newest" and not self._backlog.active()

    # ----------------------------------------------------------------- input
    def _on_calibration(self, calibration: Calibration, source: str) -> None:
        """The first calibration: windows and estimator configured. A later one of the same sensor
        size (camera_info after the fallback parameters, a driver's recalibration): the windows
        cut and queued stay (they hold events, not intrinsics) and the estimator takes the new
        intrinsics from its next window: nothing waiting is dropped. Another size: all anew."""
        with self._lock:
            previous, self._calibration = self._calibration, calibration
            if (previous is not None and (previous.width, previous.height) == (calibration.width, calibration.height)
                    and not self._settings_changed):
                self._runner.configure(calibration, self._estimator_settings())
                return
            self._apply_settings()

    def _on_events(self, batch: EventBatch) -> None:
        """Window one guarded batch and hand complete windows to the runner (the event input's thread);
        the runner's queue policy: "newest" keeps at most one waiting window, "all" up to
        max_pending_windows."""
        with self._lock:
            if self._settings_changed:
                self._apply_settings()
            if batch.restart:
                self._windows.reset()
                self._runner.reset()
            for window in self._windows.push(batch.events):
                events = window.events if isinstance(window, CutWindow) else window
                self._backlog.push(Job(events, extra=self._covariance_wanted(), context=window,
                                       received_s=batch.received_s), held=batch.held)

    def _covariance_wanted(self) -> bool:
        """Whether anyone subscribes to the outputs that carry the covariance (imu, twist)."""
        return (self._imu_publisher.get_subscription_count() > 0
                or self._twist_covariance_publisher.get_subscription_count() > 0)

    def _apply_settings(self) -> None:
        """New parameters or calibration: new windows now, the estimator before the next window (lock held)."""
        self._settings_changed = False
        self._windows = self._make_windows()
        settings = self._estimator_settings()
        self._runner.clear_pending()
        self._runner.configure(self._calibration, settings)
        reason = degeneracy_of(get_loss(settings.loss), settings.use_polarity)
        if reason:
            self.get_logger().error(f"loss '{settings.loss}': {reason}")
        self.get_logger().info(f"estimating with loss '{settings.loss}', polarity {settings.use_polarity}, "
                               f"windows of {self._window_description()}")

    # ----------------------------------------------------------------- results
    def _update_gap_limit(self, window) -> None:
        """A gap longer than gap_reset_windows window durations restarts the windows too,
        so that no window mixes events from both sides of it."""
        windows = self.get_parameter("gap_reset_windows").value
        duration_s = ((window.end_ns - window.start_ns) * 1e-9 if isinstance(window, CutWindow)
                      else window.duration_s if len(window) > 1 else 0.0)
        if windows > 0 and duration_s > 0:
            self._input.set_gap_s(max(windows * duration_s, 1e-3))

    def _window_description(self) -> str:
        duration = self.get_parameter("window_duration_s").value
        if duration > 0:
            return f"{duration} s"
        if isinstance(self._windows, AdaptiveWindows):
            windows = self._windows
            return (f"{windows.duration_ns * 1e-6:.1f} ms every {windows.stride_ns * 1e-6:.1f} ms for now (auto: "
                    f"{windows.rule.rotation_deg:g} deg of rotation at the last estimate's speed, at least "
                    f"{windows.rule.events_per_pixel:g} events per IWE pixel, at most "
                    f"{windows.rule.max_duration_s:g} s), thinned to at most {windows.max_events} events "
                    f"({'the compute budget' if windows.budget is not None else 'max_window_events'}), IWE bins of "
                    f"{self._pixel_binning(self.get_parameter('pixel_binning').value)} px")
        return (f"{self.get_parameter('window_events').value} events, stride "
                f"{self.get_parameter('window_stride_events').value or self.get_parameter('window_events').value}")

    def _publish(self, job: Job, result) -> None:
        """One window's estimate (the runner's thread)."""
        self._update_gap_limit(job.context)
        estimate = result.estimate
        frame_id = self.get_parameter("frame_id").value or self._input.frame_id
        stamp = messages.time_from_ns(estimate.t_ref_ns)
        with self._lock:  # re-solved as doubtful optima / with an angular acceleration (estimator checks)
            self._stats["windows_recovered"] += int(estimate.recovered)
            self._stats["windows_accelerated"] += int(estimate.angular_acceleration is not None)
            self._plan_windows(job.context, estimate, result.estimator_s)
        if estimate.degenerate:
            reason = estimate.withheld or "degenerate"
            with self._lock:
                self._stats["degenerate_windows"] += 1
                self._withheld[reason] = self._withheld.get(reason, 0) + 1
            self._warn_once(f"withheld_{reason}", f"estimate withheld ({reason}, counted in /diagnostics as "
                            f"withheld_{reason}): {estimate.message}")
            return
        omega = estimate.angular_velocity
        self._twist_publisher.publish(messages.twist_stamped(omega, stamp, frame_id))
        if job.extra:  # estimated with its covariance: someone subscribed to imu or twist
            self._imu_publisher.publish(messages.imu_message(omega, estimate.covariance, stamp, frame_id))
            self._twist_covariance_publisher.publish(messages.twist_with_covariance(omega, estimate.covariance,
                                                                                    stamp, frame_id))
        with self._lock:
            self._stats["windows_processed"] += 1
            self._stats["last_iterations"] = estimate.iterations
            self._stats["last_focus_gain"] = (estimate.score / estimate.score_at_zero
                                              if estimate.score_at_zero else float("nan"))
        if result.images is not None:
            # both images share the compensated one's intensity scale
            uncompensated, compensated = result.images
            scale = saturation_scale(compensated)
            for name, image in (("uncompensated", uncompensated), ("compensated", compensated)):
                self._image_publishers[name].publish(messages.rgb_image(iwe_to_rgb(image, scale=scale), stamp,
                                                                        frame_id))

    def _plan_windows(self, window, estimate, estimator_s: float) -> None:
        """Auto windows: the next windows' duration, stride and event budget from this window's
        outcome (lock held); the new duration logged when it has changed by 2x since last said."""
        windows = self._windows
        if not (isinstance(windows, AdaptiveWindows) and isinstance(window, CutWindow)):
            return
        self._kept_shares.append(window.kept_share)
        windows.after_estimate(window, planning_speed_rad_s(estimate), estimator_s)
        said, now = self._said_duration_ns, time.monotonic()
        if not said or (not 0.5 < windows.duration_ns / said < 2.0 and now - self._said_s >= WINDOW_LOG_PERIOD_S):
            self._said_duration_ns, self._said_s = windows.duration_ns, now
            self.get_logger().info(f"windows of {self._window_description()}")

    # ----------------------------------------------------------------- diagnostics
    def _publish_diagnostics(self) -> None:
        inputs = self._input.diagnostics()
        with self._lock:
            stats = dict(self._stats)
            withheld = dict(self._withheld)
            windows = self._window_values()
        status = messages.estimator_status(f"{self.get_name()}: angular velocity", self._input.frame_id,
                                           inputs["calibration_source"] != "none", self.health(),
                                           "estimating")
        # the runner's counts (processed_ratio: windows estimated, published or found degenerate,
        # per window completed) and medians over the windows since the previous report
        values = {
            **inputs,
            **self._runner.diagnostic_values(),
            "windows_processed": stats["windows_processed"],
            "degenerate_windows": stats["degenerate_windows"],
            "windows_recovered": stats["windows_recovered"],
            "windows_accelerated": stats["windows_accelerated"],
            "iterations": stats["last_iterations"],
            "focus_gain": stats["last_focus_gain"],
            **{f"withheld_{reason}": withheld.get(reason, 0) for reason in WITHHELD_REASONS},
            **windows,
        }
        self.publish_diagnostics(status, values)

    def _window_values(self) -> dict:
        """The windows in use, for /diagnostics (lock held): window_mode (auto, events, duration);
        for auto windows the duration and stride now (ms), the event budget (max_window_events_now),
        the median share of the events kept since the last report (1 = none thinned), the event
        rate (Mev/s) and the IWE's pixel_binning."""
        values = {"window_mode": self._window_mode(),
                  "pixel_binning": self._pixel_binning(self.get_parameter("pixel_binning").value)}
        windows = self._windows
        if isinstance(windows, AdaptiveWindows):
            shares, self._kept_shares = self._kept_shares, []
            values.update(window_duration_ms=windows.duration_ns * 1e-6, window_stride_ms=windows.stride_ns * 1e-6,
                          max_window_events_now=windows.max_events,
                          kept_share=float(np.median(shares)) if shares else float("nan"),
                          event_rate_mev_s=(windows.event_rate_hz or 0.0) * 1e-6)
        return values


def main(argv=None) -> int:
    """Entry point of ``ros2 run focus_ros angular_velocity_node``."""
    return run_node("angular_velocity_node", AngularVelocityNode, rclpy.spin, argv)


if __name__ == "__main__":
    sys.exit(main())
