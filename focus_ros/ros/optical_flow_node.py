"""ROS 2 node: patch optical flow of an event camera by focus-loss maximisation.

Events come in through :class:`~focus_ros.ros.event_input.EventInput` (``events``, remap it,
e.g. ``events:=/dvs/events``; camera_info or the ``calibration.*`` parameters give the sensor
size: flow is in pixels of the raw image, the intrinsics are not used). Per window of
``window_events`` events (or ``window_duration_s``) the image is split into square patches of
``patch_size_px`` px every ``patch_stride_px`` px, and every patch gets the flow maximising the
focus loss of its events (:class:`~focus_ros.estimators.optical_flow.OpticalFlowEstimator`, the
same as ``focus-ros flow``). With ``window_motion_px`` (default 10) a slow scene's window reaches
back over the previous windows' events until it spans that motion at the last estimate's median
patch speed (at most ``max_window_extension`` windows' span; the estimator keeps those events, so
the output rate stays one flow per window); a fast one keeps its window. Publishes

- ``optical_flow`` (sensor_msgs/Image, encoding ``32FC2``): one pixel per patch, rows x columns
  = the patch grid (``rows = (height / b - size) // stride + 1``, likewise columns, b =
  ``pixel_binning``, in /diagnostics); channel 0 = vx, channel 1 = vy in px/s (x right, y down,
  raw image pixels); NaN where the patch's flow is invalid (too few events, flat focus
  landscape, aperture problem, out of range); patch (r, c) covers raw pixels
  [b c stride, b (c stride + size)) x [b r stride, b (r stride + size));
  stamp = the window's reference time, frame = the events' frame;
- ``optical_flow/confidence`` (sensor_msgs/Image, ``32FC1``, same grid, stamp and frame): each
  patch's confidence, the focus's curvature at its maximum (the relative drop of the focus for a
  1-px move in the direction it drops least), 0 where the flow is invalid: threshold it to keep
  the surest flows (on simulated sequences, a higher confidence means a smaller error);
- ``optical_flow/image`` (sensor_msgs/Image, rgb8, 3x the (binned) sensor size plus a legend strip):
  arrows over the motion-compensated image (cyan: normal flow of aperture patches; grey
  crosses: no valid flow; a dot: a measured zero), a scale arrow in px/s below, only while
  subscribed, at most ``image_rate_hz``;
- ``/diagnostics``: the input's counters, windows processed and dropped, latency, processing
  time, share of valid patches, and why the others are invalid (last window, patches with events:
  ``patches_valid``, ``patches_few_events``, ``patches_flat``, ``patches_aperture``,
  ``patches_out_of_range``, ``patches_imprecise``: too slow for their precision, ``min_motion_px`` /
  ``min_motion_confidence``; of the valid ones
  ``patches_borrowed``, solved with their neighbours' prior; ``patches_normal_flow``: aperture
  patches with a normal flow only), ``window_events`` (the window size in use, 0 with durations),
  ``pixel_binning`` and ``max_window_events`` (the thinning bound in use).

The estimator runs as the angular velocity node's does (:class:`~focus_ros.runtime.EstimatorRunner`):
in a process of its own fed through shared memory (``estimator_process``, default; false = a
thread of the node), a dead process restarted and counted in ``/diagnostics``. With
``queue_policy: newest`` (live) it skips to the newest complete window and counts the skipped
ones as dropped, with ``all`` (bags) it processes every window. Windows cut while the estimator
starts or compiles, and those of events that came before the node could use them (before a
calibration, or while the first message's decoder compiled), are all processed in order
whatever the policy (bounded by ``max_buffered_events`` and ``max_pending_windows``).

The loop itself (windows, thinning, what an estimate reports) is
:class:`~focus_ros.pipelines.optical_flow.OpticalFlowPipeline`, the one ``focus-ros flow`` runs; the
parameters are declared once, by the settings classes of :data:`SETTINGS_CLASSES`.
"""

from __future__ import annotations

import sys
import threading

import rclpy
from rcl_interfaces.msg import SetParametersResult
from sensor_msgs.msg import Image

from focus_ros.camera import Calibration
from focus_ros.estimators.optical_flow import OpticalFlowSettings
from focus_ros.pipelines.optical_flow import NO_COUNTS, FlowWindowSettings, OpticalFlowPipeline
from focus_ros.ros import messages
from focus_ros.ros.entry_point import run_node
from focus_ros.ros.estimating_node import EstimatingNode, WindowNodeSettings
from focus_ros.ros.event_input import EventBatch, EventInput
from focus_ros.ros.parameters import declare_settings, settings_from_parameters
from focus_ros.runtime import EstimatorRunner, Job, PictureRate
from focus_ros.settings import declared

#: sensor size (px) the settings are checked against before a calibration gives the real one
CHECK_SIZE = (240, 180)


#: the settings whose parameters the node declares beyond the event input's and the runner's
SETTINGS_CLASSES = (FlowWindowSettings, OpticalFlowSettings, WindowNodeSettings)
#: the parameters whose change rebuilds the pipeline (for the next window)
PIPELINE_PARAMETERS = frozenset(item.parameter for cls in (FlowWindowSettings, OpticalFlowSettings)
                                for item in declared(cls) if item.parameter is not None)


class OpticalFlowNode(EstimatingNode):
    """Thin ROS wrapper around :class:`OpticalFlowPipeline` (see the module docstring)."""

    def __init__(self, **kwargs):
        super().__init__("optical_flow_node", **kwargs)
        for cls in SETTINGS_CLASSES:
            declare_settings(self, cls)
        self._check({}, CHECK_SIZE)  # ValueError naming a value the node cannot start with
        self._lock = threading.Lock()
        self._calibration: Calibration | None = None
        self._pipeline: OpticalFlowPipeline | None = None
        self._settings_changed = False
        self._windows_processed = 0
        self._last_counts = NO_COUNTS
        self._flow_publisher = self.create_publisher(Image, "optical_flow", 10)
        self._confidence_publisher = self.create_publisher(Image, "optical_flow/confidence", 10)
        self._image_publisher = self.create_publisher(Image, "optical_flow/image", 1)
        self._runner = EstimatorRunner(
            "optical_flow", Calibration.davis240c(), settings_from_parameters(self, OpticalFlowSettings),
            on_result=self._publish, **self.runner_options(),
            logger=self.get_logger(), warn_once=lambda key, text: self._input.warn_once(key, text),
            unit="window", **self.window_queue_options(), name="focus_ros_flow",
            # windows cut while the estimator starts or compiles are held (bounded as the input's
            # events before a calibration), then all estimated in order
            hold_events=lambda: self.get_parameter("max_buffered_events").value,
            images_wanted=PictureRate(lambda: self.get_parameter("image_rate_hz").value,
                                      lambda: self._image_publisher.get_subscription_count() > 0))
        self._input = EventInput(self, self._on_events, self._on_calibration, own_thread=True)  # off the executor
        self.add_on_set_parameters_callback(self._on_set_parameters)
        self.start_diagnostics(self._publish_diagnostics)
        self.get_logger().info(f"waiting for {self._input.message_type} on '{self._input.events_topic}'; "
                               f"publishing 32FC2 px/s on '{self.resolve_topic_name('optical_flow')}'")

    # ----------------------------------------------------------------- parameters
    def _new_pipeline(self, size: tuple[int, int], overrides: dict | None = None) -> OpticalFlowPipeline:
        """The pipeline the parameters (with ``overrides``, by parameter name) make for a sensor of
        ``size`` (width, height) px; ValueError naming a value that is unusable."""
        return OpticalFlowPipeline(*size, settings_from_parameters(self, OpticalFlowSettings, overrides=overrides),
                                   settings_from_parameters(self, FlowWindowSettings, overrides=overrides))

    def _check(self, values: dict, size: tuple[int, int]) -> None:
        """ValueError naming the problem when the parameters, with ``values``, are unusable."""
        settings_from_parameters(self, WindowNodeSettings, overrides=values)
        self._new_pipeline(size, values)

    def _on_set_parameters(self, parameters) -> SetParametersResult:
        values = {p.name: p.value for p in parameters}
        try:
            self._check(values, (self._calibration.width, self._calibration.height) if self._calibration
                        else CHECK_SIZE)
        except ValueError as error:
            return SetParametersResult(successful=False, reason=str(error))
        if PIPELINE_PARAMETERS.intersection(values):
            with self._lock:
                self._settings_changed = True
        return SetParametersResult(successful=True)

    def _reconfigure(self) -> None:
        """A new pipeline (new windows) and estimator settings, for the next window (lock held)."""
        self._settings_changed = False
        try:  # checked when set; kept as a last resort
            pipeline = self._new_pipeline((self._calibration.width, self._calibration.height))
        except ValueError as error:
            self.get_logger().error(f"settings not usable: {error}; keeping the previous ones")
            return
        self._pipeline = pipeline
        self._runner.clear_pending()
        self._runner.configure(self._calibration, pipeline.settings)
        self.get_logger().info(pipeline.describe())

    # ----------------------------------------------------------------- input
    def _on_calibration(self, calibration, source: str) -> None:
        """Windows and estimator (re)configured for the sensor size; a later calibration of the same
        size changes nothing here (flow is in raw pixels: the intrinsics are not used), so no
        window waiting is dropped."""
        with self._lock:
            previous, self._calibration = self._calibration, calibration
            if previous is not None and (previous.width, previous.height) == (calibration.width, calibration.height):
                return
            self._reconfigure()

    def _on_events(self, batch: EventBatch) -> None:
        """The pipeline's window jobs of one guarded batch, handed to the runner (the event input's thread)."""
        with self._lock:
            if self._settings_changed and self._calibration is not None:
                self._reconfigure()
            if self._pipeline is None:
                return
            if batch.restart:
                self._pipeline.reset()
                self._runner.reset()
            for window in self._pipeline.feed(batch.events):
                self._runner.push(Job(window, received_s=batch.received_s), held=batch.held)

    # ----------------------------------------------------------------- results
    def _publish(self, job: Job, result) -> None:
        """One window's flow, and its picture when one was asked for (the runner's thread)."""
        estimate = result.estimate
        frame_id = self.get_parameter("frame_id").value or self._input.frame_id
        stamp = messages.time_from_ns(estimate.t_ref_ns)
        self._flow_publisher.publish(messages.float_image(estimate.flow_image(), stamp, frame_id))
        self._confidence_publisher.publish(messages.float_image(estimate.confidence_image(), stamp, frame_id))
        self.say_first_output("flow", estimate.t_ref_ns)
        counts = OpticalFlowPipeline.take(estimate)
        with self._lock:
            self._windows_processed += 1
            self._last_counts = counts
        if result.images is not None:  # arrows over the compensated image, drawn where the estimator ran
            self._image_publisher.publish(messages.rgb_image(result.images[0], stamp, frame_id))

    # ----------------------------------------------------------------- diagnostics
    def _publish_diagnostics(self) -> None:
        inputs = self._input.diagnostics()
        with self._lock:
            processed, counts, pipeline = self._windows_processed, self._last_counts, self._pipeline
        status = messages.estimator_status(f"{self.get_name()}: optical flow", self._input.frame_id,
                                           inputs["calibration_source"] != "none", self.health(),
                                           "estimating", uncalibrated="no sensor size (camera_info or parameters)")
        values = {**inputs, **self._runner.diagnostic_values(), "windows_processed": processed,
                  "window_events": pipeline.window_events if pipeline else 0,
                  "pixel_binning": pipeline.estimator.binning if pipeline else 0,
                  "max_window_events": pipeline.max_window_events if pipeline else 0,
                  **counts.diagnostic_values()}
        self.publish_diagnostics(status, values)


def main(argv=None) -> int:
    """Entry point of ``ros2 run focus_ros optical_flow_node``."""
    return run_node("optical_flow_node", OpticalFlowNode, rclpy.spin, argv)


if __name__ == "__main__":
    sys.exit(main())
