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

Windows and what each estimate feeds back into them are the pipeline's
(:class:`~focus_ros.pipelines.angular_velocity.AngularVelocityPipeline`, shared with
``focus-ros estimate``); the parameters are declared once, in :data:`SETTINGS_CLASSES`.
Windows (``window_events: 0``, the default): :class:`~focus_ros.windows.AdaptiveWindows`, the
rule of :class:`~focus_ros.windows.WindowRule` (the camera turns ``window_rotation_deg`` within
a window at the last estimate's speed; enough events per IWE pixel at the measured rate; at
most ``output_period_s`` between estimates), each window thinned to the compute budget (the
events the estimator takes in 0.6 of the time between windows, from its measured time per window; or
``max_window_events``), the IWE binned on large sensors (``pixel_binning``). The windows in use
are logged (at the start and when their length changes twofold, at most every 10 s) and reported in /diagnostics
(``window_duration_ms``, ``kept_share``, ...). Estimates the window does not support are
withheld, counted by reason (``withheld_<reason>``) and warned once per reason; after one that ran
away with its windows (``runaway``) the estimator forgets its warm start too.

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

import rclpy
import rclpy.executors
from geometry_msgs.msg import TwistStamped, TwistWithCovarianceStamped
from rcl_interfaces.msg import SetParametersResult
from sensor_msgs.msg import Image, Imu

from focus_ros.camera import Calibration
from focus_ros.estimators.angular_velocity import WITHHELD_REASONS, AngularVelocitySettings
from focus_ros.pipelines.angular_velocity import (AngularVelocityPipeline, PipelineCounts, WindowSettings,
                                                  check_settings, real_time_defaults)
from focus_ros.runtime import EstimatorRunner, Job, PictureRate
from focus_ros.ros import messages
from focus_ros.ros.entry_point import run_node
from focus_ros.ros.estimating_node import EstimatingNode, WindowNodeSettings
from focus_ros.ros.event_input import EventBatch, EventInput
from focus_ros.ros.parameters import declare_settings, settings_from_parameters
from focus_ros.settings import declared
from focus_ros.visualization import iwe_to_rgb, saturation_scale
from focus_ros.windows import WindowRule

#: the estimator's settings at the node's defaults, for live use (BFGS stopped at a relative change
#: of 1e-5, extrapolated warm start, IWE binning auto): its parameters default to them
LIVE_SETTINGS = real_time_defaults()
#: the settings whose parameters the node declares (a class, or an instance whose values are the
#: parameters' defaults), beyond the event input's
#: (:class:`~focus_ros.ros.event_input.EventInputSettings`) and the runner's
#: (:class:`~focus_ros.ros.estimating_node.RunnerSettings`)
SETTINGS_CLASSES = (LIVE_SETTINGS, WindowSettings, WindowRule, WindowNodeSettings)
#: the parameters the node declares itself (the names of SETTINGS_CLASSES' settings)
PARAMETERS = tuple(item.parameter for cls in SETTINGS_CLASSES for item in declared(cls) if item.parameter)
#: the parameters whose change rebuilds the windows and reconfigures the estimator
ESTIMATOR_PARAMETERS = tuple(item.parameter for item in declared(AngularVelocitySettings) if item.parameter)
PIPELINE_PARAMETERS = ESTIMATOR_PARAMETERS + tuple(item.parameter for cls in (WindowSettings, WindowRule)
                                                   for item in declared(cls) if item.parameter)


class AngularVelocityNode(EstimatingNode):
    """Thin ROS wrapper around :class:`AngularVelocityPipeline` (see the module docstring)."""

    def __init__(self, **kwargs):
        super().__init__("angular_velocity_node", **kwargs)
        for cls in SETTINGS_CLASSES:
            declare_settings(self, cls)
        estimator_settings = self._settings()[0]  # ValueError (one line) for unusable values

        self._lock = threading.Lock()
        self._calibration: Calibration | None = None
        self._pipeline: AngularVelocityPipeline | None = None  # once the calibration is known
        self._settings_changed = False

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
            "angular_velocity", Calibration.davis240c(), estimator_settings,
            on_result=self._publish, **self.runner_options(),
            logger=self.get_logger(), warn_once=lambda key, text: self._input.warn_once(key, text), unit="window",
            **self.window_queue_options(),
            # windows cut before the estimator is ready are held (up to the events the input holds
            # before a calibration), then all estimated: a bag played as the node starts loses none
            hold_events=lambda: self.get_parameter("max_buffered_events").value,
            images_wanted=PictureRate(lambda: self.get_parameter("image_rate_hz").value,
                                      lambda: any(publisher.get_subscription_count() > 0
                                                  for publisher in self._image_publishers.values())))
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
    def _settings(self, overrides: dict | None = None) -> tuple:
        """(estimator, window, rule, node) settings from the parameters (``overrides``: values about
        to be set, by parameter name); ValueError naming an unusable value."""
        return (settings_from_parameters(self, AngularVelocitySettings, LIVE_SETTINGS, overrides=overrides),
                settings_from_parameters(self, WindowSettings, overrides=overrides),
                settings_from_parameters(self, WindowRule, overrides=overrides),
                settings_from_parameters(self, WindowNodeSettings, overrides=overrides))

    def _on_set_parameters(self, parameters) -> SetParametersResult:
        values = {p.name: p.value for p in parameters}
        try:
            estimator_settings = self._settings(values)[0]
            if any(name in values for name in ESTIMATOR_PARAMETERS):
                # the combination, e.g. a loss that does not work with polarity
                check_settings(self._calibration or Calibration.davis240c(), estimator_settings)
        except ValueError as error:
            return SetParametersResult(successful=False, reason=str(error))
        if any(name in values for name in PIPELINE_PARAMETERS):
            with self._lock:
                self._settings_changed = True
        return SetParametersResult(successful=True)

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
                self._pipeline.recalibrate(calibration)
                self._runner.configure(calibration, self._pipeline.settings)
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
                self._pipeline.reset()
                self._runner.reset()
            for window in self._pipeline.feed(batch.events):
                self._runner.push(Job(window.events, extra=self._covariance_wanted(), context=window,
                                       received_s=batch.received_s), held=batch.held)

    def _covariance_wanted(self) -> bool:
        """Whether anyone subscribes to the outputs that carry the covariance (imu, twist)."""
        return (self._imu_publisher.get_subscription_count() > 0
                or self._twist_covariance_publisher.get_subscription_count() > 0)

    def _apply_settings(self) -> None:
        """New parameters or calibration: new windows now, the estimator before the next window (lock held)."""
        self._settings_changed = False
        estimator_settings, window_settings, rule, _ = self._settings()
        if self._pipeline is None:
            self._pipeline = AngularVelocityPipeline(self._calibration, estimator_settings, window_settings, rule,
                                                     live=True)
        else:
            self._pipeline.configure(self._calibration, estimator_settings, window_settings, rule)
        settings = self._pipeline.settings
        self._runner.clear_pending()
        self._runner.configure(self._calibration, settings)
        reason = self._pipeline.degeneracy()
        if reason:
            self.get_logger().error(f"loss '{settings.loss}': {reason}")
        self.get_logger().info(f"estimating with loss '{settings.loss}', polarity {settings.use_polarity}, "
                               f"windows of {self._pipeline.description()}")

    # ----------------------------------------------------------------- results
    def _publish(self, job: Job, result) -> None:
        """One window's estimate (the runner's thread): fed back to the pipeline, then published or
        counted as withheld."""
        estimate = result.estimate
        with self._lock:
            outcome = self._pipeline.take(job.context, estimate, result.estimator_s)
            if outcome.windows_changed:
                self.get_logger().info(f"windows of {self._pipeline.description()}")
        if outcome.gap_limit_s is not None:
            self._input.set_gap_s(outcome.gap_limit_s)
        if outcome.forget_warm_start:
            self._runner.forget_warm_start()
        if not outcome.publish:
            reason = outcome.withheld
            self._warn_once(f"withheld_{reason}", f"estimate withheld ({reason}, counted in /diagnostics as "
                            f"withheld_{reason}): {estimate.message}")
            return
        omega = estimate.angular_velocity
        frame_id = self.get_parameter("frame_id").value or self._input.frame_id
        stamp = messages.time_from_ns(estimate.t_ref_ns)
        self._twist_publisher.publish(messages.twist_stamped(omega, stamp, frame_id))
        self.say_first_output("estimate", estimate.t_ref_ns)
        if job.extra:  # estimated with its covariance: someone subscribed to imu or twist
            self._imu_publisher.publish(messages.imu_message(omega, estimate.covariance, stamp, frame_id))
            self._twist_covariance_publisher.publish(messages.twist_with_covariance(omega, estimate.covariance,
                                                                                    stamp, frame_id))
        with self._lock:
            self._pipeline.published(estimate)
        if result.images is not None:
            # both images share the compensated one's intensity scale
            uncompensated, compensated = result.images
            scale = saturation_scale(compensated)
            for name, image in (("uncompensated", uncompensated), ("compensated", compensated)):
                self._image_publishers[name].publish(messages.rgb_image(iwe_to_rgb(image, scale=scale), stamp,
                                                                        frame_id))

    # ----------------------------------------------------------------- diagnostics
    def _publish_diagnostics(self) -> None:
        inputs = self._input.diagnostics()
        with self._lock:
            counts, windows = self._pipeline_values()
        status = messages.estimator_status(f"{self.get_name()}: angular velocity", self._input.frame_id,
                                           inputs["calibration_source"] != "none", self.health(),
                                           "estimating")
        # the runner's counts (processed_ratio: windows estimated, published or found degenerate,
        # per window completed) and medians over the windows since the previous report
        values = {
            **inputs,
            **self._runner.diagnostic_values(),
            "windows_processed": counts.windows_processed,
            "degenerate_windows": counts.degenerate_windows,
            "windows_recovered": counts.windows_recovered,
            "windows_accelerated": counts.windows_accelerated,
            "iterations": counts.last_iterations,
            "focus_gain": counts.last_focus_gain,
            **{f"withheld_{reason}": counts.withheld.get(reason, 0) for reason in WITHHELD_REASONS},
            **windows,
        }
        self.publish_diagnostics(status, values)

    def _pipeline_values(self) -> tuple[PipelineCounts, dict]:
        """The pipeline's counts (a copy) and windows in use (lock held); before the calibration,
        none and the window mode the parameters ask for."""
        pipeline = self._pipeline
        if pipeline is None:
            window_settings = settings_from_parameters(self, WindowSettings)
            return PipelineCounts(), {"window_mode": window_settings.mode,
                                      "pixel_binning": self.get_parameter("pixel_binning").value or 1}
        counts = pipeline.counts
        return (PipelineCounts(**{**vars(counts), "withheld": dict(counts.withheld)}), pipeline.window_values())


def main(argv=None) -> int:
    """Entry point of ``ros2 run focus_ros angular_velocity_node``."""
    return run_node("angular_velocity_node", AngularVelocityNode, rclpy.spin, argv)


if __name__ == "__main__":
    sys.exit(main())
