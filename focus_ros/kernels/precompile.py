"""Fill numba's cache for every kernel of focus_ros, for the argument types real use gives them.

numba compiles a kernel for the exact types of its arguments (dtype, dimensions, layout,
read-only or not, scalar kinds): compiling for types nobody passes helps nobody, and
guessing signatures by hand drifts from the code. So each group of
:data:`~focus_ros.kernels.groups.GROUPS` is compiled by *running* the code that uses it on a
small synthetic input (sizes do not matter to numba, types do):

- the estimator kinds are built and run through :mod:`focus_ros.runtime.kinds` exactly as a
  node's engine does (``configured_estimator``: the kind's own warm-up included, then
  ``run_job`` with pictures), with the node's default settings on every sensor of
  :data:`focus_ros.camera.SENSORS` (binning differs with the sensor), then with each
  choice a node parameter offers that selects other kernels (every loss in each polarity
  mode it supports, the Gaussian IWE kernel, the small-angle warp, ``focus-ros evaluate``'s
  settings), one choice at a time from the node's defaults;
- the event input encodes and decodes a stream of messages in every message type, encoding
  and serialization the nodes and bag readers decode, as ``bytes`` (what rclpy and the bag
  readers hand over: read-only arrays) with the event bytes at every alignment (an unaligned
  payload is copied: a writable array), then runs the stream guard through each of its cases;
- the recordings, the simulator and the tools run their public functions once.

Run it with ``python -m focus_ros.kernels`` or ``focus-ros compile``; ``make setup`` and the
colcon install (setup.py) run it once after an install or an update.
"""

from __future__ import annotations

import tempfile
import time
from dataclasses import replace
from typing import Callable, Iterable

import numpy as np

from focus_ros.camera import SENSORS, Calibration
from focus_ros.events import Events
from focus_ros.kernels.cache import compile_counts, remove_entries
from focus_ros.kernels.groups import GROUPS, group_named, modules_of

#: the sensor whose lens the other code paths run with (types do not depend on the sensor)
_REFERENCE_SENSOR = "davis240c"
#: the image size (px) of the runs beyond the node defaults: numba compiles for types, not
#: sizes, and every estimator's stages take milliseconds on an image this small
_SMALL_IMAGE_PX = (64, 48)


def small_camera() -> Calibration:
    """The reference sensor's lens on a 64 x 48 px image (same field of view, same distortion)."""
    lens = SENSORS[_REFERENCE_SENSOR].lens
    scale = _SMALL_IMAGE_PX[0] / lens.width
    return Calibration(*_SMALL_IMAGE_PX, lens.fx * scale, lens.fy * scale, lens.cx * scale, lens.cy * scale,
                       distortion=lens.distortion)


def random_window(calibration: Calibration, count: int, duration_ns: int, seed: int = 1,
                  start_ns: int = 0) -> Events:
    """``count`` events at random pixels of the sensor over ``duration_ns`` from ``start_ns``
    (sorted, whole microseconds, both polarities): the types a decoder hands the estimators."""
    generator = np.random.default_rng(seed)
    t = start_ns + 1000 * np.sort(generator.integers(0, duration_ns // 1000, count))
    return Events.from_arrays(generator.integers(0, calibration.width, count),
                              generator.integers(0, calibration.height, count), t, generator.choice([-1, 1], count))


def _build_and_run(kind_name: str, calibration: Calibration, settings, extra, jobs: int, events: int = 5000):
    """A node engine's steps: the kind built (its own warm-up included), then ``jobs`` jobs of
    ``events`` events over 30 ms each, with pictures (the later ones warm-started, as a node's
    later windows are); ``extra``: the job's extra, or a function of its window giving it.
    Returns the estimator."""
    from focus_ros.runtime.kinds import configured_estimator, kind_named, run_job

    kind = kind_named(kind_name)
    estimator = configured_estimator(kind, None, calibration, settings, keep_warm_start=False)
    for job in range(jobs):
        window = random_window(calibration, events, 30_000_000, seed=job, start_ns=job * 30_000_000)
        run_job(kind, estimator, window, extra(window) if callable(extra) else extra, images=True)
    return estimator


def _run_choices(kind_name: str, defaults, choices: Iterable[dict], extra, jobs: int, events: int = 5000) -> None:
    """:func:`_build_and_run` on :func:`small_camera` with ``defaults`` changed one way at a time
    (each dict of ``choices`` a set of changes). A choice the settings or the estimator refuse
    (ValueError, e.g. a loss without a polarity version), as a node's parameter check would, is
    skipped: nothing of it runs, nothing to compile."""
    calibration = small_camera()
    for changes in choices:
        try:
            settings = replace(defaults, **changes)
            _build_and_run(kind_name, calibration, settings, extra, jobs, events)
        except ValueError:
            continue


def node_settings(kind_name: str, calibration: Calibration):
    """The settings a node of ``kind_name`` builds its estimator with when no parameter is set,
    for this sensor (angular velocity: the real-time settings, the IWE binned on large sensors)."""
    if kind_name == "angular_velocity":
        from focus_ros.estimators.angular_velocity import real_time_settings
        from focus_ros.iwe import coarse_grid_factor
        return real_time_settings(pixel_binning=coarse_grid_factor(calibration.width, calibration.height))
    if kind_name == "optical_flow":
        from focus_ros.estimators.optical_flow import OpticalFlowSettings
        return OpticalFlowSettings()
    from focus_ros.estimators.depth import DepthSettings
    return DepthSettings()


def _node_job(kind_name: str, calibration: Calibration) -> tuple[int, object]:
    """(events per job, the job's extra) of a node of ``kind_name``: a 20,000-event window with
    its covariance wanted (angular velocity); a window a little over the flow node's default
    size on the binned image, so that its patches fill and the window is thinned; a keyframe
    with its trajectory (depth)."""
    if kind_name == "angular_velocity":
        return 20_000, True
    if kind_name == "optical_flow":
        from focus_ros.estimators.optical_flow import default_pixel_binning, default_window_events
        binning = default_pixel_binning(calibration.width, calibration.height)
        return 2 * default_window_events(calibration.width // binning, calibration.height // binning), None
    return 20_000, _keyframe_trajectory


def run_like_a_node(kind_name: str, calibration: Calibration, jobs: int = 1):
    """What a node of ``kind_name`` does until its first results: its estimator built with the
    node's default settings (:func:`node_settings`) and ``jobs`` jobs run (see
    :func:`_build_and_run`). Returns the estimator."""
    events, extra = _node_job(kind_name, calibration)
    return _build_and_run(kind_name, calibration, node_settings(kind_name, calibration), extra, jobs, events)


# ----------------------------------------------------------------- the estimator kinds
def compile_angular_velocity() -> None:
    """angular_velocity_node's estimator on every sensor (two windows: the second warm-started),
    then every loss (in each polarity mode it supports), IWE kernel and warp, and the settings of
    ``focus-ros evaluate``."""
    from focus_ros.estimators.angular_velocity import ROTATION_WARPS, AngularVelocitySettings, real_time_settings
    from focus_ros.iwe import KERNELS
    from focus_ros.losses import LOSSES
    from focus_ros.objective import supported_polarity_modes

    for sensor in SENSORS.values():
        estimator = run_like_a_node("angular_velocity", sensor.lens, jobs=2)
        # a rotation too fast for the series form of the warp takes the per-event kernels
        estimator.objective.evaluate(np.array([300.0, -200.0, 100.0]))
    choices = [dict(loss=name, use_polarity=mode == "with") for name, loss in LOSSES.items()
               for mode in supported_polarity_modes(loss)]
    choices += [dict(kernel=name) for name in KERNELS] + [dict(warp=name) for name in ROTATION_WARPS]
    _run_choices("angular_velocity", real_time_settings(), choices, extra=False, jobs=0)
    _run_choices("angular_velocity", AngularVelocitySettings(), [{}], extra=True, jobs=1)  # focus-ros evaluate


def compile_optical_flow() -> None:
    """optical_flow_node's estimator on every sensor, then every loss it accepts in both polarity
    modes."""
    from focus_ros.estimators.optical_flow import OpticalFlowSettings
    from focus_ros.losses import LOSSES

    for sensor in SENSORS.values():
        run_like_a_node("optical_flow", sensor.lens, jobs=2)
    choices = [dict(loss=name, use_polarity=polarity) for name in LOSSES for polarity in (False, True)]
    _run_choices("optical_flow", OpticalFlowSettings(), choices, extra=None, jobs=1,
                 events=_node_job("optical_flow", small_camera())[0])


def _keyframe_trajectory(window: Events):
    """The camera sliding 5 cm along x over the window (a keyframe's trajectory segment)."""
    from focus_ros.poses import Trajectory

    start, end = int(window.t[0]) - 1_000_000, int(window.t[-1]) + 1_000_000
    return Trajectory([start, end], [[0.0, 0.0, 0.0], [0.05, 0.0, 0.0]], [[0.0, 0.0, 0.0, 1.0]] * 2)


def compile_depth() -> None:
    """depth_node's estimator (node defaults, DAVIS240C) and its fused map, then every loss of
    the focus method and max_vote, in both polarity modes. (A depth kernel's types do not depend
    on the sensor; a 1280 x 720 DSI alone would take 256 MiB.)"""
    from focus_ros.depth.fusion import FusedMap
    from focus_ros.estimators.depth import DepthSettings, depth_method_names

    calibration = SENSORS[_REFERENCE_SENSOR].lens
    run_like_a_node("depth", calibration)
    # the node's fused map: two keyframes' points, the second seeing the first's
    generator = np.random.default_rng(0)
    fused = FusedMap()
    for shift in (0.0, 0.01):
        points = generator.uniform([-1.0, -1.0, 1.0], [1.0, 1.0, 3.0], (2000, 3)) + shift
        pose = np.eye(4)
        pose[0, 3] = shift
        fused.add(points, pose, 1.0 / calibration.fx)
    fused.points()
    choices = [dict(loss=name, use_polarity=polarity) for name in depth_method_names() if name != "max_vote"
               for polarity in (False, True)]
    choices += [dict(method="max_vote", use_polarity=polarity) for polarity in (False, True)]
    _run_choices("depth", DepthSettings(), choices, extra=_keyframe_trajectory, jobs=0)


# ----------------------------------------------------------------- event input, files, simulator, tools
#: frame ids of 1 to 4 characters: the event bytes of a message then start at every offset
#: modulo 4, aligned or not for the codecs' 16- and 32-bit words (an unaligned payload is
#: copied: a writable array instead of a read-only view of the message, another type to numba)
FRAME_IDS_AT_EVERY_ALIGNMENT = ("c", "ca", "cam", "came")


def decode_like_a_subscription(message_type: str, ros1: bool = False, sizes: tuple[int, ...] = (3000, 1),
                               packet_encodings: tuple[str, ...] | None = None) -> None:
    """What one subscription (or bag topic) of ``message_type`` runs on its messages: for each
    encoding the type carries (every EventPacket encoding, or the dvs_msgs records) and each
    frame id of :data:`FRAME_IDS_AT_EVERY_ALIGNMENT`, a stream of messages of ``sizes`` events
    encoded as a driver would, decoded from ``bytes`` (what rclpy and the bag readers hand over)
    by one :class:`~focus_ros.codecs.EventMessageDecoder`, each batch then checked by a
    :class:`~focus_ros.stream.StreamGuard`. A one-event message is another type to numba (a
    strided view of one element is contiguous). ros1: ROS 1 serialization (ROS 1 bags), also
    converted to ROS 2 CDR as a replay does for EventPackets. packet_encodings: the EventPacket
    encodings to run (None: all; ``()``: none, the stream guard alone, as a node subscribing to
    EventPackets knows its encoding only from the first message:
    :func:`focus_ros.ros.event_input.load_kernels`)."""
    from focus_ros import codecs
    from focus_ros.codecs.message_types import event_message_type
    from focus_ros.stream import StreamGuard

    calibration = SENSORS[_REFERENCE_SENSOR].lens
    width, height = calibration.width, calibration.height
    row = event_message_type(message_type)
    stream = [random_window(calibration, size, 5_000_000, seed=seed, start_ns=1_000_000_000 + seed * 5_000_000)
              for seed, size in enumerate(sizes)]
    if row.packet:
        encodings = codecs.SUPPORTED_PACKET_ENCODINGS if packet_encodings is None else packet_encodings
    else:
        encodings = (None,)
    if not encodings:  # no decoder to run: the guard on the stream as decoded
        guard = StreamGuard(width, height, gap_s=1.0)
        for batch in stream:
            guard.check(batch, width, height)
    for encoding in encodings:
        for frame_id in FRAME_IDS_AT_EVERY_ALIGNMENT:
            decode = codecs.EventMessageDecoder(message_type, ros1=ros1)
            guard = StreamGuard(width, height, gap_s=1.0)
            for batch in stream:
                if encoding is None:
                    encode = codecs.encode_event_array_ros1 if ros1 else codecs.encode_event_array
                    message = encode(batch, height, width, frame_id)
                else:
                    message = codecs.encode_event_packet(batch, height, width, encoding, frame_id, ros1=ros1)
                events, info = decode(bytes(message))
                guard.check(events, info.width, info.height)
                if row.packet and ros1:
                    codecs.event_packet_ros1_to_cdr(bytes(message))


def compile_event_input() -> None:
    """Every event message type in both serializations (ROS 2 CDR as rclpy and ROS 2 bags hand it
    over, ROS 1 as in ROS 1 bags) decoded as a subscription does
    (:func:`decode_like_a_subscription`); then the stream guard through each of its cases."""
    from focus_ros import codecs
    from focus_ros.stream import StreamGuard

    for row in codecs.EVENT_MESSAGE_TABLE:
        for ros1 in (False, True):
            decode_like_a_subscription(row.name, ros1)
    calibration = SENSORS[_REFERENCE_SENSOR].lens
    first, second = (random_window(calibration, 3000, 5_000_000, seed=seed, start_ns=seed * 5_000_000)
                     for seed in range(2))
    guard = StreamGuard(calibration.width, calibration.height, gap_s=0.5)
    guard.check(first)
    guard.check(second[::-1])                                                            # out of order
    guard.check(Events(second.x + np.uint16(calibration.width), second.y, second.t, second.p))  # outside
    guard.check(Events(first.x, first.y, first.t + 10_000_000_000, first.p))              # a gap
    guard.check(first)                                                                  # a jump back


def compile_recordings() -> None:
    """events.txt written and read back (Event Camera Dataset folders)."""
    from pathlib import Path

    from focus_ros.sources.ecd import read_events, write_events

    events = random_window(SENSORS[_REFERENCE_SENSOR].lens, 1000, 5_000_000)
    with tempfile.TemporaryDirectory(prefix="focus_ros_kernels_") as folder:
        path = Path(folder) / "events.txt"
        write_events(path, events)
        read_events(path)


def compile_simulator() -> None:
    """A few milliseconds of the two scene types of the presets (``make demo`` simulates
    rotation_short, a panorama, and slider, planes)."""
    from focus_ros.sources.simulator import make_preset

    for preset in ("rotation_short", "slider"):
        make_preset(preset, duration_s=0.02).simulate()


def compile_tools() -> None:
    """The array versions of the warps and of the IWE (tests, tools, notebooks)."""
    from focus_ros.iwe import KERNELS, accumulate
    from focus_ros.warps import PARAMETER_COUNT, warp_events

    calibration = SENSORS[_REFERENCE_SENSOR].lens
    generator = np.random.default_rng(0)
    points = generator.uniform(0.0, 100.0, (500, 2))
    for kernel in KERNELS:
        accumulate(points, calibration.width, calibration.height, kernel=kernel)
        accumulate(points, calibration.width, calibration.height, weights=np.ones(500), kernel=kernel,
                   timestamps=np.linspace(0.0, 0.01, 500))
    bearings, dt = generator.uniform(-0.5, 0.5, (500, 2)), np.linspace(-0.005, 0.005, 500)
    for model, count in PARAMETER_COUNT.items():
        warp_events(model, bearings, dt, np.ones(count), calibration.fx, calibration.fy, calibration.cx, calibration.cy)


#: group name -> the function that compiles it (every row of GROUPS has one)
COMPILERS: dict[str, Callable[[], None]] = {
    "angular_velocity": compile_angular_velocity,
    "optical_flow": compile_optical_flow,
    "depth": compile_depth,
    "event_input": compile_event_input,
    "recordings": compile_recordings,
    "simulator": compile_simulator,
    "tools": compile_tools,
}


def precompile(kinds: Iterable[str] | None = None, progress: Callable[[str], None] | None = print,
               fresh: bool = False) -> dict[str, float]:
    """Compile (and so write to numba's cache) the kernels of the groups ``kinds`` (names of
    :data:`~focus_ros.kernels.groups.GROUPS`: the estimator kinds "angular_velocity",
    "optical_flow", "depth", and "event_input", "recordings", "simulator", "tools"; None: all).

    progress: called with one line per group as it ends (its wall time in s, how many kernel
    versions it compiled and loaded from the cache, who uses it), None for silence.
    fresh: first delete these groups' cache entries (after a change of a kernel called from
    another module's kernel, which numba's staleness check does not see: see
    :mod:`focus_ros.kernels.cache`).

    Returns group name -> wall time (s). A group whose code fails raises (nothing to hide: the
    same code would fail in a node).
    """
    names = list(GROUPS) if kinds is None else [group_named(name).name for name in kinds]
    modules = [module for name in names for module in modules_of(name)]
    if fresh:
        if any(compile_counts(modules)):
            # what this process already holds would not be written again: the cache would stay empty
            raise RuntimeError("precompile(fresh=True) needs a process that has not run these kernels yet "
                               "(python -m focus_ros.kernels --fresh)")
        removed = remove_entries(modules)
        if progress:
            progress(f"   removed {removed} cache files of these kernels")
    times = {}
    for name in names:
        compiled_before, loaded_before = compile_counts(modules_of(name))
        started = time.perf_counter()
        COMPILERS[name]()
        times[name] = time.perf_counter() - started
        compiled, loaded = compile_counts(modules_of(name))
        if progress:
            progress(f"   {name:<17} {times[name]:5.1f} s  {compiled - compiled_before:3d} compiled, "
                     f"{loaded - loaded_before:3d} loaded   ({GROUPS[name].users})")
    return times
