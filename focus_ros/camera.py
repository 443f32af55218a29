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


#: the smallest sensor side (px) a calibration may have: a quarter of the smallest event camera
#: sold (the DVS128, 128 px); fewer is a placeholder (1x1 from a driver that does not know its
#: sensor), not a camera
MIN_SENSOR_SIDE_PX = 32
#: the field of view (deg, along each sensor side, pinhole) a calibration's focal length may
#: give: from a long telephoto lens (a few degrees) to a wide lens still modelled as a pinhole
#: with plumb-bob distortion (well below 180); outside, fx or fy is in the wrong unit or wrong
FIELD_OF_VIEW_RANGE_DEG = (1.0, 170.0)


@dataclass(frozen=True)
class Calibration:
    """Intrinsics of one event camera.

    width, height: sensor size in px; fx, fy, cx, cy in px;
    distortion: (k1, k2, p1, p2, k3), radial-tangential (plumb bob).
    Built from outside data (camera_info, files, parameters) through the ``from_*``
    constructors, which refuse an implausible calibration (:meth:`validate`).
    """

    width: int
    height: int
    fx: float
    fy: float
    cx: float
    cy: float
    distortion: tuple = field(default=(0.0, 0.0, 0.0, 0.0, 0.0))

    def validate(self) -> "Calibration":
        """This calibration if it can be a real camera's; ValueError naming the first problem:
        a number that is not finite (NaN, inf), a sensor side under :data:`MIN_SENSOR_SIDE_PX`,
        a focal length (px) whose field of view along its side lies outside
        :data:`FIELD_OF_VIEW_RANGE_DEG` (this includes fx, fy <= 0), a principal point (px)
        outside the sensor. Such a calibration makes every window degenerate: refusing it
        keeps the node waiting for a usable one and says why."""
        numbers = dict(fx=self.fx, fy=self.fy, cx=self.cx, cy=self.cy)
        numbers.update(zip(("k1", "k2", "p1", "p2", "k3"), self.distortion))
        not_finite = [f"{name} {value}" for name, value in numbers.items() if not np.isfinite(value)]
        if not_finite:
            raise ValueError(f"calibration has non-finite values: {', '.join(not_finite)}")
        if min(self.width, self.height) < MIN_SENSOR_SIDE_PX:
            raise ValueError(f"calibration size {self.width}x{self.height} px is not a sensor's "
                             f"(each side at least {MIN_SENSOR_SIDE_PX} px)")
        if self.fx <= 0 or self.fy <= 0:
            raise ValueError(f"calibration has non-positive focal length: fx {self.fx}, fy {self.fy}")
        low, high = FIELD_OF_VIEW_RANGE_DEG
        for name, focal, side in (("fx", self.fx, self.width), ("fy", self.fy, self.height)):
            field_of_view_deg = float(np.degrees(2 * np.arctan(side / 2 / focal)))
            if not low <= field_of_view_deg <= high:
                raise ValueError(f"calibration {name} {focal:g} px gives a {field_of_view_deg:.3g} deg field of view "
                                 f"over {side} px, outside the {low:g}-{high:g} deg of a real lens")
        if not (0 <= self.cx <= self.width and 0 <= self.cy <= self.height):
            raise ValueError(f"calibration principal point ({self.cx:g}, {self.cy:g}) px lies outside the "
                             f"{self.width}x{self.height} px sensor")
        return self

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
        try:
            return cls(width, height, *values[:4], distortion=distortion).validate()
        except ValueError as error:
            raise ValueError(f"{path}: {error}") from None

    @classmethod
    def from_file(cls, path, width: int = 240, height: int = 180) -> "Calibration":
        """A ROS camera YAML (.yaml/.yml) or an ECD calib.txt (then width x height px)."""
        path = Path(path)
        if path.suffix.lower() in (".yaml", ".yml"):
            return cls.from_yaml(path)
        return cls.from_ecd_calib(path, width=width, height=height)

    def to_ecd_line(self) -> str:
        """The ``calib.txt`` line for this calibration."""
        return " ".join(repr(float(v)) for v in (self.fx, self.fy, self.cx, self.cy, *self.distortion))

    @property
    def camera_matrix(self) -> np.ndarray:
        """The 3x3 intrinsic matrix K (px)."""
        return np.array([[self.fx, 0.0, self.cx], [0.0, self.fy, self.cy], [0.0, 0.0, 1.0]])

    # ------------------------------------------------------------------ extensions

    @classmethod
    def from_camera_info(cls, k, d, width: int, height: int) -> "Calibration":
        """Build from a ROS ``sensor_msgs/CameraInfo``: k (9 numbers, row-major K in px),
        d (plumb-bob distortion k1 k2 p1 p2 [k3]; shorter lists are zero-padded). ValueError
        when malformed or implausible (:meth:`validate`)."""
        k = [float(v) for v in k]
        if len(k) != 9:
            raise ValueError(f"camera_info K must have 9 numbers, found {len(k)}")
        d = [float(v) for v in d]
        if len(d) > 5:
            if any(v != 0.0 for v in d[5:]):
                raise ValueError(f"camera_info D has {len(d)} coefficients: only plumb_bob "
                                 "(k1 k2 p1 p2 k3) is supported")
            d = d[:5]
        if int(width) <= 0 or int(height) <= 0:
            raise ValueError(f"camera_info size must be positive, got {width}x{height}")
        distortion = tuple(d) + (0.0,) * (5 - len(d))
        return cls(int(width), int(height), k[0], k[4], k[2], k[5], distortion=distortion).validate()

    @classmethod
    def from_camera_info_message(cls, message) -> "Calibration":
        """Build from a ``sensor_msgs/CameraInfo`` message object, ROS 2 (k, d) or ROS 1
        (K, D) field names. Distortion models: plumb_bob (or radtan), rational_polynomial
        whose terms beyond k3 are zero, or none ("" with no coefficients). ValueError else."""
        ros1 = hasattr(message, "K")
        d = [float(v) for v in (message.D if ros1 else message.d)]
        model = message.distortion_model
        if model not in ("plumb_bob", "radtan", "rational_polynomial", "") or (model == "" and any(d)):
            raise ValueError(f"camera_info distortion model {model!r} is not supported (plumb_bob)")
        return cls.from_camera_info(message.K if ros1 else message.k, d, message.width, message.height)

    @classmethod
    def from_yaml(cls, path) -> "Calibration":
        """Read a ROS camera-calibration YAML file (the ``camera_calibration_parsers``
        layout: image_width, image_height, camera_matrix.data, distortion_coefficients.data).

        Raises FileNotFoundError or ValueError naming the file and the missing key.
        """
        import yaml

        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"calibration file not found: {path}")
        try:
            content = yaml.safe_load(path.read_text())
        except yaml.YAMLError as error:
            raise ValueError(f"{path}: not valid YAML ({str(error).splitlines()[0]})") from None
        if not isinstance(content, dict):
            raise ValueError(f"{path}: expected a mapping with image_width, image_height, camera_matrix")
        for key in ("image_width", "image_height", "camera_matrix"):
            if key not in content:
                raise ValueError(f"{path}: missing key '{key}'")
        model = content.get("distortion_model", "plumb_bob")
        if model not in ("plumb_bob", "radtan", "radial-tangential"):
            raise ValueError(f"{path}: distortion_model '{model}' is not supported (plumb_bob only)")
        try:
            k = content["camera_matrix"]["data"]
            d = (content.get("distortion_coefficients") or {}).get("data", [])
            return cls.from_camera_info(k, d, content["image_width"], content["image_height"])
        except (TypeError, KeyError) as error:
            raise ValueError(f"{path}: malformed camera_matrix/distortion_coefficients ({error})") from None
        except ValueError as error:
            raise ValueError(f"{path}: {error}") from None

    def to_yaml(self, path=None, camera_name: str = "event_camera") -> str:
        """The calibration as ROS camera-calibration YAML; written to ``path`` if given."""
        import yaml

        k = self.camera_matrix.ravel().tolist()
        content = {
            "image_width": int(self.width),
            "image_height": int(self.height),
            "camera_name": camera_name,
            "camera_matrix": {"rows": 3, "cols": 3, "data": k},
            "distortion_model": "plumb_bob",
            "distortion_coefficients": {"rows": 1, "cols": 5,
                                        "data": [float(v) for v in self.distortion]},
        }
        text = yaml.safe_dump(content, sort_keys=False)
        if path is not None:
            Path(path).write_text(text)
        return text

    def distort(self, normalized: np.ndarray) -> np.ndarray:
        """Apply the radial-tangential distortion to normalized coordinates (..., 2)
        (x/z, y/z, dimensionless); returns distorted normalized coordinates (OpenCV model)."""
        k1, k2, p1, p2, k3 = self.distortion
        x = normalized[..., 0]
        y = normalized[..., 1]
        r2 = x * x + y * y
        radial = 1.0 + r2 * (k1 + r2 * (k2 + r2 * k3))
        xd = x * radial + 2.0 * p1 * x * y + p2 * (r2 + 2.0 * x * x)
        yd = y * radial + p1 * (r2 + 2.0 * y * y) + 2.0 * p2 * x * y
        return np.stack([xd, yd], axis=-1)

    def project(self, points: np.ndarray, distort: bool = True) -> np.ndarray:
        """Project 3-D points (..., 3) in the camera frame (x right, y down, z forward)
        to pixels (..., 2) (px). With ``distort=False`` the pinhole alone (the undistorted
        image plane where images of warped events live)."""
        points = np.asarray(points, dtype=np.float64)
        normalized = points[..., :2] / points[..., 2:3]
        if distort:
            normalized = self.distort(normalized)
        return np.stack([self.fx * normalized[..., 0] + self.cx,
                         self.fy * normalized[..., 1] + self.cy], axis=-1)

    def undistort_pixels(self, pixels: np.ndarray, iterations: int = 20) -> np.ndarray:
        """Undistorted normalized coordinates (x/z, y/z) of distorted pixels (..., 2) (px).

        Starts from OpenCV's ``undistortPoints`` and refines with Gauss-Newton on the
        distortion model, so that ``distort`` maps the result back to the pixel within
        about 1e-9 px even in the corners of strongly distorted lenses.
        """
        import cv2

        pixels = np.asarray(pixels, dtype=np.float64)
        shape = pixels.shape
        flat = pixels.reshape(-1, 1, 2)
        normalized = cv2.undistortPoints(flat, self.camera_matrix,
                                         np.asarray(self.distortion, dtype=np.float64)).reshape(-1, 2)
        target = np.stack([(flat[:, 0, 0] - self.cx) / self.fx,
                           (flat[:, 0, 1] - self.cy) / self.fy], axis=-1)
        step = 1e-7
        for _ in range(iterations):
            residual = self.distort(normalized) - target
            if np.max(np.abs(residual)) < 1e-13:
                break
            # 2x2 Jacobian of the distortion, by central differences (smooth polynomial)
            dx = (self.distort(normalized + [step, 0.0]) - self.distort(normalized - [step, 0.0])) / (2 * step)
            dy = (self.distort(normalized + [0.0, step]) - self.distort(normalized - [0.0, step])) / (2 * step)
            determinant = dx[:, 0] * dy[:, 1] - dy[:, 0] * dx[:, 1]
            normalized = normalized - np.stack(
                [(dy[:, 1] * residual[:, 0] - dy[:, 0] * residual[:, 1]) / determinant,
                 (-dx[:, 1] * residual[:, 0] + dx[:, 0] * residual[:, 1]) / determinant], axis=-1)
        return normalized.reshape(shape)

    def bearing_lut(self) -> np.ndarray:
        """Undistorted normalized coordinates (x/z, y/z) of every pixel: (height, width, 2)
        float64, C-contiguous. Entry [y, x] is the bearing (x/z, y/z, 1) of pixel (x, y).

        Computed once per calibration (cached) so that events are undistorted by a
        table look-up, not per event per iteration.
        """
        cached = _BEARING_LUT_CACHE.get(self)
        if cached is None:
            columns, rows = np.meshgrid(np.arange(self.width, dtype=np.float64),
                                        np.arange(self.height, dtype=np.float64))
            cached = np.ascontiguousarray(self.undistort_pixels(np.stack([columns, rows], axis=-1)))
            cached.setflags(write=False)
            _BEARING_LUT_CACHE[self] = cached
        return cached



@dataclass(frozen=True)
class SensorModel:
    """An event camera people own, as focus_ros needs to know it.

    name: the key in :data:`SENSORS`; description: the product;
    lens: a :class:`Calibration` typical of the lens sold with the camera (its size in px,
    intrinsics and distortion: a stand-in for simulation and for defaults, never a substitute
    for the user's own calibration);
    driver, encoding: the ROS 2 driver users run with it and the event encoding it publishes
    (``event_message_type`` and ``encoding`` in focus_ros's tables);
    typical_rate_mev_s: the event rate (Mev/s) of brisk hand-held motion in an office;
    peak_rate_mev_s: the rate its driver reports at most (flicker, fast motion).
    """

    name: str
    description: str
    lens: Calibration
    driver: str
    encoding: str
    typical_rate_mev_s: float
    peak_rate_mev_s: float

    @property
    def width(self) -> int:
        """Sensor width (px)."""
        return self.lens.width

    @property
    def height(self) -> int:
        """Sensor height (px)."""
        return self.lens.height

    @property
    def pixels(self) -> int:
        """Number of pixels."""
        return self.width * self.height

    def calibration(self) -> Calibration:
        """The sensor's typical :class:`Calibration`."""
        return self.lens


#: the sensors focus_ros has presets for (simulation, configuration files, defaults), by name.
#: DAVIS240C: the Event Camera Dataset's calibration. DAVIS346 (18.5 um pixels) and DVXplorer
#: (9 um) with the 4.5 mm and 4 mm lenses iniVation ships; IMX636 (Prophesee EVK4 HD, 4.86 um)
#: with a 4.3 mm lens; all with a mild barrel distortion.
SENSORS = {
    "davis240c": SensorModel("davis240c", "iniVation DAVIS240C (240x180), Event Camera Dataset calibration",
                             Calibration(**DAVIS240C), "libcaer_driver", "libcaer_cmp", 1.0, 12.0),
    "davis346": SensorModel("davis346", "iniVation DAVIS346 (346x260), 4.5 mm lens",
                            Calibration(346, 260, 243.0, 243.0, 173.0, 130.0, (-0.25, 0.08, 0.0, 0.0, 0.0)),
                            "libcaer_driver", "libcaer_cmp", 3.0, 12.0),
    "dvxplorer": SensorModel("dvxplorer", "iniVation DVXplorer (640x480), 4 mm lens",
                             Calibration(640, 480, 444.0, 444.0, 320.0, 240.0, (-0.2, 0.05, 0.0, 0.0, 0.0)),
                             "libcaer_driver", "libcaer_cmp", 10.0, 145.0),
    "imx636": SensorModel("imx636", "Prophesee IMX636 / EVK4 HD (1280x720), 4.3 mm lens",
                          Calibration(1280, 720, 880.0, 880.0, 640.0, 360.0, (-0.1, 0.02, 0.0, 0.0, 0.0)),
                          "metavision_driver", "evt3", 15.0, 50.0),
}


def sensor_model(name: str) -> SensorModel:
    """The :data:`SENSORS` entry of ``name``; ValueError listing the known ones otherwise."""
    if name not in SENSORS:
        raise ValueError(f"unknown sensor {name!r}; choose one of {', '.join(SENSORS)}")
    return SENSORS[name]


def sensor_of_size(width: int, height: int) -> SensorModel | None:
    """The :data:`SENSORS` entry with this size (px), or None (a sensor without a preset)."""
    return next((sensor for sensor in SENSORS.values() if (sensor.width, sensor.height) == (width, height)), None)

#: bearing look-up tables by calibration (Calibration is frozen, hence hashable)
_BEARING_LUT_CACHE: dict = {}
