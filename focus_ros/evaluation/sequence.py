"""Load a sequence with ground truth for evaluation: an Event Camera Dataset folder, a bag,
or the simulator (in process, seeded)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from focus_ros.camera import Calibration
from focus_ros.events import NANOSECONDS_PER_SECOND
from focus_ros.sources.recording import ImuSamples, Poses, Recording

BAG_SUFFIXES = (".bag", ".mcap", ".db3")


def load_sequence(path, calibration_path=None) -> Recording:
    """Read an ECD folder (events.txt, calib.txt, optional imu.txt / groundtruth.txt) or a ROS 1/2
    bag. calibration_path overrides the sequence's calibration (ECD calib.txt or camera YAML).
    Raises FileNotFoundError / ValueError naming the file."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"sequence not found: {path}")
    if path.is_dir() and (path / "events.txt").is_file():
        recording = _read_ecd_folder(path)
    elif path.suffix in BAG_SUFFIXES or (path.is_dir() and (path / "metadata.yaml").is_file()):
        from focus_ros.sources.bags import read_bag
        recording = read_bag(path)
    elif path.is_file() and path.name.endswith(".txt"):
        recording = _read_ecd_folder(path.parent)
    else:
        raise ValueError(f"{path}: not an Event Camera Dataset folder (no events.txt) nor a bag "
                         f"({', '.join(BAG_SUFFIXES)} or a rosbag2 folder)")
    if calibration_path is not None:
        calibration_path = Path(calibration_path)
        if calibration_path.suffix.lower() in (".yaml", ".yml"):
            recording.calibration = Calibration.from_yaml(calibration_path)
        else:
            recording.calibration = Calibration.from_ecd_calib(calibration_path)
    if recording.calibration is None:
        raise ValueError(f"{path}: no calibration found (give --calib)")
    if len(recording.events) == 0:
        raise ValueError(f"{path}: the sequence holds no events")
    return recording


def simulate_sequence(preset: str, duration_s: float | None, seed: int, end_s: float | None = None) -> Recording:
    """A seeded simulator recording of a preset (see focus_ros.sources.simulator.PRESETS);
    end_s < duration_s simulates only the beginning of the preset's trajectory."""
    from focus_ros.sources.simulator import make_preset

    simulator = make_preset(preset, duration_s, seed)
    return simulator.simulate(end_s=end_s)


def _read_ecd_folder(folder: Path) -> Recording:
    """The ECD folder through focus_ros.sources.ecd; a minimal reader while that module is absent."""
    try:
        from focus_ros.sources.ecd import read_ecd_folder
    except ImportError:
        return _read_ecd_folder_minimal(folder)
    return read_ecd_folder(folder)


def _read_ecd_folder_minimal(folder: Path) -> Recording:
    """Events (streamed text reader of the estimate command), calib.txt, imu.txt, groundtruth.txt."""
    from focus_ros.commands.estimate import iter_event_chunks
    from focus_ros.events import Events

    events = Events.concatenate(list(iter_event_chunks(folder / "events.txt")))
    calibration = Calibration.from_ecd_calib(folder / "calib.txt") if (folder / "calib.txt").is_file() else None
    imu = poses = None
    if (folder / "imu.txt").is_file():
        table = _read_table(folder / "imu.txt", 7)
        imu = ImuSamples(_seconds_to_ns(table[:, 0]), table[:, 4:7], table[:, 1:4])
    if (folder / "groundtruth.txt").is_file():
        table = _read_table(folder / "groundtruth.txt", 8)
        poses = Poses(_seconds_to_ns(table[:, 0]), table[:, 1:4], table[:, 4:8])
    return Recording(events=events, calibration=calibration, imu=imu, poses=poses)


def _seconds_to_ns(seconds: np.ndarray) -> np.ndarray:
    return np.round(seconds * NANOSECONDS_PER_SECOND).astype(np.int64)


def _read_table(path: Path, columns: int) -> np.ndarray:
    """A whitespace-separated numeric text table; ValueError naming the first bad line."""
    rows = []
    with open(path) as handle:
        for number, line in enumerate(handle, start=1):
            words = line.split()
            if not words or words[0].startswith("#"):
                continue
            try:
                values = [float(word) for word in words]
            except ValueError:
                raise ValueError(f"{path}:{number}: not numbers: {line.strip()!r}") from None
            if len(values) != columns:
                raise ValueError(f"{path}:{number}: expected {columns} columns, got {len(values)}")
            rows.append(values)
    return np.array(rows, dtype=np.float64).reshape(-1, columns)
