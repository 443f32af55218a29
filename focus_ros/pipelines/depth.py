"""The depth task's loop, once: poses and events in, keyframes out to the estimator, each keyframe's
depth back into the fused map and into where the next keyframe ends.

    poses  ──► trajectory (streamed: restarts on a jump back, bounded history)
    events ──► pose gate (held until poses cover them) ──► keyframe selector (parallax, rotation,
               at most keyframe_events) ──► joining (while the estimator is busy) ──► KeyframeJob
    DepthKeyframe ──► scene depth (the selector's baseline), fused map, what to publish

:class:`DepthPipeline` serves both callers the same way:

- ``focus-ros depth`` hands it a whole sequence with its whole trajectory (no pose gate: every pose
  is known, and the estimator says which events it does not cover) and estimates each
  :class:`KeyframeJob` inline (:class:`~focus_ros.estimators.depth.DepthEstimator`) before
  feeding more;
- depth_node streams poses and events into it and estimates the jobs asynchronously in a worker
  process (:class:`~focus_ros.runtime.EstimatorRunner`): a job carries the poses around its events
  as a trajectory of its own, the result comes back later through :meth:`DepthPipeline.keyframe_done`,
  and keyframes completed meanwhile wait and are joined (:func:`join_keyframes`).

The pipeline holds no thread and no lock: the node calls it under its own lock (the map update
excepted, see :meth:`DepthPipeline.update_map`). Keyframes by parallax end when the camera has
travelled a fraction of the scene depth, the median depth of the last keyframe *back* from the
estimator; in the node that is the last one computed, so where parallax keyframes end depends on
the estimator's speed there (keyframes by event count do not).
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Callable

import numpy as np

from focus_ros.camera import Calibration
from focus_ros.depth.fusion import (MAP_DEPTH_TOLERANCE, MAP_MAX_POINTS, MAP_MAX_RELATIVE_SIGMA, MAP_MIN_KEYFRAMES,
                                   FusedMap)
from focus_ros.estimators.depth import DepthEstimator, DepthKeyframe, DepthSettings
from focus_ros.events import NANOSECONDS_PER_SECOND, Events
from focus_ros.poses import PoseError, Trajectory, pose_matrix, quaternion_to_matrix
from focus_ros.settings import setting

__all__ = ["KEYFRAME_BASELINE_FRACTION", "KEYFRAME_MAX_EVENTS", "KEYFRAME_MAX_ROTATION_DEG", "MERGE_WAIT_MAX_S",
           "DepthPipeline", "DepthPipelineSettings", "KeyframeJob", "KeyframeSelector", "PoseGate",
           "camera_from_body_matrix", "dropped_events_problem", "join_keyframes", "keyframe_rules_text",
           "keyframe_selector", "point_depths_m", "points_in_camera_frame", "trajectory_segment"]

#: keyframes by parallax (the defaults of focus-ros depth and depth_node): a keyframe ends when the
#: camera has travelled this fraction of the scene depth from where the keyframe began (chosen
#: from 0.05 and 0.1 on the simulated sequences: twice the keyframes, a denser merged cloud at
#: the same accuracy once keyframes must agree; EVALUATION.md, "Depth: selection rules") ...
KEYFRAME_BASELINE_FRACTION = 0.05
#: ... or turned this far (deg; the reference view's overlap with the current one shrinks), or
#: after this many events (the DSI's memory and the latency stay bounded, e.g. a camera at rest)
KEYFRAME_MAX_ROTATION_DEG = 15.0
KEYFRAME_MAX_EVENTS = 2_000_000
#: longest a keyframe waits for the estimator to be free before it is handed out anyway (s): a
#: result the runner discarded (e.g. after a reconfiguration) must not hold it forever
MERGE_WAIT_MAX_S = 10.0
#: share of the events received in a diagnostics period that, dropped, makes the status WARN / ERROR
DROPPED_WARN_SHARE = 0.5
DROPPED_ERROR_SHARE = 0.99


@dataclass(frozen=True)
class DepthPipelineSettings:
    """What happens between the depth estimates: where keyframes end and how they are joined, how
    their points are fused into the map, how streamed poses are taken. Keyframes by parallax
    follow the scene depth, so the baseline scales with what the camera sees; keyframe_events
    bounds a keyframe's memory and latency whatever the motion. The pose settings apply to
    streamed poses (depth_node); ``focus-ros depth`` reads a whole trajectory."""

    keyframe_events: int = setting(KEYFRAME_MAX_EVENTS, "most events per keyframe (a keyframe ends there whatever "
                                   "the motion)", unit="events", minimum=1000, maximum=100_000_000)
    keyframe_baseline_fraction: float = setting(KEYFRAME_BASELINE_FRACTION, "keyframes by parallax: a keyframe ends "
                                                "once the camera travelled this fraction of the scene depth (the "
                                                "median depth of the last keyframe); 0 = off", minimum=0.0,
                                                maximum=10.0)
    keyframe_max_rotation_deg: float = setting(KEYFRAME_MAX_ROTATION_DEG, "a keyframe also ends once the camera "
                                               "turned this far; 0 = off", unit="deg", minimum=0.0, maximum=360.0,
                                               option="--keyframe-max-rotation")
    keyframe_baseline_m: float = setting(0.0, "> 0: a keyframe ends once the camera moved this far, instead of the "
                                         "fraction of the scene depth; 0 = off", unit="m", minimum=0.0,
                                         maximum=1000.0, option="--keyframe-baseline")
    keyframe_merge_when_busy: bool = setting(True, "a keyframe completed while the estimator is still on an earlier "
                                             "one waits and is joined by the next ones (up to keyframe_events): "
                                             "every event is used and the latency stays bounded when keyframes "
                                             "come faster than they are computed; false = each keyframe queued as "
                                             "cut (max_pending_keyframes, then dropped)", option=None)
    map_depth_tolerance: float = setting(MAP_DEPTH_TOLERANCE, "the fused map keeps a point when another keyframe "
                                         "has one within this share of its depth along the ray (and a pixel across "
                                         "it)", minimum=0.001, maximum=1.0)
    map_min_keyframes: int = setting(MAP_MIN_KEYFRAMES, "keyframes that must agree on a point of the fused map, its "
                                     "own included; 1 = every point", unit="keyframes", minimum=1, maximum=64)
    map_max_relative_sigma: float = setting(MAP_MAX_RELATIVE_SIGMA, "the fused map publishes a point only when its "
                                            "depth sigma is at most this share of its depth (too little parallax, "
                                            "a flat focus peak: held, not published); 0 = every point", minimum=0.0,
                                            maximum=10.0)
    map_max_points: int = setting(MAP_MAX_POINTS, "bound on the points the fused map holds: beyond it the oldest "
                                  "keyframes' points go first", unit="points", minimum=1000, maximum=100_000_000,
                                  option=None)
    pose_time_offset_s: float = setting(0.0, "added to pose stamps to put them on the events' clock", unit="s",
                                        minimum=-100.0, maximum=100.0, option=None, read_only=True)
    pose_jump_back_s: float = setting(0.5, "a pose earlier than the last by more than this restarts the trajectory "
                                      "(a bag looping); smaller reorderings are dropped and counted", unit="s",
                                      minimum=0.0, maximum=1e6, option=None)
    pose_history_s: float = setting(30.0, "poses kept behind the newest one, bounding memory", unit="s",
                                    minimum=1.0, maximum=1e6, option=None)
    max_held_events: int = setting(5_000_000, "bound on events held until poses cover them; beyond it the oldest "
                                   "are dropped and counted", unit="events", minimum=1000, maximum=100_000_000,
                                   option=None)


# ============================================================================ keyframes


class KeyframeSelector:
    """Cuts an event stream into consecutive keyframes, for the node and the command line.

    every_events: a keyframe holds at most this many events; every_baseline_m: if given, a
    keyframe ends as soon as the camera has moved this far (m) from its position at the
    keyframe's first event; max_rotation_rad: if given, also as soon as it has turned this far
    (rad) from its orientation there (checks every ``baseline_check_events`` events);
    whichever comes first. Keyframes by parallax set every_baseline_m to a fraction of the
    scene depth (:meth:`set_scene_depth`). Memory: at most ``every_events`` buffered events.

    :meth:`push` takes the next events (and the trajectory, needed for the motion rules) and
    returns the completed keyframes' events; :meth:`flush` returns what is left (at least
    ``min_events``) at the end of a stream.
    """

    def __init__(self, every_events: int = KEYFRAME_MAX_EVENTS, every_baseline_m: float | None = None,
                 min_events: int = 1000, baseline_check_events: int = 1000, max_rotation_rad: float | None = None,
                 baseline_fraction: float | None = None):
        if every_events < 1:
            raise ValueError(f"keyframe every_events must be >= 1, got {every_events}")
        if every_baseline_m is not None and not (math.isfinite(every_baseline_m) and every_baseline_m > 0):
            raise ValueError(f"keyframe every_baseline_m must be > 0 m, got {every_baseline_m}")
        if max_rotation_rad is not None and not (math.isfinite(max_rotation_rad) and max_rotation_rad > 0):
            raise ValueError(f"keyframe max_rotation must be > 0 rad, got {max_rotation_rad}")
        if baseline_fraction is not None and not (math.isfinite(baseline_fraction) and baseline_fraction > 0):
            raise ValueError(f"keyframe baseline fraction must be > 0, got {baseline_fraction}")
        self.every_events = int(every_events)
        self.every_baseline_m = every_baseline_m
        self.max_rotation_rad = max_rotation_rad
        self.baseline_fraction = baseline_fraction
        self.min_events = int(min_events)
        self.baseline_check_events = int(baseline_check_events)
        self._chunks: list[Events] = []
        self._chunk_starts: list[int] = []
        self._buffered = 0
        self._reset_baseline()

    @classmethod
    def by_parallax(cls, scene_depth_m: float, baseline_fraction: float = KEYFRAME_BASELINE_FRACTION,
                    max_rotation_deg: float = KEYFRAME_MAX_ROTATION_DEG, max_events: int = KEYFRAME_MAX_EVENTS,
                    min_events: int = 1000) -> "KeyframeSelector":
        """Keyframes by parallax: baseline_fraction x the scene depth (m; updated with
        :meth:`set_scene_depth` as keyframes come), max_rotation_deg, at most max_events."""
        if not (math.isfinite(scene_depth_m) and scene_depth_m > 0):
            raise ValueError(f"scene depth must be > 0 m, got {scene_depth_m}")
        return cls(max_events, baseline_fraction * scene_depth_m, min_events,
                   max_rotation_rad=math.radians(max_rotation_deg), baseline_fraction=baseline_fraction)

    def set_scene_depth(self, depth_m: float) -> None:
        """Keyframes by parallax: the baseline becomes baseline_fraction x depth_m (m) from the
        next check on (e.g. the median depth of the last keyframe); ignored otherwise."""
        if self.baseline_fraction is not None and math.isfinite(depth_m) and depth_m > 0:
            self.every_baseline_m = self.baseline_fraction * float(depth_m)

    def _reset_baseline(self) -> None:
        self._next_sample = 0          # next event index (in the keyframe) to check for baseline
        self._start_position = None    # camera position at the keyframe's first event (m)
        self._start_rotation = None    # camera orientation there (world_from_camera 3x3)
        self._start_uncovered = False  # no pose at the first event: only the event rule applies

    @property
    def buffered_events(self) -> int:
        return self._buffered

    @property
    def uses_motion(self) -> bool:
        return self.every_baseline_m is not None or self.max_rotation_rad is not None

    def push(self, events: Events, trajectory: Trajectory | None = None) -> list[Events]:
        """Buffer ``events`` (time order); return the keyframes they complete. Each push
        costs the new events' motion samples, not the whole buffer (fine for 1-ms messages)."""
        if self.uses_motion and trajectory is None:
            raise ValueError("keyframes by baseline or rotation: the selector needs the trajectory")
        completed = []
        if len(events):
            self._chunk_starts.append(self._buffered)
            self._chunks.append(events)
            self._buffered += len(events)
        while self._buffered:
            end = self._keyframe_end(trajectory)
            if end is None:
                break
            buffered = Events.concatenate(self._chunks)
            completed.append(buffered[:end])
            rest = buffered[end:]
            self._chunks = [rest] if len(rest) else []
            self._chunk_starts = [0] if len(rest) else []
            self._buffered = len(rest)
            self._reset_baseline()
        return completed

    def flush(self) -> Events | None:
        """The events left over at the end of a stream (None if fewer than min_events)."""
        rest = Events.concatenate(self._chunks)
        self._chunks, self._chunk_starts, self._buffered = [], [], 0
        self._reset_baseline()
        return rest if len(rest) >= self.min_events else None

    def _times_at(self, indices: np.ndarray) -> np.ndarray:
        """Times (ns) of the buffered events at ``indices`` (keyframe order), without joining chunks."""
        starts = np.asarray(self._chunk_starts)
        which = np.searchsorted(starts, indices, side="right") - 1
        times = np.empty(len(indices), np.int64)
        for chunk in np.unique(which):
            selected = which == chunk
            times[selected] = self._chunks[chunk].t[indices[selected] - starts[chunk]]
        return times

    def _moved(self, rotations: np.ndarray, positions: np.ndarray) -> np.ndarray:
        """Per sample: has the camera moved or turned beyond the rules since the keyframe began?"""
        moved = np.zeros(len(positions), bool)
        if self.every_baseline_m is not None:
            moved |= np.linalg.norm(positions - self._start_position, axis=1) >= self.every_baseline_m
        if self.max_rotation_rad is not None:
            relative = np.einsum("ji,njk->nik", self._start_rotation, rotations)
            cosine = np.clip((np.trace(relative, axis1=1, axis2=2) - 1.0) / 2.0, -1.0, 1.0)
            moved |= np.arccos(cosine) >= self.max_rotation_rad
        return moved

    def _keyframe_end(self, trajectory: Trajectory | None) -> int | None:
        """Index one past the keyframe's last event, or None when it is not complete yet."""
        limit = min(self._buffered, self.every_events)
        if self.uses_motion and trajectory is not None and len(trajectory) \
                and not self._start_uncovered and self._next_sample < limit:
            first_pose, last_pose = trajectory.t_range_ns
            samples = np.arange(self._next_sample, limit, self.baseline_check_events)
            times = self._times_at(samples)
            if self._start_position is None:
                t_first = int(self._times_at(np.array([0]))[0])
                if not first_pose <= t_first <= last_pose:
                    if t_first < first_pose:  # poses will not come back in time
                        self._start_uncovered = True
                    times = times[:0]
                else:
                    rotations, positions = trajectory.interpolate([t_first])
                    self._start_rotation, self._start_position = rotations[0], positions[0]
            # samples beyond the last pose wait for more poses (a stream's poses may lag)
            covered = int(np.searchsorted(times, last_pose, side="right")) if len(times) else 0
            if covered:
                moved = self._moved(*trajectory.interpolate(times[:covered]))
                if moved.any():
                    return max(int(samples[int(np.argmax(moved))]), 1)
                self._next_sample = int(samples[covered - 1]) + self.baseline_check_events
        return self.every_events if self._buffered >= self.every_events else None


def keyframe_selector(settings: DepthPipelineSettings, depth: DepthSettings) -> KeyframeSelector:
    """The keyframe rules of the settings: by parallax (default), by a fixed baseline
    (keyframe_baseline_m > 0), by rotation, at most keyframe_events; until a keyframe has shown the
    scene, its depth is taken as the geometric middle of the depths searched."""
    rotation_deg = settings.keyframe_max_rotation_deg
    fraction = settings.keyframe_baseline_fraction
    selector = KeyframeSelector(settings.keyframe_events, settings.keyframe_baseline_m or None,
                                min_events=depth.min_events,
                                max_rotation_rad=math.radians(rotation_deg) if rotation_deg > 0 else None,
                                baseline_fraction=fraction if fraction and not settings.keyframe_baseline_m else None)
    selector.set_scene_depth(math.sqrt(depth.z_min_m * depth.z_max_m))
    return selector


def _selector_rules(settings: DepthPipelineSettings, depth: DepthSettings) -> tuple:
    """What :func:`keyframe_selector` depends on (a change makes a new selector)."""
    return (settings.keyframe_events, settings.keyframe_baseline_fraction, settings.keyframe_max_rotation_deg,
            settings.keyframe_baseline_m, depth.min_events, depth.z_min_m, depth.z_max_m)


def keyframe_rules_text(settings: DepthPipelineSettings) -> str:
    """Where a keyframe ends, in words: '2000000 events or travel of 0.05 x the scene depth or 15.0 deg of rotation'."""
    rules = [f"{settings.keyframe_events} events"]
    if settings.keyframe_baseline_m:
        rules.append(f"{settings.keyframe_baseline_m} m of travel")
    elif settings.keyframe_baseline_fraction:
        rules.append(f"travel of {settings.keyframe_baseline_fraction} x the scene depth")
    if settings.keyframe_max_rotation_deg:
        rules.append(f"{settings.keyframe_max_rotation_deg} deg of rotation")
    return " or ".join(rules)


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


# ============================================================================ poses


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
        """Hold one batch (an empty one is not held); returns the number of events dropped to stay
        within the bound."""
        if not len(events):
            return 0
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


def trajectory_segment(trajectory: Trajectory, t_first_ns: int, t_last_ns: int) -> Trajectory:
    """A copy of the camera poses that bracket [t_first_ns, t_last_ns] (events' clock), as a
    Trajectory of its own (already camera poses on the events' clock: no transform, no offset)."""
    t = trajectory.t_ns
    first = max(int(np.searchsorted(t, t_first_ns, side="right")) - 1, 0)
    last = min(int(np.searchsorted(t, t_last_ns, side="left")) + 1, len(t))
    return Trajectory(t[first:last].copy(), trajectory.position_m[first:last].copy(),
                      trajectory.orientation_xyzw[first:last].copy(), source=trajectory.source)


def camera_from_body_matrix(translation_m, rotation_xyzw) -> np.ndarray | None:
    """The 4x4 camera-from-body transform (m) of a translation (body origin in camera
    coordinates, m) and a unit quaternion (qx, qy, qz, qw); None for the identity (the poses are
    the camera's). ValueError when the shapes are wrong or the quaternion is not a unit one."""
    translation, rotation = np.asarray(translation_m, float), np.asarray(rotation_xyzw, float)
    if translation.shape != (3,) or rotation.shape != (4,):
        raise ValueError("camera_from_body needs translation_m [x, y, z] and rotation_xyzw [qx, qy, qz, qw]")
    if abs(np.linalg.norm(rotation) - 1.0) > 1e-3:
        raise ValueError(f"camera_from_body.rotation_xyzw is not a unit quaternion (norm "
                         f"{np.linalg.norm(rotation):.4g})")
    if not translation.any() and np.allclose(rotation, [0, 0, 0, 1]):
        return None
    return pose_matrix(quaternion_to_matrix(rotation / np.linalg.norm(rotation)), translation)


def dropped_events_problem(received: int, dropped: dict, reasons: dict) -> tuple[str, str] | None:
    """("warn" | "error", why) when most (>= DROPPED_WARN_SHARE) or all (>= DROPPED_ERROR_SHARE) of
    the ``received`` events of a period were dropped; ``dropped``: events dropped per cause,
    ``reasons``: cause -> what it means and what fixes it. None when the input is used."""
    total = sum(dropped.values())
    if received <= 0 or total < DROPPED_WARN_SHARE * received:
        return None
    cause = max(dropped, key=dropped.get)
    level = "error" if total >= DROPPED_ERROR_SHARE * received else "warn"
    share = "all" if level == "error" else f"{100 * min(total / received, 1.0):.0f} %"
    return level, f"dropping {share} of the events ({total} of {received} in the last period): {reasons[cause]}"


# ============================================================================ results


def point_depths_m(keyframe: DepthKeyframe) -> np.ndarray:
    """Each point's depth (m along the reference camera's optical axis), in the points' order."""
    return keyframe.depth_m[keyframe.pixels[:, 1], keyframe.pixels[:, 0]]


def points_in_camera_frame(keyframe: DepthKeyframe) -> np.ndarray:
    """The keyframe's points (float32 m) in its reference camera's frame: X_camera = R^T (X_world - p)."""
    rotation, position = keyframe.world_from_camera[:3, :3], keyframe.world_from_camera[:3, 3]
    return ((keyframe.points_world - position) @ rotation).astype(np.float32)


# ============================================================================ the loop


@dataclass
class KeyframeJob:
    """One keyframe for the estimator: its events, the camera poses around them as a trajectory of
    their own (so a worker never reads the growing one) and when its last events were received
    (time.monotonic() s, for the latency; 0 offline). The reference time is the middle of the events'
    span."""

    events: Events
    poses: Trajectory
    received_s: float


class DepthPipeline:
    """The depth loop (module docstring) from poses and events to keyframe jobs, and from each
    keyframe's depth to the map and the next keyframe.

    settings, depth: the pipeline's and the estimator's settings; calibration: the camera's (events
    wait for it; None until the node has one). trajectory: the whole trajectory of an offline
    sequence (events then go straight to the keyframe selector), or None when poses come with
    :meth:`add_pose` (events then wait in a :class:`PoseGate`; camera_from_body, pose_source: the
    streamed trajectory's transform and name). unreturned(), max_pending(): for an estimator that
    works asynchronously, the jobs it will not hand back (dropped, lost, failed) and how many may
    wait for it; without them every job is taken to be estimated before the next is fed;
    estimator_ready(): whether it has started (warmed up), see :meth:`_estimator_busy`.
    warn_once(key, text): where once-only warnings go. ``counts``: what became of poses and keyframes.
    """

    def __init__(self, settings: DepthPipelineSettings, depth: DepthSettings, *, calibration: Calibration | None = None,
                 trajectory: Trajectory | None = None, camera_from_body: np.ndarray | None = None,
                 pose_source: str = "poses", unreturned: Callable[[], int] | None = None,
                 max_pending: Callable[[], int] | None = None,
                 estimator_ready: Callable[[], bool] = lambda: False,
                 warn_once: Callable[[str, str], None] = lambda key, text: None):
        self.settings, self.depth, self.calibration = settings, depth, calibration
        self.streamed_poses = trajectory is None
        self._camera_from_body, self._pose_source = camera_from_body, pose_source
        self.trajectory = self._new_trajectory() if trajectory is None else trajectory
        self.gate = PoseGate(settings.max_held_events)
        self.selector = keyframe_selector(settings, depth)
        self.map = FusedMap(settings.map_depth_tolerance, settings.map_min_keyframes, settings.map_max_points,
                            settings.map_max_relative_sigma)
        self._unreturned, self._max_pending, self._warn_once = unreturned, max_pending, warn_once
        self._estimator_ready = estimator_ready
        self.counts = dict(pose_restarts=0, poses_out_of_order=0, poses_invalid=0, keyframes_offered=0,
                           keyframes_merged=0, keyframes_done=0, keyframes_published=0, keyframes_without_depth=0,
                           last_points=0, map_points=0, pose_timeouts=0)
        self._pose_problem_before = ""
        self.last_pose_received_s: float | None = None
        self.last_events_received_s = 0.0
        self.last_released_s: float | None = None
        self.last_event_t_ns: int | None = None
        self._waiting: tuple[Events, float] | None = None  # a keyframe held while the estimator is busy
        self._waiting_since_s: float | None = None
        self._waiting_stride = 1  # the waiting keyframe holds every k-th event of the keyframes it joins
        self._drop_counts_before = {"received": 0, "before_first_pose": 0, "waiting_for_poses": 0}

    # ----------------------------------------------------------------- configuration
    def reconfigure(self, settings: DepthPipelineSettings, depth: DepthSettings) -> None:
        """New settings: a new keyframe selector when its rules changed (the events it buffered are
        dropped); the pose gate and the map keep the bounds they were made with, the map takes the
        new bound on its points' sigma."""
        if _selector_rules(settings, depth) != _selector_rules(self.settings, self.depth):
            self.selector = keyframe_selector(settings, depth)
        self.settings, self.depth = settings, depth
        self.map.max_relative_sigma = settings.map_max_relative_sigma

    def set_calibration(self, calibration: Calibration) -> None:
        """The camera's calibration: events held until now may go on."""
        self.calibration = calibration

    def set_pose_source(self, pose_source: str, camera_from_body: np.ndarray | None) -> None:
        """Streamed poses come from elsewhere from now on (``pose_source``: its name in errors;
        ``camera_from_body``: their body-to-camera transform, None = they are the camera's): the
        poses so far are forgotten."""
        self._camera_from_body, self._pose_source = camera_from_body, pose_source
        self.trajectory = self._new_trajectory()

    def _new_trajectory(self) -> Trajectory:
        offset_ns = int(round(self.settings.pose_time_offset_s * NANOSECONDS_PER_SECOND))
        return Trajectory(camera_from_body=self._camera_from_body, time_offset_ns=offset_ns, source=self._pose_source)

    def reset_keyframes(self) -> None:
        """Forget held and selected events (a restart of the stream or of the poses)."""
        self.gate.clear()
        self._waiting = self._waiting_since_s = None
        self.selector = keyframe_selector(self.settings, self.depth)

    # ----------------------------------------------------------------- input
    def add_pose(self, t_ns: int, position_m, orientation_xyzw, received_s: float = 0.0) -> list[KeyframeJob]:
        """One streamed pose (pose clock, ns; m; qx qy qz qw): a jump back in time restarts the
        trajectory, a pose out of order or invalid is dropped (counted, warned once); returns the
        keyframes the events it covers complete."""
        self.last_pose_received_s = received_s
        last = self.trajectory.t_range_ns[1] if len(self.trajectory) else None
        t_events = t_ns + self.trajectory.time_offset_ns
        if last is not None and t_events < last - self.settings.pose_jump_back_s * NANOSECONDS_PER_SECOND:
            self.counts["pose_restarts"] += 1
            self._warn_once("pose_jump_back", f"poses jumped back in time by {(last - t_events) / 1e9:.3f} s: "
                            "trajectory restarted")
            self.trajectory = self._new_trajectory()
            self.reset_keyframes()
        try:
            self.trajectory.append(t_ns, position_m, orientation_xyzw)
        except PoseError as error:
            kind = "poses_out_of_order" if "out of order" in str(error) else "poses_invalid"
            self.counts[kind] += 1
            self._warn_once(kind, f"pose ignored: {error}")
            return []
        if len(self.trajectory) % 1000 == 0:  # bound memory, keeping what held events need
            history_ns = int(self.settings.pose_history_s * NANOSECONDS_PER_SECOND)
            oldest_held = self.gate.oldest_t_ns
            self.trajectory.discard_before(min(t_events - history_ns, t_events if oldest_held is None else oldest_held))
        return self._release_covered()

    def add_events(self, events: Events, received_s: float = 0.0, restart: bool = False) -> list[KeyframeJob]:
        """The next events (time order; ``restart``: the stream started again, forget what was
        held); returns the keyframe jobs they complete."""
        self.last_events_received_s = received_s
        if len(events):
            self.last_event_t_ns = int(events.t[-1])
        if restart:
            self.reset_keyframes()
        if not self.streamed_poses:
            return self._cut([(events, received_s)])
        if self.gate.push(events, received_s):
            self._warn_once("held_overflow", f"more than {self.gate.max_events} events waiting for poses: the "
                            "oldest are dropped (max_held_events)")
        return self._release_covered()

    def flush(self) -> list[KeyframeJob]:
        """The events left since the last keyframe (at least min_events) as one more keyframe: the
        end of a sequence."""
        rest = self.selector.flush()
        return [] if rest is None else self._queue(rest, self.last_released_s or 0.0)

    def flush_if_idle(self, idle_s: float, now_s: float) -> list[KeyframeJob]:
        """The waiting keyframe once the estimator is free; and after ``idle_s`` (s; 0 = never)
        without events, the events left since the last keyframe as one more keyframe (the end of
        a bag, a camera that stopped). ``now_s``: time.monotonic()."""
        jobs = self.take_waiting()
        if idle_s <= 0 or self.last_released_s is None or self.selector.buffered_events == 0:
            return jobs
        if now_s - self.last_events_received_s < idle_s:
            return jobs
        return jobs + self.flush()

    def _release_covered(self) -> list[KeyframeJob]:
        """The held events the poses cover, through the keyframe selector."""
        if self.calibration is None or not len(self.trajectory):
            return []
        first, last = self.trajectory.t_range_ns
        dropped_before = self.gate.counts["events_dropped_before_first_pose"]
        jobs = self._cut(self.gate.release(first, last))
        if self.gate.counts["events_dropped_before_first_pose"] > dropped_before:
            self._warn_once("before_first_pose", f"events earlier than the first pose dropped (first pose at "
                            f"{first / 1e9:.6f} s)")
        return jobs

    def _cut(self, batches: list[tuple[Events, float]]) -> list[KeyframeJob]:
        jobs = []
        for events, received_s in batches:
            self.last_released_s = received_s
            for keyframe_events in self.selector.push(events, self.trajectory):
                jobs += self._queue(keyframe_events, received_s)
        return jobs

    # ----------------------------------------------------------------- the estimator's load
    def _queue(self, events: Events, received_s: float) -> list[KeyframeJob]:
        """A completed keyframe: a job now, or, with keyframe_merge_when_busy while the estimator
        is still on an earlier one, held and joined by the keyframes that complete meanwhile, so
        that the keyframe rate follows what the estimator can do: at most one keyframe computing
        and one waiting, whatever the event rate, so the latency stays within about two
        keyframes' computing time. A joined keyframe beyond keyframe_events events keeps every
        k-th event, uniformly in time (:func:`join_keyframes`; the estimator's compute budget,
        dsi_max_events, thins it further anyway)."""
        if self._waiting is not None:
            (waiting, _), stride = self._waiting, self._waiting_stride
            events, self._waiting_stride = join_keyframes(waiting, stride, events, self.settings.keyframe_events)
            self.counts["keyframes_merged"] += 1
            self._waiting = None
        else:
            self._waiting_stride = 1
        if self.settings.keyframe_merge_when_busy and self._estimator_busy():
            if self._waiting_since_s is None:
                self._waiting_since_s = time.monotonic()
            self._waiting = (events, received_s)
            return []
        self._waiting_since_s = None
        return [self._job(events, received_s)]

    def _estimator_busy(self) -> bool:
        """The estimator is on an earlier keyframe, so that a keyframe completed now waits and is
        joined by the next. Until its first keyframe is back it is starting, not slow (its process
        starts, and with an empty Numba cache it compiles for seconds, its first keyframe
        included): keyframes then queue as cut, up to max_pending(), and only beyond that are
        joined; joining them all would make one keyframe of the whole start-up. An estimator that
        is running already (warmed up: ``estimator_ready()``) is not starting: its first keyframe
        is joined like any other (queueing them then put seconds of backlog before every later
        keyframe at 3 Mev/s on a DAVIS346)."""
        if self._unreturned is None:  # estimated inline, each before the next is fed
            return False
        outstanding = self.counts["keyframes_offered"] - self.counts["keyframes_done"] - self._unreturned()
        if self.counts["keyframes_done"] == 0 and not self._estimator_ready():
            return outstanding >= self._max_pending()
        return outstanding > 0

    def take_waiting(self) -> list[KeyframeJob]:
        """The held keyframe as a job once the estimator is free, or after MERGE_WAIT_MAX_S whatever
        the count says (a result the runner discarded, e.g. after a reconfiguration)."""
        if self._waiting is not None and (not self._estimator_busy() or
                                          time.monotonic() - self._waiting_since_s > MERGE_WAIT_MAX_S):
            (events, received_s), self._waiting, self._waiting_since_s = self._waiting, None, None
            return [self._job(events, received_s)]
        return []

    def _job(self, events: Events, received_s: float) -> KeyframeJob:
        self.counts["keyframes_offered"] += 1
        return KeyframeJob(events, trajectory_segment(self.trajectory, int(events.t[0]), int(events.t[-1])),
                           received_s)

    # ----------------------------------------------------------------- results
    def keyframe_done(self, keyframe: DepthKeyframe) -> np.ndarray | None:
        """A keyframe's depth is back: its median depth becomes the scene depth the next keyframes
        end by (keyframes by parallax). Returns each point's depth (m along the optical axis), or
        None when the keyframe has no depth (its warning says why: too few events, no parallax)."""
        self.counts["keyframes_done"] += 1
        if keyframe.warning:
            self.counts["keyframes_without_depth"] += 1
            return None
        depths = point_depths_m(keyframe)
        if len(depths):
            self.selector.set_scene_depth(float(np.median(depths)))
        self.counts["keyframes_published"] += 1
        self.counts["last_points"] = len(depths)
        return depths

    def update_map(self, keyframe: DepthKeyframe, with_sigma: bool = False) -> tuple[np.ndarray, ...]:
        """The keyframe's points offered to the fused map (a keyframe with depth; its cost grows
        with the map, so a node calls it outside its lock, after the next keyframe is on its way:
        nothing else touches the map). Returns the map as it stands: (points (N, 3) float32 m, how
        many keyframes agree on each (N,) float32), and with ``with_sigma`` their depth standard
        deviations (N,) float32 m (FusedMap.points)."""
        self.map.add(keyframe.map_points_world, keyframe.world_from_camera, 1.0 / self.calibration.fx,
                     keyframe.map_point_sigma_m)
        published = self.map.points(with_sigma)
        self.counts["map_points"] = len(published[0])
        return published

    # ----------------------------------------------------------------- problems
    def pose_problem(self, now_s: float, timeout_s: float, pose_source: str, why: str = "") -> str:
        """'' or what is wrong with the poses, judged from events waiting for them longer than
        timeout_s (s, wall time; now_s: time.monotonic()). pose_source: where poses come from, for
        the text ("'/optitrack/davis'", "TF"); why: what that source says is missing (a TF lookup's
        error). Each time a problem starts, after none or another one (no poses, poses stopped,
        poses late), ``counts['pose_timeouts']`` counts it."""
        problem = self._pose_problem(now_s, timeout_s, pose_source, f" ({why})" if why else "")
        kind = " ".join(problem.split(" ")[:2])  # "no poses", "poses stopped", "poses late:" or ""
        if kind and kind != self._pose_problem_before:
            self.counts["pose_timeouts"] += 1
        self._pose_problem_before = kind
        return problem

    def _pose_problem(self, now_s: float, timeout_s: float, pose_source: str, why: str) -> str:
        oldest = self.gate.oldest_received_s
        if oldest is None or now_s - oldest < timeout_s:
            return ""
        if self.last_pose_received_s is None:
            return f"no poses on {pose_source}{why}: events are held (bounded)"
        if now_s - self.last_pose_received_s > timeout_s:
            return (f"poses stopped {now_s - self.last_pose_received_s:.1f} s ago{why}: events are held (bounded) "
                    "until poses cover them")
        return (f"poses late: the newest pose is behind events that arrived {now_s - oldest:.1f} s ago{why} "
                "(check pose_time_offset_s and the clocks)")

    def drop_problem(self, events_received: int) -> tuple[str, str] | None:
        """WARN / ERROR when most / all events received since the previous call were dropped
        (:func:`dropped_events_problem`), with the cause; ``events_received``: the total so far."""
        counts = self.gate.counts
        now = {"received": events_received, "before_first_pose": counts["events_dropped_before_first_pose"],
               "waiting_for_poses": counts["events_dropped_waiting_for_poses"]}
        before, self._drop_counts_before = self._drop_counts_before, now
        dropped = {cause: now[cause] - before[cause] for cause in ("before_first_pose", "waiting_for_poses")}
        first_pose = self.trajectory.t_range_ns[0] if len(self.trajectory) else None
        newest = self.last_event_t_ns
        ahead = f" (the first pose is {(first_pose - newest) / 1e9:.3f} s after the newest event)" \
            if first_pose is not None and newest is not None and first_pose > newest else ""
        reasons = {"before_first_pose": f"events earlier than the first pose{ahead}: the poses are ahead of the "
                                        "events; check pose_time_offset_s and the clocks of both",
                   "waiting_for_poses": "no pose covers them within max_held_events: poses missing, behind the "
                                        "events or stopped; check the pose topic, pose_time_offset_s and the clocks"}
        return dropped_events_problem(now["received"] - before["received"], dropped, reasons)


def offline_keyframes(pipeline: DepthPipeline, estimator: DepthEstimator, trajectory: Trajectory,
                      chunks: Iterable[Events]) -> Iterator[DepthKeyframe]:
    """`focus-ros depth`'s loop (and the depth set's evaluation's), the estimator in this thread:
    the events (chunks of Events, in time order) through the pipeline, each keyframe estimated as
    it is cut (inline, before the next is cut: the next keyframe's depth range follows it), fed
    back, its depth added to the map; yields the keyframes (stop early by leaving the loop)."""
    def estimated(jobs):
        for job in jobs:
            keyframe = estimator.estimate(job.events, trajectory)
            if pipeline.keyframe_done(keyframe) is not None:
                pipeline.update_map(keyframe)
            yield keyframe

    for chunk in chunks:
        yield from estimated(pipeline.add_events(chunk))
    yield from estimated(pipeline.flush())
