"""A recording in memory: events plus whatever ground truth and calibration came with it.

This is what readers return and writers take, whether the events come from the
Event Camera Dataset, a bag or the simulator, so that downstream code treats a simulated
sequence like a recorded one. One difference is kept on purpose: a simulated sequence says
so (:attr:`Recording.simulation`, written beside the events by every writer), because its
IMU and poses are exact ground truth, with none of a real gyro's delay. All times are int64
nanoseconds.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from focus_ros.camera import Calibration
from focus_ros.events import Events


@dataclass
class ImuSamples:
    """IMU samples: t (int64 ns, shape N), angular_velocity (N, 3) rad/s in the camera
    frame (x right, y down, z forward), linear_acceleration (N, 3) m/s^2."""

    t: np.ndarray
    angular_velocity: np.ndarray
    linear_acceleration: np.ndarray

    def __len__(self) -> int:
        return len(self.t)


@dataclass
class Poses:
    """Camera poses: t (int64 ns, N), position (N, 3) m, orientation (N, 4) unit quaternion
    (qx, qy, qz, qw) of the camera frame in the world frame, as in ``groundtruth.txt``."""

    t: np.ndarray
    position: np.ndarray
    orientation: np.ndarray

    def __len__(self) -> int:
        return len(self.t)


@dataclass
class Recording:
    """Events with calibration and optional ground truth.

    depth_maps: optional (t int64 ns of shape M, depth (M, height, width) m) for
    simulated scenes with depth. simulation: for a simulated sequence, what simulated it
    (``simulator``, ``preset``, ``seed``, ``camera``, ``width``, ``height`` px, the sensor
    settings, ...; see :func:`simulation_to_text`), else None.
    """

    events: Events
    calibration: Calibration | None = None
    imu: ImuSamples | None = None
    poses: Poses | None = None
    depth_times: np.ndarray | None = None
    depth_maps: np.ndarray | None = None
    simulation: dict | None = None


def simulation_to_text(simulation: dict) -> str:
    """The simulation record as YAML text (the ECD folder's ``simulation.yaml``, the bag's
    simulation message): plain keys and numbers, one per line."""
    import yaml

    return yaml.safe_dump(dict(simulation), sort_keys=False)


def simulation_from_text(text: str, where: str) -> dict:
    """The simulation record from :func:`simulation_to_text`'s YAML; ValueError naming ``where``
    when it is not a mapping that names its simulator."""
    import yaml

    try:
        content = yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise ValueError(f"{where}: not valid YAML ({str(error).splitlines()[0]})") from None
    if not isinstance(content, dict) or "simulator" not in content:
        raise ValueError(f"{where}: expected a mapping with a 'simulator' key (what simulated the sequence)")
    return content


def save_npz(recording: Recording, path) -> None:
    """A recording with its calibration, poses and depth maps as one .npz file (a cache of
    simulated sequences: fast to write and read, where the ECD text files are slow); IMU and the
    simulation record are not kept."""
    calibration, events = recording.calibration, recording.events
    arrays = dict(x=events.x, y=events.y, t=events.t, p=events.p)
    if calibration is not None:
        arrays["calibration"] = np.array([calibration.width, calibration.height, calibration.fx, calibration.fy,
                                          calibration.cx, calibration.cy, *calibration.distortion], np.float64)
    if recording.poses is not None:
        arrays.update(pose_t=recording.poses.t, position=recording.poses.position,
                      orientation=recording.poses.orientation)
    if recording.depth_maps is not None:
        arrays.update(depth_times=recording.depth_times, depth_maps=recording.depth_maps)
    np.savez(path, **arrays)


def load_npz(path) -> Recording:
    """The recording :func:`save_npz` wrote."""
    data = np.load(path)
    calibration = None
    if "calibration" in data:
        values = data["calibration"]
        calibration = Calibration(int(values[0]), int(values[1]), *map(float, values[2:6]),
                                  distortion=tuple(map(float, values[6:])))
    poses = Poses(data["pose_t"], data["position"], data["orientation"]) if "pose_t" in data else None
    depth = (data["depth_times"], data["depth_maps"]) if "depth_maps" in data else (None, None)
    return Recording(Events(data["x"], data["y"], data["t"], data["p"]), calibration, poses=poses,
                     depth_times=depth[0], depth_maps=depth[1])
