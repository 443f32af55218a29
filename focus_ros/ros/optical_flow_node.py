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
"""

from __future__ import annotations

import sys
import threading

import numpy as np
import rclpy
from rcl_interfaces.msg import SetParametersResult
from sensor_msgs.msg import Image

from focus_ros.camera import Calibration
from focus_ros.estimators.optical_flow import (APERTURE, FEW_EVENTS, FLAT, IMPRECISE, OUT_OF_RANGE, REASONS,
                                               T_REF_CHOICES, VALID, OpticalFlowEstimator, OpticalFlowSettings,
                                               default_window_events)
from focus_ros.runtime import EstimatorRunner, Job, PictureRate
from focus_ros.losses import LOSSES
from focus_ros.ros import messages
from focus_ros.ros.entry_point import run_node
from focus_ros.ros.estimating_node import RUNNER_PARAMETERS, EstimatingNode
from focus_ros.ros.event_input import Backlog, EventBatch, EventInput
from focus_ros.ros.parameters import descriptor
from focus_ros.windows import CountWindowCutter, DurationWindowCutter, thin_events

DEFAULTS = OpticalFlowSettings()
#: diagnostics key per reason code: patches_valid, patches_few_events, ... (last window, patches with events)
REASON_KEYS = {VALID: "valid", FEW_EVENTS: "few_events", FLAT: "flat", APERTURE: "aperture",
               OUT_OF_RANGE: "out_of_range", IMPRECISE: "imprecise"}

#: name -> (default, description, options); the event input's parameters are declared by EventInput
PARAMETERS = {
    "window_events": (0, "events per window; 0 = from the sensor: 30000 on a 240x180 sensor, scaled by the "
                      "pixel count", {"integer_range": (0, 10_000_000)}),
    "window_duration_s": (0.0, "> 0: windows of this duration (s) instead of a number of events",
                          {"float_range": (0.0, 10.0), "read_only": True}),
    "queue_policy": ("newest", "newest (skip to the newest complete window, live) or all (every window, bags)", {}),
    "max_pending_windows": (100, "queue_policy all, and the windows of events held before the node could use them: "
                            "bound on queued windows (oldest dropped beyond it)", {"integer_range": (1, 100000)}),
    "loss": (DEFAULTS.loss, "focus loss (focus_ros.losses.LOSSES; not mean_timestamp)", {}),
    "use_polarity": (DEFAULTS.use_polarity, "IWE with polarity (b_k = p_k) or counts (b_k = 1)", {}),
    "patch_size_px": (DEFAULTS.patch_size_px, "patch side (px)", {"integer_range": (2, 1024), "read_only": True}),
    "patch_stride_px": (0, "distance between patches (px); 0 = patch_size_px",
                        {"integer_range": (0, 1024), "read_only": True}),
    "margin_px": (DEFAULTS.margin_px, "events within this distance of a patch are warped into it (px): the "
                  "largest displacement between an event and the reference time", {"integer_range": (0, 256)}),
    "pyramid_patch_sizes": (list(DEFAULTS.pyramid_patch_sizes) or [0],
                            "coarser patch sizes (px, decreasing) solved first where a patch has no warm "
                            "start; [0] = none", {}),
    "min_events_per_patch": (DEFAULTS.min_events_per_patch, "fewer events make a patch invalid",
                             {"integer_range": (1, 1_000_000)}),
    "borrowing": (DEFAULTS.borrowing, "second pass: patches with few events and aperture patches solved with "
                  "their neighbours' flow as a prior (false: they stay invalid)", {}),
    "min_borrowing_events": (DEFAULTS.min_borrowing_events, "fewer events: no flow even with the prior",
                             {"integer_range": (1, 1_000_000)}),
    "pixel_binning": (0, "events binned b x b before the flow (patch sizes in binned px); 0 = from the sensor "
                      "(1 up to 479 px wide, 2 up to 959, 4 up to 1919, and so on)",
                      {"integer_range": (0, 16), "read_only": True}),
    "max_window_events": (-1, "windows with more events are thinned to this many (uniform, deterministic); "
                          "-1 = with pixel binning the default window of the binned image, else never; 0 = never",
                          {"integer_range": (-1, 100_000_000)}),
    "smoothing": (DEFAULTS.smoothing, "the second pass also refines the valid patches with the prior", {}),
    "min_confidence": (DEFAULTS.min_confidence, "a valid patch needs at least this confidence",
                       {"float_range": (0.0, 10.0)}),
    "min_motion_confidence": (DEFAULTS.min_motion_confidence, "a valid patch needs at least this confidence times "
                              "its motion over the window (px): slow patches measured too coarsely are invalid",
                              {"float_range": (0.0, 100.0)}),
    "slow_motion_px": (DEFAULTS.slow_motion_px, "valid patches moving less than this (px over the window) are "
                       "solved again on 3 windows' span (previous events prepended); 0 = never",
                       {"float_range": (0.0, 100.0)}),
    "window_motion_px": (DEFAULTS.window_motion_px, "windows sized by the motion: a window reaches back over the "
                         "previous windows' events until it spans this motion (px) at the last estimate's median "
                         "patch speed; 0 = the windows as cut", {"float_range": (0.0, 1000.0)}),
    "max_window_extension": (DEFAULTS.max_window_extension, "the longest window sized by the motion, in spans of "
                             "the window as cut", {"float_range": (1.0, 100.0)}),
    "extended_events_factor": (DEFAULTS.extended_events_factor, "a window sized by the motion is thinned to at most "
                               "this many times the events of the window as cut (1: about its cost); 0 = all",
                               {"float_range": (0.0, 100.0)}),
    "min_motion_px": (DEFAULTS.min_motion_px, "a valid patch moving less than this over its window (px) is invalid "
                      "(too slow for its precision)", {"float_range": (0.0, 1000.0)}),
    "min_relative_speed": (DEFAULTS.min_relative_speed, "a valid patch slower than this share of the window's "
                           "median patch speed is invalid (too slow for its precision)", {"float_range": (0.0, 1.0)}),
    "min_aperture_ratio": (DEFAULTS.min_aperture_ratio, "structure-tensor eigenvalue ratio below which a patch "
                           "is an aperture case (invalid)", {"float_range": (0.0, 0.99)}),
    "blur_sigma_px": (-1.0, "IWE blur (px, at most 1); -1 = the loss's default (1 px spatial losses, else 0)",
                      {"float_range": (-1.0, 1.0)}),
    "reference_time": (DEFAULTS.t_ref, "window reference time: start, middle or end", {}),
    **RUNNER_PARAMETERS,
    "image_rate_hz": (5.0, "flow pictures per second at most (only while subscribed); 0 = never",
                      {"float_range": (0.0, 1000.0)}),
    "frame_id": ("", "output frame; empty = the frame of the events", {}),
}
ESTIMATOR_PARAMETERS = ("loss", "use_polarity", "margin_px", "pyramid_patch_sizes", "min_events_per_patch",
                        "borrowing", "min_borrowing_events", "max_window_events", "smoothing", "min_confidence",
                        "min_motion_confidence", "slow_motion_px", "window_motion_px", "max_window_extension",
                        "extended_events_factor", "min_motion_px", "min_relative_speed", "min_aperture_ratio",
                        "blur_sigma_px", "reference_time")


def float_image_message(data: np.ndarray, stamp, frame_id: str) -> Image:
    """sensor_msgs/Image of a float32 (rows, columns) or (rows, columns, channels) array:
    32FC1, 32FC2, ... little-endian."""
    data = np.ascontiguousarray(data, dtype="<f4")
    channels = 1 if data.ndim == 2 else data.shape[2]
    message = Image()
    message.header.stamp = stamp
    message.header.frame_id = frame_id
    message.height, message.width = data.shape[:2]
    message.encoding = f"32FC{channels}"
    message.is_bigendian = 0
    message.step = message.width * 4 * channels
    message.data = data.tobytes()
    return message


def flow_image_message(estimate, stamp, frame_id: str) -> Image:
    """sensor_msgs/Image 32FC2 of a FlowEstimate: rows x columns of the patch grid, (vx, vy) px/s, NaN invalid."""
    return float_image_message(estimate.flow_image(), stamp, frame_id)


def confidence_image_message(estimate, stamp, frame_id: str) -> Image:
    """sensor_msgs/Image 32FC1 of a FlowEstimate's confidence per patch (0 where invalid)."""
    return float_image_message(estimate.confidence_image(), stamp, frame_id)


class OpticalFlowNode(EstimatingNode):
    """Thin ROS wrapper around :class:`OpticalFlowEstimator` (see the module docstring)."""

    def __init__(self, **kwargs):
        super().__init__("optical_flow_node", **kwargs)
        for name, (default, description, options) in PARAMETERS.items():
            self.declare_parameter(name, default, descriptor(description, **options))
        self._check({name: self.get_parameter(name).value for name in PARAMETERS})
        self._lock = threading.Lock()
        self._calibration: Calibration | None = None
        self._windows = None
        self._max_window_events = 0
        self._settings_changed = False
        self._stats = dict(windows_processed=0, last_valid_share=float("nan"),
                           last_reasons=np.zeros(len(REASONS), dtype=np.int64), last_borrowed=0, last_normal=0,
                           window_events=0)
        self._flow_publisher = self.create_publisher(Image, "optical_flow", 10)
        self._confidence_publisher = self.create_publisher(Image, "optical_flow/confidence", 10)
        self._image_publisher = self.create_publisher(Image, "optical_flow/image", 1)
        self._runner = EstimatorRunner(
            "optical_flow", Calibration.davis240c(), self._settings(),
            on_result=self._publish, **self.runner_options(),
            logger=self.get_logger(), warn_once=lambda key, text: self._input.warn_once(key, text),
            unit="window", max_pending=lambda: 1 if self._live() else self.get_parameter("max_pending_windows").value,
            skippable=self._live, name="focus_ros_flow",
            # windows cut while the estimator starts or compiles are held (bounded as the input's
            # events before a calibration), then all estimated in order
            hold_events=lambda: self.get_parameter("max_buffered_events").value,
            images_wanted=PictureRate(lambda: self.get_parameter("image_rate_hz").value,
                                      lambda: self._image_publisher.get_subscription_count() > 0))
        self._backlog = Backlog(self._runner)  # windows of held events: worked off in order (see _live)
        self._input = EventInput(self, self._on_events, self._on_calibration, own_thread=True)  # off the executor
        self.add_on_set_parameters_callback(self._on_set_parameters)
        self.start_diagnostics(self._publish_diagnostics)
        self.get_logger().info(f"waiting for {self._input.message_type} on '{self._input.events_topic}'; "
                               f"publishing 32FC2 px/s on '{self.resolve_topic_name('optical_flow')}'")

    # ----------------------------------------------------------------- parameters
    def _settings(self, overrides: dict | None = None) -> OpticalFlowSettings:
        overrides = overrides or {}
        value = lambda name: overrides.get(name, self.get_parameter(name).value)  # noqa: E731
        pyramid = tuple(int(size) for size in value("pyramid_patch_sizes") if int(size) > 0)
        return OpticalFlowSettings(loss=value("loss"), use_polarity=value("use_polarity"),
                                   patch_size_px=value("patch_size_px"),
                                   patch_stride_px=value("patch_stride_px") or None, margin_px=value("margin_px"),
                                   pyramid_patch_sizes=pyramid, min_events_per_patch=value("min_events_per_patch"),
                                   min_aperture_ratio=value("min_aperture_ratio"), borrowing=value("borrowing"),
                                   min_borrowing_events=value("min_borrowing_events"),
                                   smoothing=value("smoothing"), min_confidence=value("min_confidence"),
                                   min_motion_confidence=value("min_motion_confidence"),
                                   slow_motion_px=value("slow_motion_px"),
                                   window_motion_px=value("window_motion_px"),
                                   max_window_extension=value("max_window_extension"),
                                   extended_events_factor=value("extended_events_factor"),
                                   min_motion_px=value("min_motion_px"), min_relative_speed=value("min_relative_speed"),
                                   pixel_binning=value("pixel_binning"),
                                   max_window_events=None if value("max_window_events") < 0
                                   else value("max_window_events"),
                                   blur_sigma_px=None if value("blur_sigma_px") < 0 else value("blur_sigma_px"),
                                   t_ref=value("reference_time"))

    def _check(self, values: dict, size=(240, 180)) -> None:
        """ValueError naming the problem when the values are unusable."""
        if values.get("queue_policy", "newest") not in ("newest", "all"):
            raise ValueError(f"queue_policy '{values['queue_policy']}' is not one of: newest, all")
        if values.get("reference_time", "middle") not in T_REF_CHOICES:
            raise ValueError(f"reference_time '{values['reference_time']}' is not one of: {', '.join(T_REF_CHOICES)}")
        if values.get("loss", "variance") not in LOSSES:
            raise ValueError(f"loss '{values['loss']}' is not one of: {', '.join(LOSSES)}")
        OpticalFlowEstimator(*size, self._settings(values))

    def _on_set_parameters(self, parameters) -> SetParametersResult:
        values = {p.name: p.value for p in parameters}
        try:
            self._check(values, (self._calibration.width, self._calibration.height) if self._calibration
                        else (240, 180))
        except ValueError as error:
            return SetParametersResult(successful=False, reason=str(error))
        if any(name in values for name in ESTIMATOR_PARAMETERS + ("window_events",)):
            with self._lock:
                self._settings_changed = True
        return SetParametersResult(successful=True)

    def _reconfigure(self) -> None:
        """New estimator settings (for the next window) and new windows (lock held)."""
        self._settings_changed = False
        settings = self._settings()
        try:  # checked when set; kept as a last resort
            estimator = OpticalFlowEstimator(self._calibration.width, self._calibration.height, settings)
            grid = estimator.grid
        except ValueError as error:
            self.get_logger().error(f"settings not usable: {error}; keeping the previous ones")
            return
        duration = self.get_parameter("window_duration_s").value
        window_events = (self.get_parameter("window_events").value
                         or default_window_events(self._calibration.width, self._calibration.height))
        self._windows = (DurationWindowCutter(int(round(duration * 1e9))) if duration > 0
                         else CountWindowCutter(window_events))
        self._runner.clear_pending()
        self._runner.configure(self._calibration, settings)
        window = f"{duration:g}-s windows" if duration > 0 else f"windows of {window_events} events"
        if settings.window_motion_px > 0:
            window += (f" reaching back up to {settings.max_window_extension:g}x to span "
                       f"{settings.window_motion_px:g} px at the median patch speed")
        self._stats["window_events"] = 0 if duration > 0 else window_events
        self._stats["pixel_binning"] = estimator.binning
        self._stats["max_window_events"] = estimator.max_window_events
        self._max_window_events = estimator.max_window_events
        self.get_logger().info(f"patch flow with loss '{settings.loss}': {grid.columns}x{grid.rows} "
                               f"patches of {grid.size} px every {grid.stride} px (pixels binned "
                               f"{estimator.binning}x{estimator.binning}), {window}, at most "
                               f"{estimator.max_window_events or 'all'} events per window")

    def _live(self) -> bool:
        """``queue_policy: newest`` in force: not while windows cut from held events wait (events
        that came before the calibration, or queued while the first message's decoder compiled:
        all estimated, in order; :class:`~focus_ros.ros.event_input.Backlog`). Called by the
        runner with its lock held: takes no lock of the node's."""
        return self.get_parameter("queue_policy").value == "newest" and not self._backlog.active()

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
        """Window one guarded batch and hand complete windows to the runner (the event input's thread)."""
        with self._lock:
            if self._settings_changed and self._calibration is not None:
                self._reconfigure()
            if self._windows is None:
                return
            if batch.restart:
                self._windows.reset()
                self._runner.reset()
            for window in self._windows.push(batch.events):
                if self._max_window_events and len(window) > self._max_window_events:
                    # the estimator's own thinning, done here: a 1280x720 window crosses to the
                    # estimator process with 40,000 events instead of 640,000 (same result)
                    window = thin_events(window, self._max_window_events)
                self._backlog.push(Job(window, received_s=batch.received_s), held=batch.held)

    # ----------------------------------------------------------------- results
    def _publish(self, job: Job, result) -> None:
        """One window's flow, and its picture when one was asked for (the runner's thread)."""
        estimate = result.estimate
        frame_id = self.get_parameter("frame_id").value or self._input.frame_id
        stamp = messages.time_from_ns(estimate.t_ref_ns)
        self._flow_publisher.publish(flow_image_message(estimate, stamp, frame_id))
        self._confidence_publisher.publish(confidence_image_message(estimate, stamp, frame_id))
        with_events = estimate.event_counts > 0
        with self._lock:
            self._stats["windows_processed"] += 1
            self._stats["last_valid_share"] = (float(estimate.valid[with_events].mean()) if with_events.any()
                                               else float("nan"))
            self._stats["last_reasons"] = np.bincount(estimate.reason[with_events], minlength=len(REASONS))
            self._stats["last_borrowed"] = int(estimate.borrowed.sum())
            self._stats["last_normal"] = int(estimate.normal.sum())
        if result.images is not None:  # arrows over the compensated image, drawn where the estimator ran
            self._image_publisher.publish(messages.rgb_image(result.images[0], stamp, frame_id))

    # ----------------------------------------------------------------- diagnostics
    def _publish_diagnostics(self) -> None:
        inputs = self._input.diagnostics()
        with self._lock:
            stats = dict(self._stats)
        status = messages.estimator_status(f"{self.get_name()}: optical flow", self._input.frame_id,
                                           inputs["calibration_source"] != "none", self.health(),
                                           "estimating", uncalibrated="no sensor size (camera_info or parameters)")
        values = {**inputs, **self._runner.diagnostic_values(), "windows_processed": stats["windows_processed"],
                  "valid_patch_share": stats["last_valid_share"], "window_events": stats["window_events"],
                  "pixel_binning": stats.get("pixel_binning", 0),
                  "max_window_events": stats.get("max_window_events", 0),
                  "patches_borrowed": stats["last_borrowed"], "patches_normal_flow": stats["last_normal"],
                  **{f"patches_{REASON_KEYS[code]}": int(count) for code, count in enumerate(stats["last_reasons"])}}
        self.publish_diagnostics(status, values)


def main(argv=None) -> int:
    """Entry point of ``ros2 run focus_ros optical_flow_node``."""
    return run_node("optical_flow_node", OpticalFlowNode, rclpy.spin, argv)


if __name__ == "__main__":
    sys.exit(main())
