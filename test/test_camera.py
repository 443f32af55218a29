"""Camera model: bearing LUT, projection, camera_info / YAML round trips."""

import cv2
import numpy as np
import pytest

from focus_ros.camera import Calibration


def test_bearing_lut_reprojects_to_every_pixel():
    calibration = Calibration.davis240c()
    lut = calibration.bearing_lut()
    assert lut.shape == (180, 240, 2) and lut.dtype == np.float64
    bearings = np.concatenate([lut, np.ones((180, 240, 1))], axis=-1)
    pixels = calibration.project(bearings, distort=True)
    columns, rows = np.meshgrid(np.arange(240.0), np.arange(180.0))
    assert np.max(np.abs(pixels[..., 0] - columns)) < 1e-9
    assert np.max(np.abs(pixels[..., 1] - rows)) < 1e-9


def test_projection_matches_opencv():
    calibration = Calibration.davis240c()
    rng = np.random.default_rng(1)
    points = np.column_stack([rng.uniform(-0.6, 0.6, 50), rng.uniform(-0.4, 0.4, 50), np.ones(50)]) * 2.0
    expected, _ = cv2.projectPoints(points, np.zeros(3), np.zeros(3), calibration.camera_matrix,
                                    np.array(calibration.distortion))
    assert np.allclose(calibration.project(points), expected.reshape(-1, 2), atol=1e-9)
    undistorted = calibration.project(points, distort=False)
    assert np.allclose(undistorted[:, 0], calibration.fx * points[:, 0] / points[:, 2] + calibration.cx)


def test_camera_info_and_yaml_round_trip(tmp_path):
    calibration = Calibration.davis240c()
    k = calibration.camera_matrix.ravel()
    again = Calibration.from_camera_info(k, calibration.distortion, 240, 180)
    assert again == calibration
    path = tmp_path / "camera.yaml"
    calibration.to_yaml(path)
    assert Calibration.from_yaml(path) == calibration


def test_bad_calibration_files_name_the_problem(tmp_path):
    with pytest.raises(FileNotFoundError, match="missing.yaml"):
        Calibration.from_yaml(tmp_path / "missing.yaml")
    broken = tmp_path / "broken.yaml"
    broken.write_text("image_width: 240\nimage_height: 180\n")
    with pytest.raises(ValueError, match="camera_matrix"):
        Calibration.from_yaml(broken)
    with pytest.raises(ValueError, match="9 numbers"):
        Calibration.from_camera_info([1, 2, 3], [], 240, 180)


def test_camera_info_messages_ros2_and_ros1_field_names_and_models():
    """One conversion serves the node (ROS 2 CameraInfo) and the bag readers (ROS 1 too)."""
    from types import SimpleNamespace

    calibration = Calibration.davis240c()
    k = [calibration.fx, 0, calibration.cx, 0, calibration.fy, calibration.cy, 0, 0, 1]
    ros2 = SimpleNamespace(k=k, d=list(calibration.distortion), width=240, height=180,
                           distortion_model="plumb_bob")
    ros1 = SimpleNamespace(K=k, D=list(calibration.distortion), width=240, height=180,
                           distortion_model="plumb_bob")
    assert Calibration.from_camera_info_message(ros2) == calibration
    assert Calibration.from_camera_info_message(ros1) == calibration
    eight = SimpleNamespace(k=k, d=list(calibration.distortion) + [0.01, 0, 0], width=240, height=180,
                            distortion_model="rational_polynomial")
    with pytest.raises(ValueError, match="only plumb_bob"):
        Calibration.from_camera_info_message(eight)
    with pytest.raises(ValueError, match="'equidistant' is not supported"):
        Calibration.from_camera_info_message(SimpleNamespace(**{**vars(ros2), "distortion_model": "equidistant"}))
    with pytest.raises(ValueError, match="size must be positive"):
        Calibration.from_camera_info_message(SimpleNamespace(**{**vars(ros2), "width": 0}))


def test_sensor_presets_are_usable_cameras():
    """Every sensor preset has a calibration whose horizontal field of view is a real lens's
    (40-100 degrees), whose principal point lies inside the sensor, whose distortion keeps the
    corners' bearings monotonic (no fold-over), and is found again by its size."""
    from focus_ros.camera import SENSORS, sensor_model, sensor_of_size

    assert {"davis240c", "davis346", "dvxplorer", "imx636"} <= set(SENSORS)
    for name, sensor in SENSORS.items():
        calibration = sensor.calibration()
        field_of_view_deg = np.degrees(2 * np.arctan(calibration.width / 2 / calibration.fx))
        assert 40 < field_of_view_deg < 100, name
        assert 0 < calibration.cx < calibration.width and 0 < calibration.cy < calibration.height, name
        bearings = calibration.bearing_lut()
        assert np.all(np.diff(bearings[calibration.height // 2, :, 0]) > 0), name
        assert np.all(np.diff(bearings[:, calibration.width // 2, 1]) > 0), name
        assert sensor_model(name) is sensor
        assert sensor_of_size(sensor.width, sensor.height) is sensor
    assert sensor_of_size(100, 100) is None
    with pytest.raises(ValueError, match="unknown sensor 'davis999'"):
        sensor_model("davis999")


@pytest.mark.parametrize("change, words", [
    (dict(fx=float("nan")), "non-finite values: fx nan"),
    (dict(cy=float("inf")), "non-finite values: cy inf"),
    (dict(k1=float("nan")), "non-finite values: k1 nan"),
    (dict(width=1, height=1), "size 1x1 px is not a sensor's"),
    (dict(fx=0.0), "non-positive focal length"),
    (dict(fy=-5.0), "non-positive focal length"),
    (dict(fx=1e5), "fx 100000 px gives a 0.138 deg field of view over 240 px"),
    (dict(fy=0.5), "fy 0.5 px gives a 179 deg field of view over 180 px"),
    (dict(cx=-500.0), "principal point (-500, 110.713) px lies outside"),
])
def test_implausible_calibrations_are_refused_with_the_reason(change, words):
    """camera_info (ROS 2 message fields), a camera YAML and a calib.txt with NaN, inf, a 1x1
    size, a focal length far outside a real lens's field of view or the principal point off
    the sensor: each is refused with a ValueError naming the problem."""
    import re
    from types import SimpleNamespace

    values = dict(vars(Calibration.davis240c()))
    k1, k2, p1, p2, k3 = values.pop("distortion")
    values.update(k1=k1, k2=k2, p1=p1, p2=p2, k3=k3)
    values.update(change)
    k = [values["fx"], 0, values["cx"], 0, values["fy"], values["cy"], 0, 0, 1]
    d = [values[name] for name in ("k1", "k2", "p1", "p2", "k3")]
    message = SimpleNamespace(k=k, d=d, width=values["width"], height=values["height"], distortion_model="plumb_bob")
    with pytest.raises(ValueError, match=re.escape(words)):
        Calibration.from_camera_info_message(message)
    with pytest.raises(ValueError, match=re.escape(words)):
        Calibration(values["width"], values["height"], values["fx"], values["fy"], values["cx"], values["cy"],
                    tuple(d)).validate()


def test_implausible_calibration_files_and_parameters_are_refused(tmp_path):
    """The same checks on a calib.txt and on the nodes' calibration.* parameters; every sensor
    preset and a long (2 deg) and a wide (150 deg) lens pass."""
    from focus_ros.camera import SENSORS
    from focus_ros.ros.messages import calibration_from_parameters

    calib = tmp_path / "calib.txt"
    calib.write_text("nan 198.8 132.2 110.7\n")
    with pytest.raises(ValueError, match="calib.txt: calibration has non-finite values: fx nan"):
        Calibration.from_ecd_calib(calib)
    parameters = dict(width=240, height=180, fx=200.0, fy=200.0, cx=120.0, cy=90.0)
    assert calibration_from_parameters(parameters).fx == 200.0
    with pytest.raises(ValueError, match="calibration.* parameters are unusable: .*fx 90000 px"):
        calibration_from_parameters({**parameters, "fx": 90000.0})
    with pytest.raises(ValueError, match="non-finite values: cx nan"):
        calibration_from_parameters({**parameters, "cx": float("nan")})
    for sensor in SENSORS.values():
        assert sensor.calibration().validate() == sensor.calibration()
    for field_of_view_deg in (2.0, 150.0):
        focal = 120 / np.tan(np.radians(field_of_view_deg) / 2)
        Calibration(240, 180, focal, focal, 120.0, 90.0).validate()
