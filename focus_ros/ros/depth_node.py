"""ROS 2 node: semi-dense depth from events and known camera poses, as point clouds.

Subscribes to events on ``events`` (through :class:`~focus_ros.ros.event_input.EventInput`:
dvs_msgs/EventArray or event_camera_msgs/EventPacket, raw, the same decoders, stream checks
and calibration fallbacks as the angular velocity node) and takes camera poses from one of
two sources (``pose_source``):

- ``topic``: ``pose`` (geometry_msgs/PoseStamped, e.g. remapped to ``/optitrack/davis``) or
  ``odometry`` (nav_msgs/Odometry, e.g. a VIO), chosen by ``pose_message_type``; an optional fixed
  camera-from-body transform (``camera_from_body.*``) turns body poses into camera poses;
- ``tf``: ``/tf`` and ``/tf_static`` (tf2_msgs/TFMessage, subscribed with tf2's QoS: the static
  transforms transient local), the pose of ``camera_frame`` (default: the events' frame_id) in
  ``world_frame`` (default: the root of its tree, e.g. ``map`` or ``odom``) through the TF tree
  (:class:`~focus_ros.poses.transforms.CameraPoses`), at the stamps of the moving transforms on the way;
  a pose waits until every transform on the way covers its stamp (at most ``pose_timeout_s``);
- ``auto`` (default): both are subscribed, and the first to give a camera pose is used, so that a
  motion-capture setup (remap ``pose``) and a robot (TF) both work without naming the source.

What happens between the messages and the estimator is the depth pipeline's
(:class:`~focus_ros.pipelines.depth.DepthPipeline`, the same loop as ``focus-ros depth``): events
are held until poses cover them (bounded by ``max_held_events``); keyframes are cut by parallax
(the camera travelled ``keyframe_baseline_fraction`` of the scene depth, the median depth of the
last keyframe, or turned ``keyframe_max_rotation_deg``; or every ``keyframe_baseline_m`` metres;
at most ``keyframe_events`` events). A keyframe completed while the estimator is still on an
earlier one waits and is joined by the next (``keyframe_merge_when_busy``), so the keyframe rate
follows the estimator and none is dropped; until the estimator's first keyframe is back (its
start, with an empty Numba cache a compile of seconds) keyframes queue as cut instead, up to
``max_pending_keyframes``. The estimator builds each keyframe's disparity space image and its
depth from focus (:class:`~focus_ros.estimators.depth.DepthEstimator`) as the other nodes' do
(:class:`~focus_ros.runtime.EstimatorRunner`): in a process of its own, the keyframe's
events through shared memory and its poses pickled beside them (``estimator_process``, default;
false = a thread of the node), never in the executor's thread; a dead process is restarted and
counted in ``/diagnostics``. Per keyframe it publishes

- ``depth/points`` (sensor_msgs/PointCloud2: float32 x, y, z in m, ``intensity`` = focus
  confidence, ``depth`` = m along the reference camera's optical axis, ``depth_sigma`` = its
  standard deviation in m, calibrated: about 68 % of true depths within it), in the world frame
  (``points_frame: world``: ``world_frame``, else TF's root or the pose messages' frame) or the
  reference camera frame (``points_frame: camera``);
- ``depth/map`` (sensor_msgs/PointCloud2, transient local, the world frame): the map
  fused from every keyframe's cloud (:class:`~focus_ros.depth.fusion.FusedMap`: the keyframes'
  points, by the looser ``map_support_neighbours``, that ``map_min_keyframes`` keyframes agree on,
  within ``map_depth_tolerance`` of their depth, ``intensity`` = how many, ``depth_sigma`` = the
  fused depth's standard deviation in m; at most ``map_max_points`` held);
- ``depth/image`` (sensor_msgs/Image 32FC1, m along the optical axis, NaN = unknown:
  REP-117/118) and ``depth/confidence`` (32FC1), frame and stamp of the reference view;
- ``depth/image_color`` (rgb8, near red, far blue), only while someone subscribes;
- ``/diagnostics`` once a second: events and poses received, keyframes offered, merged,
  published and dropped, ms per keyframe (``processing_ms_per_keyframe``), points per keyframe,
  the map's size, latency (median, and ``latency_max_ms``), pose problems, estimator process and
  restarts; WARN / ERROR with the reason when most / all events of the last second were dropped
  (poses ahead of or behind the events).

Pose problems (none yet, stopped, late, out of order, jumping back; with TF also a frame
unknown or in another tree, a transform invalid, poses that waited longer than
``pose_timeout_s`` for a transform on the way) and bad event messages are logged once (a TF
lookup's own line: "no transform from 'odom' to 'dvs': 'dvs' is unknown; known frames: ..."),
counted in ``/diagnostics``, and the node carries on with the next good data.
"""

from __future__ import annotations

import sys
import threading
import time
from collections import deque
from dataclasses import dataclass

import numpy as np
import rclpy
from rcl_interfaces.msg import SetParametersResult
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import Image, PointCloud2
from tf2_msgs.msg import TFMessage

from focus_ros.camera import Calibration
from focus_ros.estimators.depth import DepthSettings
from focus_ros.events import NANOSECONDS_PER_SECOND
from focus_ros.pipelines.depth import (DepthPipeline, DepthPipelineSettings, KeyframeJob, camera_from_body_matrix,
                                       keyframe_rules_text, points_in_camera_frame)
from focus_ros.runtime import EstimatorRunner, Job
from focus_ros.ros import depth_messages, messages
from focus_ros.ros.entry_point import run_node
from focus_ros.ros.estimating_node import EstimatingNode
from focus_ros.ros.event_input import EventBatch, EventInput
from focus_ros.ros.parameters import declare_settings, settings_from_parameters
from focus_ros.settings import setting
from focus_ros.sources.bags.messages import transforms_from_tf_message
from focus_ros.poses.transforms import POSE_SOURCES, CameraPoses

POINTS_FRAMES = ("world", "camera")

#: /tf and /tf_static as tf2's listener subscribes to them: reliable, 100 deep; the static
#: transforms transient local, so that a node started after the robot still gets them
TF_QOS = QoSProfile(depth=100, history=HistoryPolicy.KEEP_LAST, reliability=ReliabilityPolicy.RELIABLE)
TF_STATIC_QOS = QoSProfile(depth=100, history=HistoryPolicy.KEEP_LAST, reliability=ReliabilityPolicy.RELIABLE,
                           durability=DurabilityPolicy.TRANSIENT_LOCAL)

#: the pose subscription: best effort, 1000 deep. A lost pose costs nothing (the trajectory
#: interpolates between its neighbours), while a reliable reader delivers in order, so one pose
#: lost beside the big event messages would hold back every later one until the writer repairs
#: it (a heartbeat period: seconds), and every event behind them waits for poses. Best effort
#: also matches a best-effort pose publisher, which a reliable reader would not.
POSE_QOS = QoSProfile(depth=1000, history=HistoryPolicy.KEEP_LAST, reliability=ReliabilityPolicy.BEST_EFFORT)

#: keyframe latencies kept for the summary at the end (the latest ones)
LATENCIES_KEPT = 10_000


@dataclass(frozen=True)
class DepthNodeSettings:
    """depth_node's own parameters: where its poses come from, its outputs' frames, its queue."""

    pose_source: str = setting("auto", "where camera poses come from: topic (pose_message_type on 'pose' or "
                               "'odometry': motion capture, a VIO), tf (/tf and /tf_static: camera_frame in "
                               "world_frame, a robot's odometry and the camera's mounting), auto = whichever gives a "
                               "camera pose first", choices=POSE_SOURCES, option=None, read_only=True)
    pose_message_type: str = setting(depth_messages.POSE_MESSAGE_TYPES[0], "camera poses: geometry_msgs/PoseStamped "
                                     "on 'pose' or nav_msgs/Odometry on 'odometry'",
                                     choices=depth_messages.POSE_MESSAGE_TYPES, option=None, read_only=True)
    camera_from_body_translation_m: tuple[float, ...] = setting(
        (0.0, 0.0, 0.0), "fixed transform from the pose's body frame to the camera frame: translation of the body "
        "origin in camera coordinates; identity (default) = the poses are the camera's", unit="m", option=None,
        parameter="camera_from_body.translation_m", read_only=True)
    camera_from_body_rotation_xyzw: tuple[float, ...] = setting(
        (0.0, 0.0, 0.0, 1.0), "camera_from_body rotation as a unit quaternion (qx, qy, qz, qw)", option=None,
        parameter="camera_from_body.rotation_xyzw", read_only=True)
    pose_timeout_s: float = setting(1.0, "events waiting longer than this (wall time) for poses are reported (poses "
                                    "missing, late or stopped)", unit="s", minimum=0.01, maximum=1e6, option=None)
    max_pending_keyframes: int = setting(4, "keyframes queued for the estimator at most; beyond it the oldest are "
                                         "dropped and counted", unit="keyframes", minimum=1, maximum=1000,
                                         option=None)
    keyframe_flush_idle_s: float = setting(1.0, "when no events came for this long, the events collected since the "
                                           "last keyframe (at least min_events) make one more keyframe, as at the "
                                           "end of focus-ros depth; 0 = never", unit="s", minimum=0.0, maximum=1e6,
                                           option=None)
    points_frame: str = setting("world", "frame of depth/points: world (the poses' frame) or camera (the reference "
                                "camera frame)", choices=POINTS_FRAMES, option=None)
    camera_frame: str = setting("", "the camera's frame: the TF frame whose poses are looked up (pose_source tf), "
                                "the frame of depth images and camera-frame clouds; empty = the events' frame_id, "
                                "else camera_info's", option=None, read_only=True)
    world_frame: str = setting("", "the frame of world-frame clouds and of the map, and with TF the frame the camera "
                               "is looked up in; empty = the root of the camera frame's TF tree (e.g. map or odom), "
                               "or the pose messages' header frame", option=None, read_only=True)


#: the settings classes whose parameters depth_node declares, beyond the event input's and the runner's
SETTINGS_CLASSES = (DepthNodeSettings, DepthPipelineSettings, DepthSettings)


class DepthNode(EstimatingNode):
    """Thin ROS wrapper around :class:`~focus_ros.pipelines.depth.DepthPipeline` (see the module docstring)."""

    def __init__(self, **kwargs):
        super().__init__("depth_node", **kwargs)
        for settings_class in SETTINGS_CLASSES:
            declare_settings(self, settings_class)
        # ValueError with the reason when unusable
        self._node_settings, pipeline_settings, self._depth = self._settings_from_parameters()
        self._pose_class = depth_messages.pose_message_class(self._node_settings.pose_message_type)
        self._pose_topic = "pose" if self._node_settings.pose_message_type == "geometry_msgs/PoseStamped" \
            else "odometry"

        self._lock = threading.Lock()
        self._world_frame = ""
        self._calibration: Calibration | None = None
        self._poses_received = 0
        self._latency_max_ms = float("nan")
        self._latencies_ms: deque = deque(maxlen=LATENCIES_KEPT)  # the latest keyframes' latencies (ms)
        self._outputs = {
            "points": self.create_publisher(PointCloud2, "depth/points", 5),
            "image": self.create_publisher(Image, "depth/image", 5),
            "confidence": self.create_publisher(Image, "depth/confidence", 5),
            # the map as it stands, for rviz started later too
            "map": self.create_publisher(PointCloud2, "depth/map", QoSProfile(
                history=HistoryPolicy.KEEP_LAST, depth=1, reliability=ReliabilityPolicy.RELIABLE,
                durability=DurabilityPolicy.TRANSIENT_LOCAL)),
            "image_color": self.create_publisher(Image, "depth/image_color", 5),
        }
        # the estimator starts now (and runs every compiled stage once on a synthetic keyframe),
        # so that the first keyframe does not pay for loading; keyframes wait for the calibration
        self._runner = EstimatorRunner(
            "depth", Calibration.davis240c(), self._depth, **self.runner_options(),
            on_result=self._publish, logger=self.get_logger(),
            warn_once=lambda key, text: self._input.warn_once(key, text), unit="keyframe",
            max_pending=lambda: self._node_settings.max_pending_keyframes,
            images_wanted=lambda: self._outputs["image_color"].get_subscription_count() > 0,
            capacity_events=pipeline_settings.keyframe_events, name="focus_ros_depth")
        counts = self._runner.counts
        self._camera_from_body = camera_from_body_matrix(self._node_settings.camera_from_body_translation_m,
                                                         self._node_settings.camera_from_body_rotation_xyzw)
        self._pipeline = DepthPipeline(
            pipeline_settings, self._depth, pose_source=f"poses on '{self.resolve_topic_name(self._pose_topic)}'",
            camera_from_body=self._camera_from_body,
            unreturned=lambda: counts["dropped"] + counts["lost"] + counts["failed"],
            max_pending=lambda: self._node_settings.max_pending_keyframes,
            estimator_ready=lambda: self._runner.state == "running",
            warn_once=lambda key, text: self._input.warn_once(key, text))
        # where poses come from: 'topic' or 'tf', or 'auto' until one of them gives a camera pose
        self._pose_source = self._node_settings.pose_source
        self._camera_poses = CameraPoses(
            self._node_settings.world_frame, self._node_settings.camera_frame,
            jump_back_ns=int(pipeline_settings.pose_jump_back_s * NANOSECONDS_PER_SECOND))
        waiting_for = []
        if self._pose_source != "tf":
            self.create_subscription(self._pose_class, self._pose_topic, self._on_pose, POSE_QOS)
            waiting_for.append(f"{self._node_settings.pose_message_type} on "
                               f"'{self.resolve_topic_name(self._pose_topic)}'")
        if self._pose_source != "topic":
            self.create_subscription(TFMessage, "/tf", lambda message: self._on_transforms(message, False), TF_QOS)
            self.create_subscription(TFMessage, "/tf_static", lambda message: self._on_transforms(message, True),
                                     TF_STATIC_QOS)
            waiting_for.append(f"TF {self._tf_path_text()}")
        self._input = EventInput(self, self._on_events, self._on_calibration, own_thread=True)  # off the executor
        self.add_on_set_parameters_callback(self._on_set_parameters)
        self.start_diagnostics(self._publish_diagnostics)
        self.create_steady_timer(0.1, self._flush_if_idle)  # the end of a bag with use_sim_time, no /clock
        self.get_logger().info(
            f"waiting for {self._input.message_type} on '{self._input.events_topic}' and "
            f"{' or '.join(waiting_for)}; publishing "
            f"'{self.resolve_topic_name('depth/points')}' every {keyframe_rules_text(pipeline_settings)}")

    # ----------------------------------------------------------------- parameters
    def _settings_from_parameters(self, overrides: dict | None = None):
        """(node, pipeline, depth estimator) settings from the parameters (``overrides``: values
        about to be set); ValueError saying why they are unusable."""
        return tuple(settings_from_parameters(self, settings_class, overrides=overrides)
                     for settings_class in SETTINGS_CLASSES)

    def _on_set_parameters(self, parameters) -> SetParametersResult:
        try:
            node_settings, pipeline_settings, depth = self._settings_from_parameters(
                {p.name: p.value for p in parameters})
        except ValueError as error:
            return SetParametersResult(successful=False, reason=str(error))
        with self._lock:
            self._node_settings = node_settings
            if depth != self._depth:
                self._depth = depth
                if self._calibration is not None:
                    self._runner.configure(self._calibration, depth)
            self._pipeline.reconfigure(pipeline_settings, depth)
        return SetParametersResult(successful=True)

    # ----------------------------------------------------------------- input
    def _on_calibration(self, calibration, source: str) -> None:
        with self._lock:
            if self._calibration != calibration:
                self._calibration = calibration
                self._runner.configure(calibration, self._depth)
                self._pipeline.set_calibration(calibration)

    def _on_pose(self, message) -> None:
        if self._pose_source == "tf":  # auto chose TF: the pose topic is not read (set once, under the lock)
            return
        received_s = time.monotonic()
        t_ns, position, orientation, frame_id = depth_messages.pose_from_message(message)
        with self._lock:
            if self._pose_source == "auto":
                self._choose_pose_source("topic")
            elif self._pose_source != "topic":
                return
            if frame_id:
                self._world_frame = frame_id
            self._add_pose(t_ns, position, orientation, received_s)

    def _on_transforms(self, message, static: bool) -> None:
        """A TFMessage from /tf or /tf_static: the camera poses it completes go to the pipeline."""
        if self._pose_source == "topic":  # auto chose the pose topic: TF is not read
            return
        received_s = time.monotonic()
        transforms = transforms_from_tf_message(message)
        with self._lock:
            if self._pose_source != "topic":
                self._add_camera_poses(*self._camera_poses.add(transforms, static, received_s), received_s)

    def _add_camera_poses(self, poses, problems: list[str], received_s: float) -> None:
        """Camera poses resolved from TF to the pipeline (lock held); TF's problems said once each."""
        for problem in problems:
            self._input.warn_once("tf_invalid", problem)
        if poses and self._pose_source == "auto":
            self._choose_pose_source("tf")
        for t_ns, position, orientation in poses:
            self._add_pose(t_ns, position, orientation, received_s)

    def _add_pose(self, t_ns: int, position, orientation, received_s: float) -> None:
        """One camera pose, from either source, to the pipeline (lock held)."""
        self._poses_received += 1
        self._submit(self._pipeline.add_pose(t_ns, position, orientation, received_s))

    def _choose_pose_source(self, source: str) -> None:
        """pose_source auto: the first source to give a camera pose is the one used (lock held)."""
        self._pose_source = source
        if source == "tf":
            self._world_frame = self._camera_poses.world_frame
            self._pipeline.set_pose_source(f"TF {self._tf_path_text()}", None)
            where = f"TF, {self._tf_path_text()}"
            if self._camera_from_body is not None:
                self._input.warn_once("camera_from_body_unused", "camera_from_body is not used with poses from TF "
                                      "(the camera's mounting is a static transform there)")
        else:
            where = f"{self._node_settings.pose_message_type} on '{self.resolve_topic_name(self._pose_topic)}'"
        self.get_logger().info(f"camera poses from {where} (pose_source auto)")

    def _tf_path_text(self) -> str:
        """"'world' -> 'dvs'": the frames the camera's pose is looked up between, as far as known."""
        world, camera = self._camera_poses.world_frame, self._camera_poses.camera_frame
        return f"{repr(world) if world else 'the tree root'} -> {repr(camera) if camera else 'the events frame'}"

    def _on_events(self, batch: EventBatch) -> None:
        with self._lock:
            camera_frame = batch.frame_id or self._input.frame_id  # the events', else camera_info's
            if self._pose_source != "topic" and not self._camera_poses.camera_frame and camera_frame:
                self._camera_poses.set_camera_frame(camera_frame)  # now TF stamps waiting for it can resolve
                self._add_camera_poses(*self._camera_poses.add([], received_s=batch.received_s), batch.received_s)
            self._submit(self._pipeline.add_events(batch.events, batch.received_s, batch.restart))

    def _flush_if_idle(self) -> None:
        """Timer: the waiting keyframe once the estimator is free; after keyframe_flush_idle_s
        without events, the events left make one more keyframe (the end of a bag, a camera that stopped)."""
        now_s = time.monotonic()
        with self._lock:
            if self._pose_source != "topic" and self._camera_poses.expire(now_s, self._node_settings.pose_timeout_s):
                self._input.warn_once("tf_expired", f"camera poses from TF dropped after waiting pose_timeout_s for "
                                      f"the transforms on the way: {self._camera_poses.last_error or 'none came'}")
            self._submit(self._pipeline.flush_if_idle(self._node_settings.keyframe_flush_idle_s, now_s))

    def _submit(self, jobs: list[KeyframeJob]) -> None:
        """Keyframes to the estimator: the events through shared memory, the poses pickled beside
        them (lock held)."""
        for job in jobs:
            dropped = self._runner.counts["dropped"]
            self._runner.push(Job(job.events, extra=job.poses, received_s=job.received_s))
            if self._runner.counts["dropped"] > dropped:
                self._input.warn_once("keyframes_dropped", "keyframes arrive faster than they are computed: the "
                                      "oldest are dropped (max_pending_keyframes)")

    # ----------------------------------------------------------------- results
    def _publish(self, job: Job, result) -> None:
        """One keyframe's clouds and images, then the map (the runner's thread). The next keyframe
        goes to the estimator before the map is updated: the map's cost (it grows with the map)
        delays neither the keyframe's outputs nor the next keyframe."""
        keyframe = result.estimate
        with self._lock:
            depths = self._pipeline.keyframe_done(keyframe)
        if depths is None:  # too few events, no parallax: said, not turned into noise
            self._input.warn_once("no_depth:" + keyframe.warning.split(":")[0],
                                  f"no depth for the keyframe at {keyframe.t_ref_ns / 1e9:.6f} s: {keyframe.warning}")
        else:
            self._publish_keyframe(keyframe, depths, result.images)
        with self._lock:  # the worst time from a keyframe's last event received to its outputs published
            latency_ms = 1e3 * (time.monotonic() - job.received_s)
            if not self._latency_max_ms >= latency_ms:  # NaN: none yet in this period
                self._latency_max_ms = latency_ms
            self._latencies_ms.append(latency_ms)
            self._submit(self._pipeline.take_waiting())
        if depths is not None:
            map_points, map_support, map_sigma = self._pipeline.update_map(keyframe, with_sigma=True)
            self._outputs["map"].publish(depth_messages.point_cloud(
                map_points, map_support, np.full(len(map_points), np.nan, np.float32),
                messages.time_from_ns(keyframe.t_ref_ns), self._world_frame_id(), map_sigma))

    def _publish_keyframe(self, keyframe, depths: np.ndarray, images) -> None:
        """The keyframe's cloud (world or camera frame) and its depth and confidence images."""
        stamp = messages.time_from_ns(keyframe.t_ref_ns)
        camera_frame = self._node_settings.camera_frame or self._input.frame_id or "event_camera"
        if self._node_settings.points_frame == "world":
            points, frame = keyframe.points_world, self._world_frame_id()
        else:
            points, frame = points_in_camera_frame(keyframe), camera_frame
        self._outputs["points"].publish(depth_messages.point_cloud(points, keyframe.point_confidence, depths, stamp,
                                                                   frame, keyframe.point_sigma_m))
        self.say_first_output("cloud", keyframe.t_ref_ns)
        self._outputs["image"].publish(messages.float_image(keyframe.depth_m, stamp, camera_frame))
        self._outputs["confidence"].publish(messages.float_image(keyframe.confidence, stamp, camera_frame))
        if images is not None:  # for people, only when watched: drawn where the estimator ran
            self._outputs["image_color"].publish(messages.rgb_image(images[0], stamp, camera_frame))

    def _pose_source_text(self) -> tuple[str, str]:
        """(where poses come from, what is missing there) for pose problems (lock held)."""
        topic = f"'{self.resolve_topic_name(self._pose_topic)}'"
        if self._pose_source == "topic":
            return topic, ""
        why = self._camera_poses.problem()
        return ("TF", why) if self._pose_source == "tf" else (f"{topic} or TF", why)

    def _world_frame_id(self) -> str:
        return self._node_settings.world_frame or self._world_frame or "world"

    def stop(self) -> None:
        """Stop the input and the estimator, then say in one line what the run did: keyframes
        offered, done, dropped, and their latency (median and worst), the final counts."""
        super().stop()
        line = f"{self.get_name()}: {self.summary()}"
        try:
            self.get_logger().info(line)
        except Exception:  # noqa: BLE001 - the context is gone: stdout still is there
            print(line, flush=True)

    def summary(self) -> str:
        """'keyframes offered N, done N (published N, without depth N), dropped N, lost N, failed N,
        merged N; latency median X ms, worst X ms': the counts since the start and the latencies
        (a keyframe's last event received to its outputs published) of the latest LATENCIES_KEPT
        keyframes."""
        with self._lock:
            stats, latencies = dict(self._pipeline.counts), list(self._latencies_ms)
        counts = self._runner.counts
        latency = (f"latency median {np.median(latencies):.0f} ms, worst {max(latencies):.0f} ms" if latencies
                   else "latency - (no keyframe done)")
        return (f"keyframes offered {stats['keyframes_offered']}, done {stats['keyframes_done']} (published "
                f"{stats['keyframes_published']}, without depth {stats['keyframes_without_depth']}), dropped "
                f"{counts['dropped']}, lost {counts['lost']}, failed {counts['failed']}, merged "
                f"{stats['keyframes_merged']}; {latency}")

    # ----------------------------------------------------------------- diagnostics
    def _publish_diagnostics(self) -> None:
        input_values = self._input.diagnostics()
        with self._lock:
            pose_problem = self._pipeline.pose_problem(time.monotonic(), self._node_settings.pose_timeout_s,
                                                       *self._pose_source_text())  # counts it: before the copy
            stats, latency_max_ms = dict(self._pipeline.counts), self._latency_max_ms
            self._latency_max_ms = float("nan")  # the worst since the previous report
            held = self._pipeline.gate.held_events
            gate_counts = dict(self._pipeline.gate.counts)
            drop_problem = self._pipeline.drop_problem(input_values["events_received"])
            poses_received = self._poses_received
            tf_counts = dict(self._camera_poses.counts) if self._pose_source != "topic" else {}
            pose_source = self._pose_source
        if pose_problem:
            self._input.warn_once("pose_problem:" + pose_problem.split(" ")[1], pose_problem)
        problem = drop_problem if drop_problem and drop_problem[0] == "error" else \
            (("warn", pose_problem) if pose_problem else None) or drop_problem or self.health()
        status = messages.estimator_status(f"{self.get_name()}: depth", self._input.frame_id,
                                           input_values["calibration_source"] != "none", problem,
                                           "estimating depth")
        values = {
            **input_values,
            **self._runner.diagnostic_values(),
            "pose_source": pose_source,
            "poses_received": poses_received,
            **{name: stats[name] for name in ("poses_out_of_order", "poses_invalid", "pose_restarts", "pose_timeouts")},
            **tf_counts,
            "events_held_for_poses": held,
            **gate_counts,
            **{name: stats[name] for name in ("keyframes_offered", "keyframes_merged", "keyframes_done",
                                              "keyframes_published", "keyframes_without_depth")},
            "points_per_keyframe": stats["last_points"],
            "latency_max_ms": latency_max_ms,
            "map_points": stats["map_points"],
            "map_points_held": len(self._pipeline.map),
        }
        self.publish_diagnostics(status, values)


def main(argv=None) -> int:
    """Entry point of ``ros2 run focus_ros depth_node``."""
    return run_node("depth_node", DepthNode, rclpy.spin, argv)


if __name__ == "__main__":
    sys.exit(main())
