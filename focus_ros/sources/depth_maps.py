"""Depth ground truth beside the events: what a depth map is, and the maps of a sequence in memory.

What a depth map is
-------------------
A float32 array (height, width) for one time t (int64 ns, the events' clock): at pixel
(u, v) = (column, row) of the **distorted sensor image** (the pixel grid of the events),
the depth of the surface that pixel sees, in **metres along the optical axis** (z in the
camera frame, x right, y down, z forward; not the distance along the ray); ``+inf`` where
the ray hits nothing, NaN where unknown (REP-117). The camera pose at t is the recording's
pose at t (``groundtruth.txt`` / the pose topic), so a pixel with bearing (x, y, 1) and
depth Z is the camera-frame point Z·(x, y, 1).

Formats (each reader/writer owns its form)
------------------------------------------
- **Event Camera Dataset folder** (:mod:`focus_ros.sources.ecd`): ``depthmaps.txt`` beside
  ``events.txt``, laid out like the dataset's ``images.txt``: one line
  ``t depthmaps/depth_00000000.npy`` per map (t in decimal seconds with 9 decimals), each file
  a float32 (height, width) ``.npy`` (``write_depth_folder``, ``read_depth_folder``).
- **Bags** (:mod:`focus_ros.sources.bags`): ``sensor_msgs/Image`` messages with encoding
  ``32FC1`` (REP-118), header stamp = the map's time, on topic ``/dvs/depthmap``
  (``DEPTH_TOPIC``; ``depth_image_message``, ``depth_from_image_message``).

:class:`DepthGroundTruth` holds the maps of a sequence; :meth:`DepthGroundTruth.at` gives the
map at a time. ``focus_ros.sources.sequence.read_depth_ground_truth`` reads it from a folder or
a bag.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


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
