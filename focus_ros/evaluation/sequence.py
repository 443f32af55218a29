"""Load a sequence with ground truth for evaluation: an Event Camera Dataset folder, a bag,
or the simulator (in process, seeded)."""

from __future__ import annotations

from focus_ros.sources.recording import Recording
from focus_ros.sources.sequence import load_recording


def load_sequence(path, calibration_path=None) -> Recording:
    """Read an ECD folder (events.txt, calib.txt, optional imu.txt / groundtruth.txt) or a ROS 1/2
    bag. calibration_path overrides the sequence's calibration (ECD calib.txt or camera YAML).
    Raises FileNotFoundError / ValueError naming the file."""
    return load_recording(path, calibration_path)


def simulate_sequence(preset: str, duration_s: float | None, seed: int, end_s: float | None = None,
                      camera: str = "davis240c") -> Recording:
    """A seeded simulator recording of a preset (see focus_ros.sources.simulator.PRESETS) seen
    through ``camera`` (a focus_ros.camera.SENSORS name); end_s < duration_s simulates only the
    beginning of the preset's trajectory."""
    from focus_ros.sources.simulator import make_preset

    simulator = make_preset(preset, duration_s, seed, camera=camera)
    return simulator.simulate(end_s=end_s)
