"""ROS 2 node: semi-dense depth from events and known camera poses, as point clouds.

Subscribes to events on ``events`` (through :class:`~focus_ros.ros.event_input.EventInput`:
dvs_msgs/EventArray or event_camera_msgs/EventPacket, raw, the same decoders, stream checks
and calibration fallbacks as the angular velocity node) and to camera poses: ``pose``
(geometry_msgs/PoseStamped, e.g. remapped to ``/optitrack/davis``) or ``odometry``
(nav_msgs/Odometry, e.g. a VIO), chosen by ``pose_message_type``; an optional fixed
camera-from-body transform (``camera_from_body.*``) turns body poses into camera poses.

Events are held until poses cover them (bounded by ``max_held_events``); then a keyframe
selector cuts keyframes by parallax (the camera travelled ``keyframe_baseline_fraction`` of the
scene depth, the median depth of the last keyframe, or turned ``keyframe_max_rotation_deg``;
or every ``keyframe_baseline_m`` metres; at most ``keyframe_events`` events). A keyframe
completed while the estimator is still on an earlier one waits and is joined by the next
(``keyframe_merge_when_busy``), so the keyframe rate follows the estimator and none is dropped;
until the estimator's first keyframe is back (its start, with an empty Numba cache a compile of
seconds) keyframes queue as cut instead, up to ``max_pending_keyframes``.
The estimator builds each keyframe's disparity space image and its
depth from focus (:class:`~focus_ros.estimators.depth.DepthEstimator`) as the other nodes' do
(:class:`~focus_ros.runtime.EstimatorRunner`): in a process of its own, the keyframe's
events through shared memory and its poses pickled beside them (``estimator_process``, default;
false = a thread of the node), never in the executor's thread; a dead process is restarted and
counted in ``/diagnostics``. Per keyframe it publishes

- ``depth/points`` (sensor_msgs/PointCloud2: float32 x, y, z in m, ``intensity`` = focus
  confidence, ``depth`` = m along the reference camera's optical axis), in the poses' world
  frame (``points_frame: world``) or the reference camera frame (``points_frame: camera``);
- ``depth/map`` (sensor_msgs/PointCloud2, transient local, the poses' world frame): the map
  fused from every keyframe's cloud (:class:`~focus_ros.depth.fusion.FusedMap`: the keyframes'
  points, by the looser ``map_support_neighbours``, that ``map_min_keyframes`` keyframes agree on, within ``map_depth_tolerance`` of their
  depth, ``intensity`` = how many; at most ``map_max_points`` held);
- ``depth/image`` (sensor_msgs/Image 32FC1, m along the optical axis, NaN = unknown:
  REP-117/118) and ``depth/confidence`` (32FC1), frame and stamp of the reference view;
- ``depth/image_color`` (rgb8, near red, far blue), only while someone subscribes;
- ``/diagnostics`` once a second: events and poses received, keyframes offered, merged,
  published and dropped, ms per keyframe (``processing_ms_per_keyframe``), points per keyframe,
  the map's size, latency (median, and ``latency_max_ms``), pose problems, estimator process and
  restarts; WARN / ERROR with the reason when most / all events of the last second were dropped
  (poses ahead of or behind the events).

Pose problems (none yet, stopped, late, out of order, jumping back) and bad event messages are
logged once, counted in ``/diagnostics``, and the node carries on with the next good data.
"""

from __future__ import annotations

import math
import sys
import threading
import time
from collections import deque

import numpy as np
import rclpy
from rcl_interfaces.msg import SetParametersResult
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import Image, PointCloud2

from focus_ros.camera import Calibration
from focus_ros.depth.fusion import MAP_DEPTH_TOLERANCE, MAP_MAX_POINTS, MAP_MIN_KEYFRAMES, FusedMap
from focus_ros.estimators.depth import (KEYFRAME_BASELINE_FRACTION, KEYFRAME_MAX_EVENTS, KEYFRAME_MAX_ROTATION_DEG,
                                        DepthSettings, KeyframeSelector, depth_method_names)
from focus_ros.runtime import EstimatorRunner, Job
from focus_ros.events import NANOSECONDS_PER_SECOND, Events
from focus_ros.poses import PoseError, Trajectory, pose_matrix, quaternion_to_matrix
from focus_ros.ros import depth_messages, messages
from focus_ros.ros.entry_point import run_node
from focus_ros.ros.estimating_node import RUNNER_PARAMETERS, EstimatingNode
from focus_ros.ros.event_input import EventBatch, EventInput
from focus_ros.ros.parameters import descriptor

POINTS_FRAMES = ("world", "camera")


# ============================================================================ rclpy-free parts


class PoseGate:
    """Holds event batches until poses cover them (bounded), then lets them through in order.

    ``push`` events; ``release(first_pose_ns, last_pose_ns)`` returns the batches (Events,
    received_s) whose events lie within the poses' time span; events earlier than the first
    pose can never be covered and are dropped (counted). Beyond ``max_events`` held events the
    oldest are dropped (counted).
    """

    def __init__(self, max_events: int):
        self.max_events = int(max_events)
        self._held: deque = deque()
        self.held_events = 0
        self.counts = {"events_dropped_before_first_pose": 0, "events_dropped_waiting_for_poses": 0}

    def push(self, events: Events, received_s: float) -> int:
        """Hold one batch; returns the number of events dropped to stay within the bound."""
        self._held.append((events, received_s))
        self.held_events += len(events)
        dropped = 0
        while self.held_events > self.max_events and self._held:
            old, _ = self._held.popleft()
            self.held_events -= len(old)
            dropped += len(old)
        self.counts["events_dropped_waiting_for_poses"] += dropped
        return dropped

    @property
    def oldest_received_s(self) -> float | None:
        return self._held[0][1] if self._held else None

    @property
    def oldest_t_ns(self) -> int | None:
        return int(self._held[0][0].t[0]) if self._held else None

    def release(self, first_pose_ns: int | None, last_pose_ns: int | None) -> list[tuple[Events, float]]:
        released = []
        if first_pose_ns is None:
            return released
        while self._held:
            events, received_s = self._held[0]
            if events.t[0] < first_pose_ns:  # before the poses: never coverable
                keep = int(np.searchsorted(events.t, first_pose_ns, side="left"))
                self.counts["events_dropped_before_first_pose"] += keep
                self.held_events -= keep
                events = events[keep:]
                if not len(events):
                    self._held.popleft()
                    continue
                self._held[0] = (events, received_s)
            covered = int(np.searchsorted(events.t, last_pose_ns, side="right"))
            if covered == 0:
                break
            self.held_events -= covered
            if covered == len(events):
                self._held.popleft()
                released.append((events, received_s))
            else:
                released.append((events[:covered], received_s))
                self._held[0] = (events[covered:], received_s)
                break
        return released

    def clear(self) -> None:
        self._held.clear()
        self.held_events = 0


#: share of the events received in a diagnostics period that, dropped, makes the status WARN / ERROR
DROPPED_WARN_SHARE = 0.5
DROPPED_ERROR_SHARE = 0.99


def dropped_events_problem(received: int, dropped: dict, reasons: dict) -> tuple[str, str] | None:
    """("warn" | "error", why) when most (>= DROPPED_WARN_SHARE) or all (>= DROPPED_ERROR_SHARE) of
    the ``received`` events of a period were dropped; ``dropped``: events dropped per cause,
    ``reasons``: cause -> what it means and what fixes it. None when the node uses its input."""
    total = sum(dropped.values())
    if received <= 0 or total < DROPPED_WARN_SHARE * received:
        return None
    cause = max(dropped, key=dropped.get)
    level = "error" if total >= DROPPED_ERROR_SHARE * received else "warn"
    share = "all" if level == "error" else f"{100 * min(total / received, 1.0):.0f} %"
    return level, f"dropping {share} of the events ({total} of {received} in the last period): {reasons[cause]}"


#: the pose subscription: best effort, 1000 deep. A lost pose costs nothing (the trajectory
#: interpolates between its neighbours), while a reliable reader delivers in order, so one pose
#: lost beside the big event messages would hold back every later one until the writer repairs
#: it (a heartbeat period: seconds), and every event behind them waits for poses. Best effort
#: also matches a best-effort pose publisher, which a reliable reader would not.
POSE_QOS = QoSProfile(depth=1000, history=HistoryPolicy.KEEP_LAST, reliability=ReliabilityPolicy.BEST_EFFORT)


def join_keyframes(waiting: Events, stride: int, new: Events, max_events: int) -> tuple[Events, int]:
    """A keyframe waiting for the estimator (every ``stride``-th event of the keyframes it has
    joined) joined by the next one: ``new`` thinned to the same stride, then both halved (the
    stride doubled) until at most ``max_events`` remain. Returns (events, stride): the events
    stay uniform in time, every event up to max_events, so memory is bounded however long the
    estimator is busy."""
    joined = Events.concatenate([waiting, new[::stride]])
    while len(joined) > max(int(max_events), 1):
        joined, stride = joined[::2], 2 * stride
    return joined, stride


#: keyframe latencies kept for the summary at the end (the latest ones)
LATENCIES_KEPT = 10_000

#: longest a keyframe waits for the estimator to be free before it is queued anyway (s)
MERGE_WAIT_MAX_S = 10.0


def trajectory_segment(trajectory: Trajectory, t_first_ns: int, t_last_ns: int) -> Trajectory:
    """A copy of the camera poses that bracket [t_first_ns, t_last_ns] (events' clock), as a
    Trajectory of its own (already camera poses on the events' clock: no transform, no offset)."""
    t = trajectory.t_ns
    first = max(int(np.searchsorted(t, t_first_ns, side="right")) - 1, 0)
    last = min(int(np.searchsorted(t, t_last_ns, side="left")) + 1, len(t))
    return Trajectory(t[first:last].copy(), trajectory.position_m[first:last].copy(),
                      trajectory.orientation_xyzw[first:last].copy(), source=trajectory.source)


# ============================================================================ the node

#: name -> (default, description, descriptor options): depth_node's own parameters (the event
#: input declares its own; the depth estimator's are in DEPTH_PARAMETERS)
PARAMETERS = {
    "pose_message_type": ("geometry_msgs/PoseStamped", "camera poses: geometry_msgs/PoseStamped on 'pose' or "
                          "nav_msgs/Odometry on 'odometry'", {"read_only": True}),
    "camera_from_body.translation_m": ([0.0, 0.0, 0.0], "fixed transform from the pose's body frame to the "
                                       "camera frame: translation (m) of the body origin in camera coordinates; "
                                       "identity (default) = the poses are the camera's", {"read_only": True}),
    "camera_from_body.rotation_xyzw": ([0.0, 0.0, 0.0, 1.0], "camera_from_body rotation as a unit quaternion "
                                       "(qx, qy, qz, qw)", {"read_only": True}),
    "pose_time_offset_s": (0.0, "added to pose stamps to put them on the events' clock (s)",
                           {"float_range": (-100.0, 100.0), "read_only": True}),
    "pose_jump_back_s": (0.5, "a pose earlier than the last by more than this (s) restarts the trajectory "
                         "(a bag looping); smaller reorderings are dropped and counted", {"float_range": (0.0, 1e6)}),
    "pose_timeout_s": (1.0, "events waiting longer than this (s, wall time) for poses are reported "
                       "(poses missing, late or stopped)", {"float_range": (0.01, 1e6)}),
    "pose_history_s": (30.0, "poses kept behind the newest one (s), bounding memory", {"float_range": (1.0, 1e6)}),
    "max_held_events": (5_000_000, "bound on events held until poses cover them; beyond it the oldest are "
                        "dropped and counted", {"integer_range": (1000, 100_000_000)}),
    "max_pending_keyframes": (4, "keyframes queued for the estimator at most; beyond it the oldest are dropped "
                              "and counted", {"integer_range": (1, 1000)}),
    **RUNNER_PARAMETERS,
    "points_frame": ("world", "frame of depth/points: world (the poses' frame) or camera (the reference "
                     "camera frame)", {}),
    "camera_frame_id": ("", "frame of the reference camera (depth images, camera-frame clouds); empty = the "
                        "events' frame", {}),
    "world_frame_id": ("", "frame of world-frame clouds; empty = the poses' header frame", {}),
    "map_depth_tolerance": (MAP_DEPTH_TOLERANCE, "depth/map: a point is confirmed by another keyframe's point "
                            "within this share of its depth along the ray (and a pixel across it)",
                            {"float_range": (0.001, 1.0)}),
    "map_min_keyframes": (MAP_MIN_KEYFRAMES, "keyframes that must agree on a point (its own included) for it to "
                          "be in depth/map; 1 = every point", {"integer_range": (1, 64)}),
    "map_max_points": (MAP_MAX_POINTS, "bound on the points the fused map holds: beyond it the oldest "
                       "keyframes' points go first", {"integer_range": (1000, 100_000_000)}),
    "keyframe_flush_idle_s": (1.0, "when no events came for this long (s), the events collected since the "
                              "last keyframe (at least min_events) make one more keyframe, as at the end of "
                              "focus-ros depth; 0 = never", {"float_range": (0.0, 1e6)}),
}

_DEPTH = DepthSettings()
#: the depth estimator's and keyframe selector's parameters (defaults = focus-ros depth's)
DEPTH_PARAMETERS = {
    "loss": (_DEPTH.loss, "focus loss on the DSI patches (focus_ros.depth.focus.PATCH_LOSSES), or max_vote "
             "(EMVS's baseline: the most votes along the ray)", {}),
    "use_polarity": (_DEPTH.use_polarity, "votes carry the event polarity (+-1) instead of 1", {}),
    "planes": (_DEPTH.planes, "depth planes of the DSI, uniform in inverse depth (EMVS: 100)",
               {"integer_range": (2, 1000)}),
    "z_min_m": (_DEPTH.z_min_m, "nearest depth plane (m); with auto_depth_range the nearest the planes may go",
                {"float_range": (0.01, 1000.0)}),
    "z_max_m": (_DEPTH.z_max_m, "farthest depth plane (m); with auto_depth_range the farthest the planes may go",
                {"float_range": (0.01, 1000.0)}),
    "auto_depth_range": (_DEPTH.auto_depth_range, "planes over the depths the previous keyframe saw (with a "
                         "margin) instead of the whole z_min_m-z_max_m", {}),
    "patch_size_px": (_DEPTH.patch_size_px, "side of the focus patch, odd (px; the paper: 3)",
                      {"integer_range": (1, 31)}),
    "patch_sigma_px": (_DEPTH.patch_sigma_px, "Gaussian sigma of the patch weights (px)",
                       {"float_range": (0.1, 20.0)}),
    "threshold_block_px": (_DEPTH.threshold_block_px, "adaptive threshold window on the confidence, odd (px; "
                           "EMVS: 5)", {"integer_range": (3, 101)}),
    "threshold_offset": (_DEPTH.threshold_offset, "a pixel is kept when the rank (0-1) of its confidence "
                         "exceeds the local mean rank by this", {"float_range": (0.0, 1.0)}),
    "min_confidence_rank": (_DEPTH.min_confidence_rank, "lowest confidence rank kept among the observed pixels "
                            "(0-1; 0.8: at most the 20 % most confident)", {"float_range": (0.0, 1.0)}),
    "min_contrast": (_DEPTH.min_contrast, "lowest focus contrast kept, relative to the keyframe's median "
                     "(1 = a typical observed pixel); 0 = off", {"float_range": (0.0, 1000.0)}),
    "max_rival_ratio": (_DEPTH.max_rival_ratio, "highest contrast of a second focus peak along the ray, as a share of "
                        "the best; 1 = off", {"float_range": (0.0, 1.0)}),
    "border_planes": (_DEPTH.border_planes, "depths peaking within this many planes of the DSI's ends are dropped",
                      {"integer_range": (0, 100)}),
    "support_neighbours": (_DEPTH.support_neighbours, "radius outlier removal: kept pixels need this many kept "
                           "neighbours (within support_radius_px) at a depth within support_tolerance; 0 = off",
                           {"integer_range": (0, 100)}),
    "map_support_neighbours": (_DEPTH.map_support_neighbours, "the same rule for the points offered to depth/map "
                               "(looser: the map keeps only what another keyframe confirms); 0 = off",
                               {"integer_range": (0, 100)}),
    "support_radius_px": (_DEPTH.support_radius_px, "radius outlier removal window radius (px)",
                          {"integer_range": (1, 20)}),
    "support_tolerance": (_DEPTH.support_tolerance, "radius outlier removal depth tolerance (fraction of the depth)",
                          {"float_range": (0.0, 1.0)}),
    "median_filter_px": (_DEPTH.median_filter_px, "median filter on the kept depths, odd (px); 1 = none",
                         {"integer_range": (1, 51)}),
    "min_parallax_px": (_DEPTH.min_parallax_px, "keyframes with less parallax (px) get no depth (a camera at "
                        "rest or rotating only)", {"float_range": (0.0, 1000.0)}),
    "min_events": (_DEPTH.min_events, "keyframes with fewer events get no depth", {"integer_range": (1, 100_000_000)}),
    "dsi_max_events": (_DEPTH.dsi_max_events, "compute budget: a keyframe with more events votes with every k-th "
                       "(uniform in time) so that its time stays bounded; 0 = every event",
                       {"integer_range": (0, 100_000_000)}),
    "keyframe_events": (KEYFRAME_MAX_EVENTS, "most events per keyframe (a keyframe ends there whatever the "
                        "motion)", {"integer_range": (1000, 100_000_000)}),
    "keyframe_baseline_fraction": (KEYFRAME_BASELINE_FRACTION, "keyframes by parallax: a keyframe ends once the "
                                   "camera travelled this fraction of the scene depth (the median depth of the "
                                   "last keyframe); 0 = off", {"float_range": (0.0, 10.0)}),
    "keyframe_max_rotation_deg": (KEYFRAME_MAX_ROTATION_DEG, "a keyframe also ends once the camera turned this far "
                                  "(deg); 0 = off", {"float_range": (0.0, 360.0)}),
    "keyframe_baseline_m": (0.0, "> 0: a keyframe ends once the camera moved this far (m), instead of the "
                            "fraction of the scene depth", {"float_range": (0.0, 1000.0)}),
    "keyframe_merge_when_busy": (True, "a keyframe completed while the estimator is still on an earlier one waits "
                                 "and is joined by the next ones (up to keyframe_events): every event is used and "
                                 "the latency stays bounded when keyframes come faster than they are computed; "
                                 "false = each keyframe queued as cut (max_pending_keyframes, then dropped)", {}),
}
KEYFRAME_PARAMETERS = ("keyframe_events", "keyframe_baseline_fraction", "keyframe_max_rotation_deg",
                       "keyframe_baseline_m", "min_events", "z_min_m", "z_max_m")


class DepthNode(EstimatingNode):
    """Thin ROS wrapper around :class:`DepthEstimator` (see the module docstring)."""

    def __init__(self, **kwargs):
        super().__init__("depth_node", **kwargs)
        for name, (default, description, options) in {**PARAMETERS, **DEPTH_PARAMETERS}.items():
            self.declare_parameter(name, default, descriptor(description, **options))
        value = lambda name: self.get_parameter(name).value  # noqa: E731
        if value("points_frame") not in POINTS_FRAMES:
            raise ValueError(f"points_frame '{value('points_frame')}' is not one of: {', '.join(POINTS_FRAMES)}")
        self._settings = self._depth_settings()        # ValueError with the reason when unusable
        self._camera_from_body = self._camera_from_body_parameter()
        self._pose_class = depth_messages.pose_message_class(value("pose_message_type"))
        self._pose_topic = "pose" if value("pose_message_type") == "geometry_msgs/PoseStamped" else "odometry"

        self._lock = threading.Lock()
        self._trajectory = self._new_trajectory()
        self._world_frame = ""
        self._gate = PoseGate(value("max_held_events"))
        self._calibration: Calibration | None = None
        self._selector = self._new_selector()
        self._last_pose_received_s: float | None = None
        self._input_last_received_s = 0.0
        self._last_event_t_ns: int | None = None
        self._last_released_s: float | None = None
        self._stats = dict(poses_received=0, poses_out_of_order=0, poses_invalid=0, pose_restarts=0,
                           keyframes_published=0, keyframes_without_depth=0, last_points=0, map_points=0,
                           keyframes_offered=0, keyframes_done=0, keyframes_merged=0, latency_max_ms=float("nan"))
        self._latencies_ms: deque = deque(maxlen=LATENCIES_KEPT)  # the latest keyframes' latencies (ms)
        self._waiting: tuple[Events, float] | None = None  # a keyframe held while the estimator is busy
        self._waiting_since_s: float | None = None
        self._waiting_stride = 1  # the waiting keyframe holds every k-th event of the keyframes it joins
        self._map = FusedMap(value("map_depth_tolerance"), value("map_min_keyframes"), value("map_max_points"))
        self._drop_counts_before = {"received": 0, "before_first_pose": 0, "waiting_for_poses": 0}

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
            "depth", Calibration.davis240c(), self._settings, **self.runner_options(),
            on_result=self._publish, logger=self.get_logger(),
            warn_once=lambda key, text: self._input.warn_once(key, text), unit="keyframe",
            max_pending=lambda: self.get_parameter("max_pending_keyframes").value,
            images_wanted=lambda: self._outputs["image_color"].get_subscription_count() > 0,
            capacity_events=value("keyframe_events"), name="focus_ros_depth")
        self.create_subscription(self._pose_class, self._pose_topic, self._on_pose, POSE_QOS)
        self._input = EventInput(self, self._on_events, self._on_calibration, own_thread=True)  # off the executor
        self.add_on_set_parameters_callback(self._on_set_parameters)
        self.start_diagnostics(self._publish_diagnostics)
        self.create_steady_timer(0.1, self._flush_if_idle)  # the end of a bag with use_sim_time, no /clock
        self.get_logger().info(
            f"waiting for {self._input.message_type} on '{self._input.events_topic}' and "
            f"{value('pose_message_type')} on '{self.resolve_topic_name(self._pose_topic)}'; publishing "
            f"'{self.resolve_topic_name('depth/points')}' every {self._keyframe_description()}")

    # ----------------------------------------------------------------- parameters
    def _camera_from_body_parameter(self) -> np.ndarray | None:
        translation = np.asarray(self.get_parameter("camera_from_body.translation_m").value, float)
        rotation = np.asarray(self.get_parameter("camera_from_body.rotation_xyzw").value, float)
        if translation.shape != (3,) or rotation.shape != (4,):
            raise ValueError("camera_from_body needs translation_m [x, y, z] and rotation_xyzw [qx, qy, qz, qw]")
        if abs(np.linalg.norm(rotation) - 1.0) > 1e-3:
            raise ValueError(f"camera_from_body.rotation_xyzw is not a unit quaternion (norm "
                             f"{np.linalg.norm(rotation):.4g})")
        if not translation.any() and np.allclose(rotation, [0, 0, 0, 1]):
            return None
        return pose_matrix(quaternion_to_matrix(rotation / np.linalg.norm(rotation)), translation)

    def _depth_settings(self, overrides: dict | None = None) -> DepthSettings:
        """The estimator settings from the parameters (``overrides``: values about to be set);
        ValueError saying why they are unusable."""
        overrides = overrides or {}
        value = lambda name: overrides.get(name, self.get_parameter(name).value)  # noqa: E731
        loss = value("loss")
        if loss not in depth_method_names():
            raise ValueError(f"loss '{loss}' is not one of: {', '.join(depth_method_names())}")
        method = "max_vote" if loss == "max_vote" else "focus"
        return DepthSettings(
            loss=_DEPTH.loss if method == "max_vote" else loss, method=method, use_polarity=value("use_polarity"),
            planes=value("planes"), z_min_m=value("z_min_m"), z_max_m=value("z_max_m"),
            patch_size_px=value("patch_size_px"), patch_sigma_px=value("patch_sigma_px"),
            threshold_block_px=value("threshold_block_px"), threshold_offset=value("threshold_offset"),
            min_confidence_rank=value("min_confidence_rank"), median_filter_px=value("median_filter_px"),
            min_contrast=value("min_contrast"), max_rival_ratio=value("max_rival_ratio"),
            border_planes=value("border_planes"), support_neighbours=value("support_neighbours"),
            map_support_neighbours=value("map_support_neighbours"),
            support_radius_px=value("support_radius_px"), support_tolerance=value("support_tolerance"),
            auto_depth_range=value("auto_depth_range"), dsi_max_events=value("dsi_max_events"),
            min_parallax_px=value("min_parallax_px"), min_events=value("min_events"))

    def _new_selector(self, overrides: dict | None = None) -> KeyframeSelector:
        overrides = overrides or {}
        value = lambda name: overrides.get(name, self.get_parameter(name).value)  # noqa: E731
        rotation = value("keyframe_max_rotation_deg")
        fraction = None if value("keyframe_baseline_m") or not value("keyframe_baseline_fraction") \
            else value("keyframe_baseline_fraction")
        selector = KeyframeSelector(value("keyframe_events"), value("keyframe_baseline_m") or None,
                                    min_events=value("min_events"),
                                    max_rotation_rad=np.radians(rotation) if rotation > 0 else None,
                                    baseline_fraction=fraction)
        # until a keyframe has shown the scene: the geometric middle of the depths searched
        selector.set_scene_depth(math.sqrt(value("z_min_m") * value("z_max_m")))
        return selector

    def _keyframe_description(self) -> str:
        value = lambda name: self.get_parameter(name).value  # noqa: E731
        rules = [f"{value('keyframe_events')} events"]
        if value("keyframe_baseline_m"):
            rules.append(f"{value('keyframe_baseline_m')} m of travel")
        elif value("keyframe_baseline_fraction"):
            rules.append(f"travel of {value('keyframe_baseline_fraction')} x the scene depth")
        if value("keyframe_max_rotation_deg"):
            rules.append(f"{value('keyframe_max_rotation_deg')} deg of rotation")
        return " or ".join(rules)

    def _new_trajectory(self) -> Trajectory:
        offset_ns = int(round(self.get_parameter("pose_time_offset_s").value * NANOSECONDS_PER_SECOND))
        return Trajectory(camera_from_body=self._camera_from_body, time_offset_ns=offset_ns,
                          source=f"poses on '{self.resolve_topic_name(self._pose_topic)}'")

    def _on_set_parameters(self, parameters) -> SetParametersResult:
        values = {p.name: p.value for p in parameters}
        if "points_frame" in values and values["points_frame"] not in POINTS_FRAMES:
            return SetParametersResult(successful=False, reason=f"points_frame '{values['points_frame']}' is not "
                                       f"one of: {', '.join(POINTS_FRAMES)}")
        if any(name in DEPTH_PARAMETERS for name in values):
            try:
                settings = self._depth_settings(values)
                selector = self._new_selector(values)
            except ValueError as error:
                return SetParametersResult(successful=False, reason=str(error))
            with self._lock:
                self._settings = settings
                if self._calibration is not None:
                    self._runner.configure(self._calibration, settings)
                if any(name in KEYFRAME_PARAMETERS for name in values):
                    self._selector = selector
        return SetParametersResult(successful=True)

    # ----------------------------------------------------------------- input
    def _on_calibration(self, calibration, source: str) -> None:
        with self._lock:
            if self._calibration != calibration:
                self._calibration = calibration
                self._runner.configure(calibration, self._settings)

    def _on_pose(self, message) -> None:
        received_s = time.monotonic()
        t_ns, position, orientation, frame_id = depth_messages.pose_from_message(message)
        with self._lock:
            self._stats["poses_received"] += 1
            self._last_pose_received_s = received_s
            if frame_id:
                self._world_frame = frame_id
            last = self._trajectory.t_range_ns[1] if len(self._trajectory) else None
            t_events = t_ns + self._trajectory.time_offset_ns
            if last is not None and t_events < last - self.get_parameter("pose_jump_back_s").value * 1e9:
                self._stats["pose_restarts"] += 1
                self._input.warn_once("pose_jump_back", f"poses jumped back in time by "
                                      f"{(last - t_events) / 1e9:.3f} s: trajectory restarted")
                self._trajectory = self._new_trajectory()
                self._reset_keyframes()
            try:
                self._trajectory.append(t_ns, position, orientation)
            except PoseError as error:
                kind = "poses_out_of_order" if "out of order" in str(error) else "poses_invalid"
                self._stats[kind] += 1
                self._input.warn_once(kind, f"pose ignored: {error}")
                return
            if len(self._trajectory) % 1000 == 0:  # bound memory, keeping what held events need
                history_ns = int(self.get_parameter("pose_history_s").value * NANOSECONDS_PER_SECOND)
                oldest_held = self._gate.oldest_t_ns
                self._trajectory.discard_before(min(t_events - history_ns,
                                                    t_events if oldest_held is None else oldest_held))
            self._release_covered()

    def _on_events(self, batch: EventBatch) -> None:
        with self._lock:
            self._input_last_received_s = batch.received_s
            if len(batch.events):
                self._last_event_t_ns = int(batch.events.t[-1])
            if batch.restart:
                self._reset_keyframes()
            if self._gate.push(batch.events, batch.received_s):
                self._input.warn_once("held_overflow", f"more than {self._gate.max_events} events waiting for "
                                      "poses: the oldest are dropped (max_held_events)")
            self._release_covered()

    def _release_covered(self) -> None:
        """Pass the events the poses cover to the keyframe selector; queue complete keyframes (lock held)."""
        if self._calibration is None or not len(self._trajectory):
            return
        first, last = self._trajectory.t_range_ns
        dropped_before = self._gate.counts["events_dropped_before_first_pose"]
        for events, received_s in self._gate.release(first, last):
            self._last_released_s = received_s
            for keyframe_events in self._selector.push(events, self._trajectory):
                self._queue(keyframe_events, received_s)
        if self._gate.counts["events_dropped_before_first_pose"] > dropped_before:
            self._input.warn_once("before_first_pose", "events earlier than the first pose dropped "
                                  f"(first pose at {first / 1e9:.6f} s)")

    def _reset_keyframes(self) -> None:
        """Forget held and selected events (a restart of the stream or of the poses; lock held)."""
        self._gate.clear()
        self._waiting = self._waiting_since_s = None
        self._selector = self._new_selector()

    def _outstanding(self) -> int:
        """Keyframes handed to the estimator and not back yet (lock held)."""
        counts = self._runner.counts
        return self._stats["keyframes_offered"] - self._stats["keyframes_done"] - counts["dropped"] - \
            counts["lost"] - counts["failed"]

    def _queue(self, events: Events, received_s: float) -> None:
        """A completed keyframe: to the estimator now, or, with keyframe_merge_when_busy while the
        estimator is still on an earlier one, held and joined by the keyframes that complete
        meanwhile, so that the keyframe rate follows what the estimator can do: at most one keyframe
        computing and one waiting, whatever the event rate, so the latency stays within about two
        keyframes' computing time. A joined keyframe beyond keyframe_events events keeps every
        k-th event, uniformly in time (:func:`join_keyframes`; the estimator's compute budget,
        dsi_max_events, thins it further anyway) (lock held)."""
        if self._waiting is not None:
            (waiting, _), stride = self._waiting, self._waiting_stride
            events, self._waiting_stride = join_keyframes(waiting, stride, events,
                                                          self.get_parameter("keyframe_events").value)
            self._stats["keyframes_merged"] += 1
            self._waiting = None
        else:
            self._waiting_stride = 1
        if self.get_parameter("keyframe_merge_when_busy").value and self._estimator_busy():
            if self._waiting_since_s is None:
                self._waiting_since_s = time.monotonic()
            self._waiting = (events, received_s)
            return
        self._waiting_since_s = None
        self._push(events, received_s)

    def _estimator_busy(self) -> bool:
        """The estimator is on an earlier keyframe, so that a keyframe completed now waits and is
        joined by the next (lock held). Until its first keyframe is back it is starting, not slow
        (its process starts, and with an empty Numba cache it compiles for seconds, its first
        keyframe included): keyframes then queue as cut, up to max_pending_keyframes, and only
        beyond that are joined; joining them all would make one keyframe of the whole start-up."""
        outstanding = self._outstanding()
        if self._stats["keyframes_done"] == 0:
            return outstanding >= self.get_parameter("max_pending_keyframes").value
        return outstanding > 0

    def _push_waiting(self) -> None:
        """The held keyframe to the estimator once it is free, or after MERGE_WAIT_MAX_S whatever
        the count says (a result the runner discarded, e.g. after a reconfiguration; lock held)."""
        if self._waiting is not None and (not self._estimator_busy() or
                                          time.monotonic() - self._waiting_since_s > MERGE_WAIT_MAX_S):
            waiting, self._waiting, self._waiting_since_s = self._waiting, None, None
            self._push(*waiting)

    def _push(self, events: Events, received_s: float) -> None:
        """One keyframe to the estimator: its events, and the poses around them as a Trajectory of
        its own (so the estimator never reads the growing one), pickled beside the events; the
        reference time is the middle of the events' span, as for ``focus-ros depth`` (lock held)."""
        poses = trajectory_segment(self._trajectory, int(events.t[0]), int(events.t[-1]))
        dropped = self._runner.counts["dropped"]
        self._stats["keyframes_offered"] += 1
        self._runner.push(Job(events, extra=poses, received_s=received_s))
        if self._runner.counts["dropped"] > dropped:
            self._input.warn_once("keyframes_dropped", "keyframes arrive faster than they are computed: the "
                                  "oldest are dropped (max_pending_keyframes)")

    def _flush_if_idle(self) -> None:
        """Timer: after keyframe_flush_idle_s without events, the selector's leftover events
        make one more keyframe (the end of a bag, a camera that stopped)."""
        idle_s = self.get_parameter("keyframe_flush_idle_s").value
        with self._lock:
            self._push_waiting()
            if idle_s <= 0 or self._last_released_s is None or self._selector.buffered_events == 0:
                return
            if time.monotonic() - self._input_last_received_s < idle_s:
                return
            rest = self._selector.flush()
            if rest is not None:
                self._queue(rest, self._last_released_s)

    # ----------------------------------------------------------------- results
    def _publish(self, job: Job, result) -> None:
        """One keyframe's clouds and images, then the map (the runner's thread). The next keyframe
        goes to the estimator before the map is updated: the map's cost (it grows with the map)
        delays neither the keyframe's outputs nor the next keyframe."""
        keyframe = self._publish_keyframe(job, result)
        with self._lock:  # the worst time from a keyframe's last event received to its outputs published
            latency_ms = 1e3 * (time.monotonic() - job.received_s)
            if not self._stats["latency_max_ms"] >= latency_ms:  # NaN: none yet in this period
                self._stats["latency_max_ms"] = latency_ms
            self._latencies_ms.append(latency_ms)
            self._stats["keyframes_done"] += 1
            self._push_waiting()
        if keyframe is not None:
            self._publish_map(keyframe)

    def _publish_keyframe(self, job: Job, result):
        """The keyframe's cloud and images; returns the keyframe (None when it has no depth)."""
        keyframe = result.estimate
        if keyframe.warning:  # too few events, no parallax: said, not turned into noise
            with self._lock:
                self._stats["keyframes_without_depth"] += 1
            self._input.warn_once("no_depth:" + keyframe.warning.split(":")[0],
                                  f"no depth for the keyframe at {keyframe.t_ref_ns / 1e9:.6f} s: {keyframe.warning}")
            return None
        stamp = messages.time_from_ns(keyframe.t_ref_ns)
        camera_frame = self.get_parameter("camera_frame_id").value or self._input.frame_id or "event_camera"
        points = keyframe.points_world
        if self.get_parameter("points_frame").value == "world":
            frame = self.get_parameter("world_frame_id").value or self._world_frame or "world"
        else:  # X_camera = R^T (X_world - p)
            rotation, position = keyframe.world_from_camera[:3, :3], keyframe.world_from_camera[:3, 3]
            points, frame = ((points - position) @ rotation).astype(np.float32), camera_frame
        rows, columns = keyframe.pixels[:, 1], keyframe.pixels[:, 0]
        depths = keyframe.depth_m[rows, columns]
        self._outputs["points"].publish(depth_messages.point_cloud(
            points, keyframe.point_confidence, depths, stamp, frame))
        if len(depths):
            with self._lock:  # keyframes by parallax: the baseline follows the scene depth
                self._selector.set_scene_depth(float(np.median(depths)))
        self._outputs["image"].publish(depth_messages.float_image(keyframe.depth_m, stamp, camera_frame))
        self._outputs["confidence"].publish(depth_messages.float_image(keyframe.confidence, stamp,
                                                                          camera_frame))
        if result.images is not None:  # for people, only when watched: drawn where the estimator ran
            self._outputs["image_color"].publish(messages.rgb_image(result.images[0], stamp, camera_frame))
        with self._lock:
            self._stats["keyframes_published"] += 1
            self._stats["last_points"] = len(points)
        return keyframe

    def _publish_map(self, keyframe) -> None:
        """The keyframe's points into the fused map, and the map on depth/map (the runner's thread)."""
        self._map.add(keyframe.map_points_world, keyframe.world_from_camera, 1.0 / self._calibration.fx)
        map_points, map_support = self._map.points()
        world_frame = self.get_parameter("world_frame_id").value or self._world_frame or "world"
        self._outputs["map"].publish(depth_messages.point_cloud(
            map_points, map_support, np.full(len(map_points), np.nan, np.float32),
            messages.time_from_ns(keyframe.t_ref_ns), world_frame))
        with self._lock:
            self._stats["map_points"] = len(map_points)

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
            stats, latencies = dict(self._stats), list(self._latencies_ms)
        counts = self._runner.counts
        latency = (f"latency median {np.median(latencies):.0f} ms, worst {max(latencies):.0f} ms" if latencies
                   else "latency - (no keyframe done)")
        return (f"keyframes offered {stats['keyframes_offered']}, done {stats['keyframes_done']} (published "
                f"{stats['keyframes_published']}, without depth {stats['keyframes_without_depth']}), dropped "
                f"{counts['dropped']}, lost {counts['lost']}, failed {counts['failed']}, merged "
                f"{stats['keyframes_merged']}; {latency}")

    # ----------------------------------------------------------------- diagnostics
    def _pose_problem(self, now: float) -> str:
        """'' or what is wrong with the poses, judged from events waiting for them."""
        oldest = self._gate.oldest_received_s
        if oldest is None or now - oldest < self.get_parameter("pose_timeout_s").value:
            return ""
        if self._last_pose_received_s is None:
            return f"no poses on '{self.resolve_topic_name(self._pose_topic)}': events are held (bounded)"
        if now - self._last_pose_received_s > self.get_parameter("pose_timeout_s").value:
            return (f"poses stopped {now - self._last_pose_received_s:.1f} s ago: events are held (bounded) "
                    "until poses cover them")
        return (f"poses late: the newest pose is behind events that arrived {now - oldest:.1f} s ago "
                "(check pose_time_offset_s and the clocks)")

    def _drop_problem(self, received_total: int, gate_counts: dict) -> tuple[str, str] | None:
        """WARN / ERROR when most / all events received since the last report were dropped, with the cause."""
        now = {"received": received_total, "before_first_pose": gate_counts["events_dropped_before_first_pose"],
               "waiting_for_poses": gate_counts["events_dropped_waiting_for_poses"]}
        before, self._drop_counts_before = self._drop_counts_before, now
        dropped = {cause: now[cause] - before[cause] for cause in ("before_first_pose", "waiting_for_poses")}
        with self._lock:
            first_pose = self._trajectory.t_range_ns[0] if len(self._trajectory) else None
            newest = self._last_event_t_ns
        ahead = f" (the first pose is {(first_pose - newest) / 1e9:.3f} s after the newest event)" \
            if first_pose is not None and newest is not None and first_pose > newest else ""
        reasons = {"before_first_pose": f"events earlier than the first pose{ahead}: the poses are ahead of the "
                                        "events; check pose_time_offset_s and the clocks of both",
                   "waiting_for_poses": "no pose covers them within max_held_events: poses missing, behind the "
                                        "events or stopped; check the pose topic, pose_time_offset_s and the clocks"}
        return dropped_events_problem(now["received"] - before["received"], dropped, reasons)

    def _publish_diagnostics(self) -> None:
        now = time.monotonic()
        with self._lock:
            stats = dict(self._stats)
            self._stats["latency_max_ms"] = float("nan")  # the worst since the previous report
            pose_problem = self._pose_problem(now)
            held = self._gate.held_events
            gate_counts = dict(self._gate.counts)
        if pose_problem:
            self._input.warn_once("pose_problem:" + pose_problem.split(" ")[1], pose_problem)
        input_values = self._input.diagnostics()
        drop_problem = self._drop_problem(input_values["events_received"], gate_counts)
        problem = drop_problem if drop_problem and drop_problem[0] == "error" else \
            (("warn", pose_problem) if pose_problem else None) or drop_problem or self.health()
        status = messages.estimator_status(f"{self.get_name()}: depth", self._input.frame_id,
                                           input_values["calibration_source"] != "none", problem,
                                           "estimating depth")
        values = {
            **input_values,
            **self._runner.diagnostic_values(),
            "poses_received": stats["poses_received"],
            "poses_out_of_order": stats["poses_out_of_order"],
            "poses_invalid": stats["poses_invalid"],
            "pose_restarts": stats["pose_restarts"],
            "events_held_for_poses": held,
            **gate_counts,
            "keyframes_offered": stats["keyframes_offered"],
            "keyframes_merged": stats["keyframes_merged"],
            "keyframes_done": stats["keyframes_done"],
            "keyframes_published": stats["keyframes_published"],
            "keyframes_without_depth": stats["keyframes_without_depth"],
            "points_per_keyframe": stats["last_points"],
            "latency_max_ms": stats["latency_max_ms"],
            "map_points": stats["map_points"],
            "map_points_held": len(self._map),
        }
        self.publish_diagnostics(status, values)


def main(argv=None) -> int:
    """Entry point of ``ros2 run focus_ros depth_node``."""
    return run_node("depth_node", DepthNode, rclpy.spin, argv)


if __name__ == "__main__":
    sys.exit(main())
