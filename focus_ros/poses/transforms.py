"""Transforms between named frames over time, kept as tf2 keeps them: a buffer of the TF tree.

A robot publishes its frames as a tree (REP-105): ``map -> odom -> base_link -> camera_link ->
camera_optical_frame``. Each edge is the pose of a child frame in its parent frame, stamped:
dynamic edges (odometry, VIO) arrive on ``/tf`` at their rate, static ones (how the camera is
mounted) once on ``/tf_static`` and hold at every time. :class:`TransformBuffer` keeps the edges
and answers :meth:`TransformBuffer.lookup`: the transform between two frames at a time, composed
along the tree through their nearest common ancestor, each dynamic edge interpolated between its
two stamps around that time (linear in translation, slerp in rotation, as tf2's BufferCore does).
It never extrapolates: a time beyond an edge's stamps by more than ``extrapolation_tolerance_ns``
is an :class:`ExtrapolationError` that says whether to wait (the time is ahead of the newest
stamp) or give up (behind the oldest).

:class:`CameraPoses` turns the tree into the stream of camera poses the depth pipeline takes
(``world_from_camera`` at the stamps of the dynamic edges between the two frames), for the node
(``/tf`` messages as they come) and for ``focus-ros depth`` (a bag's ``/tf`` and ``/tf_static``).

Conventions are tf2's: a :class:`StampedTransform` of ``child`` in ``parent`` maps child
coordinates to parent coordinates (``X_parent = R · X_child + t``, t in m, R as a unit quaternion
qx qy qz qw); ``lookup(target, source, t)`` gives ``target_from_source``; frame names lose a leading
'/'; times are int64 ns.

Why a buffer of our own: tf2 (tf2_py, tf2_ros) has no wheel for the PyPI route this package runs
on, and the nodes use this buffer in a ROS install too, so that lookups behave the same
everywhere and are tested where they run (the messages are tf2's own, tf2_msgs/TFMessage, so any
tf2 publisher feeds it). pytransform3d's TemporalTransformManager was the library candidate: it
answers lookups over whole time series given up front, but has no streamed, bounded history of
stamped messages, no distinction of static and dynamic edges, and treats the frames as an
undirected graph rather than a tree with one parent per frame; what the node needs (append as
messages come, forget the old, say why a lookup fails) is this small module.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from focus_ros.poses.trajectory import matrix_to_quaternion, pose_matrix, quaternion_to_matrix, slerp

#: where camera poses come from, for the depth node and ``focus-ros depth``: "topic" (PoseStamped or
#: Odometry: a mocap's, a VIO's), "tf" (/tf and /tf_static: a robot's tree), "auto" (either, as found)
POSE_SOURCES = ("auto", "topic", "tf")
#: how far back a dynamic edge's history reaches behind its newest stamp by default (tf2's default)
DEFAULT_CACHE_NS = 10_000_000_000
#: more hops than this between a frame and its root is a loop (tf2's MAX_GRAPH_DEPTH)
MAX_TREE_DEPTH = 1000


class TransformError(LookupError):
    """No transform between two frames at a time; the message says why in one line."""


class UnknownFrameError(TransformError):
    """A frame that no transform names (yet)."""


class NotConnectedError(TransformError):
    """Both frames are known but lie in different trees (no common ancestor)."""


class ExtrapolationError(TransformError):
    """The time lies outside an edge's stamps. ``ahead``: it is later than the newest stamp (newer
    transforms may still come: wait); otherwise earlier than the oldest one kept (they never will)."""

    def __init__(self, message: str, ahead: bool):
        super().__init__(message)
        self.ahead = ahead


def frame_name(name: str) -> str:
    """A frame id as tf2 compares them: without a leading '/' (a ROS 1 habit)."""
    return name[1:] if name.startswith("/") else name


@dataclass(frozen=True)
class StampedTransform:
    """The pose of ``child`` in ``parent`` at ``t_ns`` (ns): translation (m) and rotation (unit
    quaternion qx qy qz qw); maps child coordinates to parent coordinates. The content of one
    geometry_msgs/TransformStamped."""

    t_ns: int
    parent: str
    child: str
    translation_m: tuple[float, float, float]
    rotation_xyzw: tuple[float, float, float, float]


def _seconds(t_ns: int) -> str:
    return f"{t_ns / 1e9:.6f} s"


class _Edge:
    """One child frame's edge to its parent: a static pose, or stamped poses in time order."""

    def __init__(self, parent: str, static: bool):
        self.parent, self.static = parent, static
        self.t_ns: list[int] = []
        self.translations: list[np.ndarray] = []
        self.rotations: list[np.ndarray] = []

    def insert(self, t_ns: int, translation: np.ndarray, rotation: np.ndarray) -> None:
        if self.static:  # a static edge holds one pose: the latest one given
            self.t_ns, self.translations, self.rotations = [t_ns], [translation], [rotation]
            return
        index = bisect.bisect_left(self.t_ns, t_ns)
        if index < len(self.t_ns) and self.t_ns[index] == t_ns:  # the same stamp again: replaced
            self.translations[index], self.rotations[index] = translation, rotation
            return
        self.t_ns.insert(index, t_ns)
        self.translations.insert(index, translation)
        self.rotations.insert(index, rotation)

    def forget_before(self, t_ns: int) -> None:
        """Drop stamps older than t_ns, keeping the newest one at or before it (for interpolation)."""
        keep_from = max(0, bisect.bisect_right(self.t_ns, t_ns) - 1)
        if keep_from:
            del self.t_ns[:keep_from], self.translations[:keep_from], self.rotations[:keep_from]

    def at(self, t_ns: int, tolerance_ns: int, child: str) -> tuple[np.ndarray, np.ndarray]:
        """(translation, rotation) at t_ns; ExtrapolationError outside the stamps beyond the tolerance."""
        if self.static:
            return self.translations[0], self.rotations[0]
        first, last = self.t_ns[0], self.t_ns[-1]
        if t_ns > last + tolerance_ns or t_ns < first - tolerance_ns:
            ahead = t_ns > last
            raise ExtrapolationError(
                f"no transform from '{self.parent}' to '{child}' at {_seconds(t_ns)}: it is "
                f"{'ahead of the newest' if ahead else 'behind the oldest'} one ("
                f"{_seconds(last if ahead else first)}, {abs(t_ns - (last if ahead else first)) / 1e6:.1f} ms "
                f"{'later' if ahead else 'earlier'})", ahead)
        if t_ns >= last:
            return self.translations[-1], self.rotations[-1]
        if t_ns <= first:
            return self.translations[0], self.rotations[0]
        upper = bisect.bisect_right(self.t_ns, t_ns)
        lower = upper - 1
        fraction = (t_ns - self.t_ns[lower]) / (self.t_ns[upper] - self.t_ns[lower])
        translation = self.translations[lower] + fraction * (self.translations[upper] - self.translations[lower])
        rotation = slerp(self.rotations[lower][None], self.rotations[upper][None], np.array([fraction]))[0]
        return translation, rotation


class TransformBuffer:
    """The TF tree over time (module docstring).

    cache_ns: how much history each dynamic edge keeps behind its newest stamp (ns; None = all,
    for a bag read offline). extrapolation_tolerance_ns: how far beyond an edge's stamps a lookup
    still takes the nearest stamp's pose (ns; 0 = none, tf2's behaviour).
    """

    def __init__(self, cache_ns: int | None = DEFAULT_CACHE_NS, extrapolation_tolerance_ns: int = 0):
        self.cache_ns = cache_ns
        self.extrapolation_tolerance_ns = int(extrapolation_tolerance_ns)
        self._edges: dict[str, _Edge] = {}

    # ----------------------------------------------------------------- input
    def set_transform(self, transform: StampedTransform, static: bool = False) -> None:
        """Add one edge pose. ValueError (one line) for a transform that cannot be used: a frame
        that is its own parent, an empty frame name, a translation or rotation that is not finite,
        a quaternion whose norm is off 1 by more than 1 %. A child given a new parent, or a
        dynamic edge made static (or the reverse), starts that edge anew."""
        parent, child = frame_name(transform.parent), frame_name(transform.child)
        if not parent or not child:
            raise ValueError(f"transform with an empty frame id (parent '{parent}', child '{child}')")
        if parent == child:
            raise ValueError(f"transform of frame '{child}' in itself")
        translation = np.asarray(transform.translation_m, dtype=np.float64)
        rotation = np.asarray(transform.rotation_xyzw, dtype=np.float64)
        if not (np.all(np.isfinite(translation)) and np.all(np.isfinite(rotation))):
            raise ValueError(f"transform '{parent}' -> '{child}' at {_seconds(transform.t_ns)} is not finite")
        norm = float(np.linalg.norm(rotation))
        if abs(norm - 1.0) > 0.01:
            raise ValueError(f"transform '{parent}' -> '{child}' at {_seconds(transform.t_ns)}: rotation of norm "
                             f"{norm:.4g}, not a unit quaternion")
        edge = self._edges.get(child)
        if edge is None or edge.parent != parent or edge.static != static:
            edge = self._edges[child] = _Edge(parent, static)
        edge.insert(int(transform.t_ns), translation, rotation / norm)
        if not static and self.cache_ns is not None:
            edge.forget_before(edge.t_ns[-1] - self.cache_ns)

    def clear_dynamic(self) -> None:
        """Forget every dynamic edge (time jumped back: a bag replayed again); static ones stay."""
        self._edges = {child: edge for child, edge in self._edges.items() if edge.static}

    # ----------------------------------------------------------------- queries
    def frames(self) -> dict[str, tuple[str, bool]]:
        """Every child frame: (its parent, whether the edge is static)."""
        return {child: (edge.parent, edge.static) for child, edge in self._edges.items()}

    def known_frames(self) -> list[str]:
        """Every frame a transform names, sorted."""
        return sorted(set(self._edges) | {edge.parent for edge in self._edges.values()})

    def newest_ns(self, child: str) -> int | None:
        """The newest stamp of a child frame's edge (None when it is unknown or static)."""
        edge = self._edges.get(frame_name(child))
        return None if edge is None or edge.static else edge.t_ns[-1]

    def chain(self, frame: str) -> list[str]:
        """The frame and its ancestors up to its tree's root, in that order."""
        chain = [frame_name(frame)]
        while chain[-1] in self._edges:
            chain.append(self._edges[chain[-1]].parent)
            if len(chain) > MAX_TREE_DEPTH:
                raise TransformError(f"the frames above '{frame}' form a loop: {' -> '.join(chain[-6:])}")
        return chain

    def root(self, frame: str) -> str:
        """The root of the frame's tree; UnknownFrameError when no transform names the frame."""
        frame = frame_name(frame)
        known = self.known_frames()
        if frame not in known:
            raise UnknownFrameError(f"no transform to '{frame}': '{frame}' is unknown; known frames: "
                                    f"{', '.join(known) if known else 'none (no transform received)'}")
        return self.chain(frame)[-1]

    def path(self, target: str, source: str) -> tuple[list[str], list[str]]:
        """(frames from source up to the common ancestor, frames from target up to it), each
        ending at that ancestor. UnknownFrameError / NotConnectedError, one line naming the frames."""
        target, source = frame_name(target), frame_name(source)
        known = self.known_frames()
        for frame in (target, source):
            if frame not in known:
                raise UnknownFrameError(f"no transform from '{target}' to '{source}': '{frame}' is unknown; known "
                                        f"frames: {', '.join(known) if known else 'none (no transform received)'}")
        up_source, up_target = self.chain(source), self.chain(target)
        common = next((frame for frame in up_source if frame in set(up_target)), None)
        if common is None:
            raise NotConnectedError(f"no transform from '{target}' to '{source}': they are in different trees "
                                    f"(roots '{up_target[-1]}' and '{up_source[-1]}')")
        return up_source[:up_source.index(common) + 1], up_target[:up_target.index(common) + 1]

    def dynamic_edges(self, target: str, source: str) -> list[str]:
        """The child frames of the dynamic edges between two frames (whose stamps pace the lookups)."""
        up_source, up_target = self.path(target, source)
        return [child for child in up_source[:-1] + up_target[:-1] if not self._edges[child].static]

    def lookup(self, target: str, source: str, t_ns: int) -> np.ndarray:
        """``target_from_source`` (4×4, m) at ``t_ns``: maps source coordinates to target
        coordinates (the pose of source in target). TransformError subclasses, one line each."""
        up_source, up_target = self.path(target, source)
        ancestor_from_source = self._up(up_source, int(t_ns))
        ancestor_from_target = self._up(up_target, int(t_ns))
        return np.linalg.solve(ancestor_from_target, ancestor_from_source)

    def _up(self, chain: list[str], t_ns: int) -> np.ndarray:
        """ancestor_from_frame along a chain [frame, parent, ..., ancestor]."""
        matrix = np.eye(4)
        for child in chain[:-1]:
            translation, rotation = self._edges[child].at(t_ns, self.extrapolation_tolerance_ns, child)
            matrix = pose_matrix(quaternion_to_matrix(rotation), translation) @ matrix
        return matrix


class CameraPoses:
    """World-from-camera poses from a TF tree, as a stream: what the depth pipeline's ``add_pose``
    takes. The poses are sampled at the stamps of the dynamic edges between ``world_frame`` and
    ``camera_frame`` (the depth pipeline interpolates between them as it does between PoseStamped
    messages), each once every edge on the way covers it.

    world_frame: '' = the root of the camera frame's tree (a robot's map or odom, a mocap's world),
    chosen when the first pose resolves. jump_back_ns: a dynamic transform older than its edge's
    newest stamp by more than this means time jumped back (a bag replayed again): the dynamic
    edges are forgotten and ``counts['time_jumps_back']`` counted; the poses that follow restart
    the trajectory as a pose topic's would. max_pending: bound on stamps waiting to resolve.
    """

    def __init__(self, world_frame: str, camera_frame: str, buffer: TransformBuffer | None = None,
                 jump_back_ns: int = 500_000_000, max_pending: int = 100_000):
        self.buffer = TransformBuffer() if buffer is None else buffer
        self.world_frame, self.camera_frame = frame_name(world_frame), frame_name(camera_frame)
        self.jump_back_ns, self.max_pending = int(jump_back_ns), int(max_pending)
        self._pending: list[tuple[int, float, str]] = []  # (stamp ns, when it came (s), its child frame), by stamp
        self._last_pose_ns: int | None = None
        self.last_error = ""  # why the oldest pending stamp does not resolve ('' when none waits)
        self._waiting_for_edge = False  # the oldest pending stamp waits for another moving edge to reach it
        self.counts = {"transforms_received": 0, "transforms_invalid": 0, "time_jumps_back": 0,
                       "pose_stamps_expired": 0}

    def set_camera_frame(self, camera_frame: str) -> None:
        """The camera's frame, once it is known (the events' frame_id)."""
        self.camera_frame = frame_name(camera_frame)

    def add(self, transforms: Iterable[StampedTransform], static: bool = False,
            received_s: float = 0.0) -> tuple[list[tuple[int, np.ndarray, np.ndarray]], list[str]]:
        """One TFMessage's transforms (``static``: from /tf_static); returns (the camera poses
        they complete: (t ns, position m, rotation qx qy qz qw), in time order; one line for each
        transform refused as invalid). Time jumping back is counted, not said: the camera poses
        jump back with it, and the pipeline says so."""
        problems = []
        for transform in transforms:
            self.counts["transforms_received"] += 1
            child = frame_name(transform.child)
            newest = None if static else self.buffer.newest_ns(child)
            if newest is not None and transform.t_ns < newest - self.jump_back_ns:
                self.counts["time_jumps_back"] += 1  # said by the pipeline, whose poses jump back with it
                self.buffer.clear_dynamic()
                self._pending.clear()
                self._last_pose_ns = None
            try:
                self.buffer.set_transform(transform, static)
            except ValueError as error:
                self.counts["transforms_invalid"] += 1
                problems.append(f"transform ignored: {error}")
                continue
            if not static and (self._last_pose_ns is None or transform.t_ns > self._last_pose_ns):
                bisect.insort(self._pending, (int(transform.t_ns), received_s, child))
        if len(self._pending) > self.max_pending:
            del self._pending[:len(self._pending) - self.max_pending]
        return self._resolve(), problems

    def _resolve(self) -> list[tuple[int, np.ndarray, np.ndarray]]:
        """The pending stamps that resolve now, oldest first; stops at the first that must wait."""
        self._waiting_for_edge = False
        if not self._pending or not self.camera_frame:
            return []
        try:
            world = self.world_frame or self.buffer.root(self.camera_frame)
            paced_by = set(self.buffer.dynamic_edges(world, self.camera_frame))
        except TransformError as error:
            self.last_error = str(error)
            return []
        if not paced_by:
            self.last_error = (f"only static transforms between '{world}' and '{self.camera_frame}': the camera "
                               "does not move in that frame (choose a world frame above the moving one)")
            return []
        poses, resolved = [], 0
        for t_ns, _, child in self._pending:
            if child not in paced_by or self._last_pose_ns is not None and t_ns <= self._last_pose_ns:
                resolved += 1  # an edge off the way (a robot's other joints), or a stamp already passed
                continue
            try:
                world_from_camera = self.buffer.lookup(world, self.camera_frame, t_ns)
            except ExtrapolationError as error:
                if error.ahead:  # another edge has not reached this stamp yet: wait for it
                    self.last_error, self._waiting_for_edge = str(error), True
                    break
                resolved += 1  # behind what is kept: never resolvable
                continue
            resolved += 1
            self.world_frame = world
            poses.append((t_ns, world_from_camera[:3, 3].copy(), matrix_to_quaternion(world_from_camera[:3, :3])))
            self._last_pose_ns = t_ns
        del self._pending[:resolved]
        if not self._pending:
            self.last_error = ""
        return poses

    def expire(self, now_s: float, timeout_s: float) -> int:
        """Drop the stamps that have waited longer than timeout_s (s, the clock of ``received_s``)
        for the other moving edges on the way to cover them; returns how many (counted). Stamps
        that wait for a frame to become known (a static transform published late) are kept, up
        to max_pending: when it comes, they give the poses of the events held meanwhile."""
        if not self._waiting_for_edge:  # frames unknown yet: the stamps wait for them (bounded by max_pending)
            return 0
        expired = sum(1 for _, received_s, _ in self._pending if now_s - received_s > timeout_s)
        if expired:
            self._pending = [entry for entry in self._pending if now_s - entry[1] <= timeout_s]
            self.counts["pose_stamps_expired"] += expired
        return expired

    def problem(self) -> str:
        """'' or why no camera pose comes, in one line (the frames unknown or not connected, the
        transforms behind), e.g. "no transform from 'odom' to 'dvs': 'dvs' is unknown; known frames: ..."."""
        if not self.camera_frame:
            return "the camera frame is not known yet (no event message with a frame_id)"
        if self.last_error:
            return self.last_error
        if not self.buffer.known_frames():
            return "no transform received on /tf or /tf_static"
        try:
            self.buffer.path(self.world_frame or self.buffer.root(self.camera_frame), self.camera_frame)
        except TransformError as error:
            return str(error)
        return ""
