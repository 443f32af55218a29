"""One entry point for "a sequence": an Event Camera Dataset folder or a ROS 1 / ROS 2 bag.

- :func:`sequence_format` tells which it is (or says clearly why it is neither);
- :func:`iter_sequence_events` streams its events in chunks (memory does not grow with it),
  optionally refusing events outside the calibration's sensor;
- :func:`sequence_calibration` finds its intrinsics (a calibration file given by the user,
  the folder's ``calib.txt``, or the bag's ``sensor_msgs/CameraInfo``);
- :func:`load_recording` reads it whole, with ground truth, for evaluation;
- :func:`read_depth_ground_truth` reads its depth ground truth, if it has any.
"""

from __future__ import annotations

from contextlib import closing
from pathlib import Path
from typing import Iterator

from focus_ros.camera import Calibration
from focus_ros.events import Events
from focus_ros.sources.depth_maps import DepthGroundTruth
from focus_ros.sources.recording import Recording

ECD = "ecd"
ROSBAG1 = "rosbag1"
ROSBAG2 = "rosbag2"

#: sensor size (px) for a calib.txt, which stores none, when neither the user nor the sequence
#: gives one: the Event Camera Dataset's DAVIS240C
DEFAULT_WIDTH, DEFAULT_HEIGHT = 240, 180

# The errors below name the command-line options that fix them: every command reading a
# sequence offers --calib, and those reading a calib.txt --width/--height.
_GIVE_CALIBRATION = "give a calibration file with --calib (calib.txt or a ROS camera YAML)"


def sequence_format(path) -> str:
    """"ecd" (a folder with events.txt, or an events.txt), "rosbag1" (a .bag file) or
    "rosbag2" (a bag folder with metadata.yaml). Raises FileNotFoundError / ValueError."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"sequence not found: {path}")
    if path.is_dir() and (path / "events.txt").is_file():
        return ECD
    if path.is_file() and path.name.endswith(".txt"):
        return ECD
    if path.is_file() and path.suffix == ".bag":
        return ROSBAG1
    if path.is_dir() and (path / "metadata.yaml").is_file():
        return ROSBAG2
    if path.is_file() and path.suffix in (".mcap", ".db3"):
        raise ValueError(f"{path}: a ROS 2 bag's storage file; give the bag folder "
                         f"{path.parent} (with its metadata.yaml)")
    raise ValueError(f"{path}: neither an Event Camera Dataset folder (no events.txt) nor a bag "
                     "(a ROS 1 .bag file or a ROS 2 bag folder with metadata.yaml)")


def _events_file(path: Path) -> Path:
    return path / "events.txt" if path.is_dir() else path


def iter_sequence_events(path, topic: str | None = None, chunk_events: int = 1_000_000,
                         within: Calibration | None = None) -> Iterator[Events]:
    """Stream the events of a sequence (time order), a chunk at a time.

    topic: the bag's event topic (default: detected by type). ECD: chunks of
    ``chunk_events``; bags: one chunk per message. within: a calibration whose sensor every
    event must lie on (ValueError naming the first one outside and the options that fix it).
    """
    path = Path(path)
    if sequence_format(path) == ECD:
        from focus_ros.sources import ecd  # each reader only when its format is at hand (rosbags, numba)
        chunks = ecd.iter_event_chunks(_events_file(path), chunk_events)
    else:
        from focus_ros.sources import bags
        chunks = (events for events, _ in bags.iter_bag_events(path, topic))
    for events in chunks:
        if within is not None:
            _check_on_sensor(events, within, path)
        yield events


def _check_on_sensor(events: Events, calibration: Calibration, path: Path) -> None:
    """ValueError naming the first event outside the calibration's sensor (width x height px)."""
    outside = (events.x >= calibration.width) | (events.y >= calibration.height)
    if outside.any():
        index = int(outside.argmax())
        raise ValueError(f"{path}: event at pixel ({events.x[index]}, {events.y[index]}) lies outside the "
                         f"{calibration.width}x{calibration.height} px sensor of the calibration; give the "
                         f"sensor size with --width/--height (a calib.txt holds none) or the camera's "
                         f"calibration with --calib")


def sequence_calibration(path, calibration_file=None, width: int | None = None, height: int | None = None,
                         topic: str | None = None) -> Calibration:
    """Intrinsics of a sequence.

    calibration_file: an ECD calib.txt or a ROS camera YAML; it overrides the sequence's own.
    Otherwise the folder's calib.txt, or the bag's camera_info (on ``/dvs/camera_info``, else
    on its one CameraInfo topic). A calib.txt stores no sensor size: ``width`` x ``height``
    px when given, else the size a bag's event messages declare (or a simulated folder's
    simulation.yaml records), else 240x180 (DAVIS240C).
    A bag must hold event messages (on ``topic``, default: found by type). Raises
    FileNotFoundError / ValueError saying what is missing and which option gives it.
    """
    path = Path(path)
    kind = sequence_format(path)
    declared = _recorded_ecd_size(path) if kind == ECD else _declared_sensor_size(path, topic)
    if width is None or height is None:
        default_width, default_height = declared or (DEFAULT_WIDTH, DEFAULT_HEIGHT)
        width = default_width if width is None else width
        height = default_height if height is None else height
    if calibration_file is not None:
        return Calibration.from_file(calibration_file, width, height)
    if kind == ECD:
        calib = _events_file(path).parent / "calib.txt"
        if not calib.is_file():
            raise FileNotFoundError(f"calibration not found: {calib}; {_GIVE_CALIBRATION}")
        try:
            return Calibration.from_ecd_calib(calib, width=width, height=height)
        except ValueError as error:
            raise ValueError(f"{error}; {_GIVE_CALIBRATION}") from None
    from focus_ros.sources import bags
    with closing(bags.open_bag(path)) as reader:
        topics = bags.bag_topics(reader)
    camera_info = sorted(t for t, msgtype in topics.items() if msgtype == bags.CAMERA_INFO_TYPE)
    topic = bags.DEFAULT_TOPICS.camera_info if bags.DEFAULT_TOPICS.camera_info in camera_info else (
        camera_info[0] if len(camera_info) == 1 else None)
    if topic is None:
        found = (f"several {bags.CAMERA_INFO_TYPE} topics ({', '.join(camera_info)}), none of them "
                 f"{bags.DEFAULT_TOPICS.camera_info}" if camera_info else f"no {bags.CAMERA_INFO_TYPE} topic")
        raise ValueError(f"{path}: the bag has no camera_info ({found}); {_GIVE_CALIBRATION}")
    try:
        calibration = bags.read_bag_calibration(path, topic)
    except ValueError as error:  # unusable or undecodable: a calibration file replaces it
        raise ValueError(f"{error}; {_GIVE_CALIBRATION}") from None
    if calibration is None:
        raise ValueError(f"{path}: the bag's camera_info topic {topic} holds no message; {_GIVE_CALIBRATION}")
    return calibration


def _recorded_ecd_size(path: Path) -> tuple[int, int] | None:
    """(width, height) px an ECD folder records (the simulator's simulation.yaml), or None."""
    from focus_ros.sources import ecd
    return ecd.recorded_sensor_size(_events_file(path).parent)


def _declared_sensor_size(path: Path, topic: str | None) -> tuple[int, int] | None:
    """(width, height) px that a bag's first event message declares (None when it declares
    none, as dvs_msgs with a 0 x 0 header); ValueError when the bag holds no event message."""
    from focus_ros.sources import bags
    from focus_ros.sources.bags import topic_counts, topics_listing

    with closing(bags.iter_bag_events(path, topic)) as messages:
        for _, info in messages:
            return (int(info.width), int(info.height)) if info.width > 0 and info.height > 0 else None
    with closing(bags.open_bag(path)) as reader:
        event_topic = topic or bags.find_event_topic(reader, path)
        listing = topics_listing(topic_counts(reader.connections))
    raise ValueError(f"{path}: the bag holds no event messages (its event topic {event_topic} has none); "
                     f"it holds {listing}")


def load_recording(path, calibration_file=None, width: int | None = None, height: int | None = None) -> Recording:
    """Read a whole sequence with whatever ground truth it has (IMU, poses).

    Raises FileNotFoundError / ValueError naming the file when it cannot be read, has no
    events or no calibration. width, height: as for :func:`sequence_calibration`.
    """
    path = Path(path)
    if sequence_format(path) == ECD:
        from focus_ros.sources import ecd
        recording = ecd.read_ecd_folder(path if path.is_dir() else path.parent, width, height)
    else:
        from focus_ros.sources import bags
        recording = bags.read_bag(path)
    if calibration_file is not None or recording.calibration is None:
        recording.calibration = sequence_calibration(path, calibration_file, width, height)
    if len(recording.events) == 0:
        raise ValueError(f"{path}: the sequence holds no events")
    return recording


def read_depth_ground_truth(path) -> DepthGroundTruth | None:
    """The depth ground truth of a sequence (ECD folder or bag), or None when it has none."""
    from focus_ros.sources import bags, ecd

    path = Path(path)
    if sequence_format(path) == ECD:
        folder = path if path.is_dir() else path.parent
        return ecd.read_depth_folder(folder) if (folder / ecd.DEPTH_LIST_FILE).is_file() else None
    return bags.read_bag_depth(path)
