"""One entry point for "a sequence": an Event Camera Dataset folder or a ROS 1 / ROS 2 bag.

- :func:`sequence_format` tells which it is (or says clearly why it is neither);
- :func:`iter_sequence_events` streams its events in chunks (memory does not grow with it);
- :func:`sequence_calibration` finds its intrinsics (a calibration file given by the user,
  the folder's ``calib.txt``, or the bag's ``sensor_msgs/CameraInfo``);
- :func:`load_recording` reads it whole, with ground truth, for evaluation;
- :func:`read_depth_ground_truth` reads its depth ground truth, if it has any.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

from focus_ros.camera import Calibration
from focus_ros.events import Events
from focus_ros.sources.depth_maps import DepthGroundTruth
from focus_ros.sources.recording import Recording

ECD = "ecd"
ROSBAG1 = "rosbag1"
ROSBAG2 = "rosbag2"


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


def iter_sequence_events(path, topic: str | None = None, chunk_events: int = 1_000_000) -> Iterator[Events]:
    """Stream the events of a sequence (time order), a chunk at a time.

    topic: the bag's event topic (default: detected by type). ECD: chunks of
    ``chunk_events``; bags: one chunk per message.
    """
    path = Path(path)
    if sequence_format(path) == ECD:
        from focus_ros.sources import ecd  # each reader only when its format is at hand (rosbags, numba)
        yield from ecd.iter_event_chunks(_events_file(path), chunk_events)
        return
    from focus_ros.sources import bags
    for events, _ in bags.iter_bag_events(path, topic):
        yield events


def sequence_calibration(path, calibration_file=None, width: int = 240, height: int = 180) -> Calibration:
    """Intrinsics of a sequence.

    calibration_file: an ECD calib.txt (then ``width`` x ``height`` px) or a ROS camera YAML;
    it overrides the sequence's own. Otherwise the folder's calib.txt, or the bag's first
    camera_info. Raises FileNotFoundError / ValueError saying what is missing.
    """
    path = Path(path)
    if calibration_file is not None:
        return Calibration.from_file(calibration_file, width, height)
    if sequence_format(path) == ECD:
        calib = _events_file(path).parent / "calib.txt"
        if not calib.is_file():
            raise FileNotFoundError(f"calibration not found: {calib} (give a calibration file)")
        return Calibration.from_ecd_calib(calib, width=width, height=height)
    from focus_ros.sources import bags
    calibration = bags.read_bag_calibration(path)
    if calibration is None:
        raise ValueError(f"{path}: the bag has no camera_info (give a calibration file)")
    return calibration


def load_recording(path, calibration_file=None, width: int = 240, height: int = 180) -> Recording:
    """Read a whole sequence with whatever ground truth it has (IMU, poses).

    Raises FileNotFoundError / ValueError naming the file when it cannot be read, has no
    events or no calibration.
    """
    path = Path(path)
    if sequence_format(path) == ECD:
        from focus_ros.sources import ecd
        recording = ecd.read_ecd_folder(path if path.is_dir() else path.parent, width=width, height=height)
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
