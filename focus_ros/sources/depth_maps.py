"""Depth ground truth beside the events: per-time depth maps, written and read back.

What a depth map is
-------------------
A float32 array (height, width) for one time t (int64 ns, the events' clock): at pixel
(u, v) = (column, row) of the **distorted sensor image** (the pixel grid of the events),
the depth of the surface that pixel sees, in **metres along the optical axis** (z in the
camera frame, x right, y down, z forward; not the distance along the ray); ``+inf`` where
the ray hits nothing, NaN where unknown (REP-117). The camera pose at t is the recording's
pose at t (``groundtruth.txt`` / the pose topic), so a pixel with bearing (x, y, 1) and
depth Z is the camera-frame point Z·(x, y, 1).

Formats
-------
- **Event Camera Dataset folder**: ``depthmaps.txt`` beside ``events.txt``, laid out like the
  dataset's ``images.txt``: one line ``t depthmaps/depth_00000000.npy`` per map (t in decimal
  seconds with 9 decimals), each file a float32 (height, width) ``.npy``
  (:func:`write_depth_folder`, :func:`read_depth_folder`).
- **Bags**: ``sensor_msgs/Image`` messages with encoding ``32FC1`` (REP-118), header stamp =
  the map's time, on topic ``/dvs/depthmap`` (:data:`DEPTH_TOPIC`; :func:`depth_image_message`,
  :func:`depth_from_image_message`; :mod:`focus_ros.sources.bags` reads and writes them).

:class:`DepthGroundTruth` holds the maps of a sequence; :meth:`DepthGroundTruth.at` gives the
map at a time. :func:`read_depth_ground_truth` reads it from a folder or a bag.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

DEPTH_LIST_FILE = "depthmaps.txt"
DEPTH_FOLDER = "depthmaps"
DEPTH_TOPIC = "/dvs/depthmap"
IMAGE_TYPE = "sensor_msgs/msg/Image"
DEPTH_ENCODING = "32FC1"


@dataclass
class DepthGroundTruth:
    """Depth maps of a sequence: t (int64 ns, shape M, increasing), depth_m (M, height, width)
    float32, metres along the optical axis (module docstring)."""

    t: np.ndarray
    depth_m: np.ndarray

    def __post_init__(self):
        self.t = np.asarray(self.t, np.int64)
        self.depth_m = np.asarray(self.depth_m, np.float32)
        if self.depth_m.ndim != 3 or len(self.t) != len(self.depth_m):
            raise ValueError(f"depth ground truth needs times (M,) and maps (M, height, width), got "
                             f"{self.t.shape} and {self.depth_m.shape}")
        if len(self.t) > 1 and np.any(np.diff(self.t) <= 0):
            raise ValueError("depth map times must increase strictly")

    def __len__(self) -> int:
        return len(self.t)

    @classmethod
    def from_recording(cls, recording) -> "DepthGroundTruth | None":
        """The recording's depth maps, or None when it has none."""
        if recording.depth_maps is None or recording.depth_times is None:
            return None
        return cls(recording.depth_times, recording.depth_maps)

    def nearest_index(self, t_ns: int) -> int:
        """Index of the map nearest in time to t_ns."""
        if not len(self.t):
            raise ValueError("no depth maps")
        index = int(np.searchsorted(self.t, t_ns))
        candidates = [i for i in (index - 1, index) if 0 <= i < len(self.t)]
        return min(candidates, key=lambda i: abs(int(self.t[i]) - int(t_ns)))

    def at(self, t_ns: int, tolerance_ns: int = 1_000_000) -> np.ndarray:
        """The depth map (height, width, m) at t_ns: the nearest map, which must lie within
        tolerance_ns (default 1 ms) of t_ns. The camera moves between maps, so maps are not
        interpolated: choose reference times at map times (:attr:`t`). ValueError otherwise."""
        index = self.nearest_index(t_ns)
        gap = abs(int(self.t[index]) - int(t_ns))
        if gap > tolerance_ns:
            raise ValueError(f"no depth map within {tolerance_ns / 1e6:g} ms of t = {t_ns / 1e9:.6f} s "
                             f"(nearest at {self.t[index] / 1e9:.6f} s; maps span "
                             f"{self.t[0] / 1e9:.6f}-{self.t[-1] / 1e9:.6f} s)")
        return self.depth_m[index]


# ---------------------------------------------------------------------------------------- ECD folders


def write_depth_folder(folder, t_ns: np.ndarray, depth_m: np.ndarray) -> None:
    """Write ``folder/depthmaps.txt`` and ``folder/depthmaps/depth_%08d.npy`` (float32 maps)."""
    from focus_ros.sources.ecd import ns_to_seconds_text

    truth = DepthGroundTruth(t_ns, depth_m)
    folder = Path(folder)
    (folder / DEPTH_FOLDER).mkdir(parents=True, exist_ok=True)
    lines = []
    for index, (time_ns, depth) in enumerate(zip(truth.t.tolist(), truth.depth_m)):
        name = f"{DEPTH_FOLDER}/depth_{index:08d}.npy"
        np.save(folder / name, np.ascontiguousarray(depth, np.float32))
        lines.append(f"{ns_to_seconds_text(time_ns)} {name}\n")
    (folder / DEPTH_LIST_FILE).write_text("".join(lines))


def read_depth_folder(folder) -> DepthGroundTruth:
    """Read ``folder/depthmaps.txt`` and the maps it lists. FileNotFoundError / ValueError
    naming the file and line when something is missing or malformed."""
    from focus_ros.sources.ecd import seconds_text_to_ns

    folder = Path(folder)
    listing = folder / DEPTH_LIST_FILE
    if not listing.is_file():
        raise FileNotFoundError(f"depth ground truth not found: {listing}")
    times, maps = [], []
    for line_number, line in enumerate(listing.read_text().splitlines(), start=1):
        words = line.split()
        if not words or words[0].startswith("#"):
            continue
        if len(words) != 2:
            raise ValueError(f"{listing}: line {line_number}: expected 't path', got {line.strip()!r}")
        try:
            t = seconds_text_to_ns(words[0])
        except ValueError:
            raise ValueError(f"{listing}: line {line_number}: not a time in seconds: {words[0]!r}") from None
        path = folder / words[1]
        if not path.is_file():
            raise FileNotFoundError(f"{listing}: line {line_number}: depth map not found: {path}")
        depth = np.load(path, allow_pickle=False)
        if depth.ndim != 2 or (maps and depth.shape != maps[0].shape):
            raise ValueError(f"{path}: a depth map must be 2-D like the others, got shape {depth.shape}")
        if times and t <= times[-1]:
            raise ValueError(f"{listing}: line {line_number}: time does not increase")
        times.append(t)
        maps.append(depth.astype(np.float32, copy=False))
    if not maps:
        raise ValueError(f"{listing}: no depth maps listed")
    return DepthGroundTruth(np.array(times, np.int64), np.stack(maps))


# ---------------------------------------------------------------------------------------- bags


def depth_image_message(store, t_ns: int, depth_m: np.ndarray, frame_id: str, ros_version: int = 2):
    """A sensor_msgs/Image (32FC1, little endian, REP-118) of a depth map, for rosbags' typestore."""
    from focus_ros.sources.bags import _header

    depth = np.ascontiguousarray(depth_m, dtype="<f4")
    height, width = depth.shape
    return store.types[IMAGE_TYPE](header=_header(store, t_ns, frame_id, ros_version), height=height,
                                   width=width, encoding=DEPTH_ENCODING, is_bigendian=0, step=4 * width,
                                   data=depth.view(np.uint8).ravel())


def depth_from_image_message(message, where: str = DEPTH_TOPIC) -> tuple[int, np.ndarray]:
    """(t ns, depth (height, width) float32 m) from a 32FC1 sensor_msgs/Image; ValueError naming
    ``where`` for another encoding or a size that does not add up."""
    if message.encoding != DEPTH_ENCODING:
        raise ValueError(f"{where}: depth images must be {DEPTH_ENCODING}, got {message.encoding!r}")
    height, width, step = int(message.height), int(message.width), int(message.step)
    data = np.asarray(message.data, np.uint8)
    if step < 4 * width or len(data) < step * height:
        raise ValueError(f"{where}: image of {width}x{height} px with step {step} needs {step * height} "
                         f"bytes, got {len(data)}")
    rows = data[:step * height].reshape(height, step)[:, :4 * width]
    depth = np.ascontiguousarray(rows).view(">f4" if message.is_bigendian else "<f4").reshape(height, width)
    stamp = message.header.stamp
    return int(stamp.sec) * 1_000_000_000 + int(stamp.nanosec), depth.astype(np.float32)


# ---------------------------------------------------------------------------------------- any sequence


def read_depth_ground_truth(path) -> DepthGroundTruth | None:
    """The depth ground truth of a sequence (ECD folder or bag), or None when it has none."""
    from focus_ros.sources.sequence import ECD, sequence_format

    path = Path(path)
    if sequence_format(path) == ECD:
        folder = path if path.is_dir() else path.parent
        return read_depth_folder(folder) if (folder / DEPTH_LIST_FILE).is_file() else None
    from focus_ros.sources.bags import read_bag_depth
    return read_bag_depth(path)
