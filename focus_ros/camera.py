"""Camera model: pinhole with radial-tangential distortion, in the dataset's order.

Calibration parameters follow the Event Camera Dataset's ``calib.txt``
(``fx fy cx cy k1 k2 p1 p2 k3``, OpenCV's order); focal lengths and principal point in
px, distortion coefficients dimensionless.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

#: DAVIS240C calibration of the Event Camera Dataset's rotation sequences.
DAVIS240C = dict(width=240, height=180, fx=199.092366542, fy=198.82882047,
                 cx=132.192071378, cy=110.712660011,
                 distortion=(-0.368436311798, 0.150947243557, -0.000296130534385,
                             -0.000759431726241, 0.0))


@dataclass(frozen=True)
class Calibration:
    """Intrinsics of one event camera.

    width, height: sensor size in px; fx, fy, cx, cy in px;
    distortion: (k1, k2, p1, p2, k3), radial-tangential (plumb bob).
    """

    width: int
    height: int
    fx: float
    fy: float
    cx: float
    cy: float
    distortion: tuple = field(default=(0.0, 0.0, 0.0, 0.0, 0.0))

    @classmethod
    def davis240c(cls) -> "Calibration":
        """The DAVIS240C calibration of the dataset's rotation sequences."""
        return cls(**DAVIS240C)

    @classmethod
    def from_ecd_calib(cls, path, width: int = 240, height: int = 180) -> "Calibration":
        """Read an Event Camera Dataset ``calib.txt`` (one line: fx fy cx cy k1 k2 p1 p2 k3).

        The file does not store the sensor size: give it (default DAVIS240C, 240x180 px).
        Raises FileNotFoundError or ValueError naming the file.
        """
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"calibration file not found: {path}")
        words = path.read_text().split()
        try:
            values = [float(w) for w in words]
        except ValueError:
            raise ValueError(f"{path}: calibration must be numbers 'fx fy cx cy k1 k2 p1 p2 k3'") from None
        if len(values) not in (4, 8, 9):
            raise ValueError(f"{path}: expected 4, 8 or 9 numbers (fx fy cx cy [k1 k2 p1 p2 [k3]]), "
                             f"found {len(values)}")
        distortion = tuple(values[4:]) + (0.0,) * (9 - len(values))
        return cls(width, height, *values[:4], distortion=distortion)

    def to_ecd_line(self) -> str:
        """The ``calib.txt`` line for this calibration."""
        return " ".join(repr(float(v)) for v in (self.fx, self.fy, self.cx, self.cy, *self.distortion))

    @property
    def camera_matrix(self) -> np.ndarray:
        """The 3x3 intrinsic matrix K (px)."""
        return np.array([[self.fx, 0.0, self.cx], [0.0, self.fy, self.cy], [0.0, 0.0, 1.0]])
