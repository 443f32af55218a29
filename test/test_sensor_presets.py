"""Sensor presets everywhere (issue 21 item 4, issue 23 item 11): every simulator preset seen through
every camera of focus_ros.camera.SENSORS; `focus-ros simulate --sensor` writes folders and bags with
the sensor's calibration and its driver's event encoding; the evaluating commands take --sensor; a
sequence the simulator wrote is evaluated against its exact ground truth (no gyro delay); the
per-sensor driver configuration files in config/ load as the nodes' parameters."""

from __future__ import annotations

import csv
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest
import yaml

from conftest import flattened_parameters
from focus_ros.camera import SENSORS
from focus_ros.cli import main
from focus_ros.sources.bags import bag_topics, iter_bag_events, open_bag, read_bag, read_bag_calibration
from focus_ros.sources.ecd import read_ecd_folder
from focus_ros.sources.simulator import PRESETS, make_preset, texel_scale
from ros_harness import executable

REPOSITORY = Path(__file__).resolve().parents[1]
SENSOR_CHOICES = ", ".join(SENSORS)  # what an error about --sensor must list
#: the event message each sensor's bag gets by default: its driver's (the DAVIS240C's: the dataset's)
DRIVER_MESSAGES = {"davis240c": ("dvs_msgs/msg/EventArray", None),
                   "davis346": ("event_camera_msgs/msg/EventPacket", "libcaer_cmp"),
                   "dvxplorer": ("event_camera_msgs/msg/EventPacket", "libcaer_cmp"),
                   "imx636": ("event_camera_msgs/msg/EventPacket", "evt3")}
#: simulated seconds per sensor in the bag round trip (a 1280x720 render step costs 20x a DAVIS240C's)
SHORT_S = {"davis240c": 0.03, "davis346": 0.03, "dvxplorer": 0.01, "imx636": 0.004}


def focus_ros_cli(*arguments, cwd=None) -> subprocess.CompletedProcess:
    """`focus-ros ARGUMENTS` as a user runs it: the installed entry point, a new process."""
    environment = {key: value for key, value in os.environ.items() if key != "FOCUS_ROS_DEBUG"}
    return subprocess.run([executable("focus-ros"), *map(str, arguments)], capture_output=True,
                          text=True, env=environment, timeout=900, cwd=cwd)


# ----------------------------------------------------------------------------------------
# every preset with every sensor


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_every_preset_runs_with_every_sensor_with_its_calibration_and_the_same_ground_truth(preset):
    """Same scene and motion, hence the same IMU and poses bit for bit; the camera's size,
    intrinsics and distortion; events on its sensor; depth maps of its size."""
    start_s, end_s = 0.5, 0.502
    recordings = {}
    for name, model in SENSORS.items():
        simulator = make_preset(preset, seed=2, camera=name)
        assert simulator.calibration == model.calibration()
        recording = simulator.simulate(start_s, end_s)
        assert len(recording.events) > 0, f"{preset} through {name}: no event"
        assert recording.events.x.max() < model.width and recording.events.y.max() < model.height
        if recording.depth_maps is not None:
            assert recording.depth_maps.shape[1:] == (model.height, model.width)
        assert recording.simulation["camera"] == name and recording.simulation["preset"] == preset
        assert (recording.simulation["width"], recording.simulation["height"]) == (model.width, model.height)
        recordings[name] = recording
    reference = recordings["davis240c"]
    for name, recording in recordings.items():
        assert np.array_equal(recording.imu.t, reference.imu.t)
        assert np.array_equal(recording.imu.angular_velocity, reference.imu.angular_velocity), name
        assert np.array_equal(recording.poses.position, reference.poses.position), name
        assert np.array_equal(recording.poses.orientation, reference.poses.orientation), name


def test_scene_textures_are_as_fine_per_pixel_for_every_sensor_as_for_the_davis240c():
    """A longer focal length gets finer textures: texels per pixel at the image centre never drop below
    the DAVIS240C's (face texels / (2 fx), a cube face spanning 2 units of the normalized plane)."""
    davis = SENSORS["davis240c"].calibration()
    davis_texels_per_px = 512 * texel_scale(davis) / (2 * davis.fx)
    assert texel_scale(davis) == 1.0
    for name, model in SENSORS.items():
        faces = make_preset("rotation_short", 0.01, camera=name).scene.faces
        assert faces.shape[1] / (2 * max(model.lens.fx, model.lens.fy)) >= davis_texels_per_px - 1e-9, name


def test_event_rate_per_pixel_is_alike_across_sensors_for_the_same_motion():
    """The same room turning at the same ω: each sensor's edges move across its pixels at a speed
    (px/s) growing with fx while the room's edges cover pixels in proportion to 1/fx, so every
    sensor sees about as many events per pixel and second (within a factor 2 of the DAVIS240C)."""
    rates = {}
    for name, model in SENSORS.items():
        events = make_preset("rotation_short", seed=1, camera=name).simulate(1.0, 1.006).events
        rates[name] = len(events) / 0.006 / model.pixels
    for name, rate in rates.items():
        assert 0.5 < rate / rates["davis240c"] < 2.0, rates


# ----------------------------------------------------------------------------------------
# focus-ros simulate --sensor: bags and folders


@pytest.mark.parametrize("sensor", list(SENSORS))
def test_simulate_writes_a_bag_with_the_sensors_camera_info_encoding_and_events(tmp_path, sensor, capsys):
    bag = tmp_path / "sim"
    duration_s = SHORT_S[sensor]
    assert main(["simulate", "--preset", "rotation_short", "--sensor", sensor, "--duration", str(duration_s),
                 "--format", "rosbag2", "--output", str(bag), "--no-progress"]) == 0
    assert sensor in capsys.readouterr().out
    model = SENSORS[sensor]
    calibration = read_bag_calibration(bag)
    assert (calibration.width, calibration.height) == (model.width, model.height)
    assert (calibration.fx, calibration.fy, calibration.cx, calibration.cy) == (model.lens.fx, model.lens.fy, model.lens.cx, model.lens.cy)
    assert calibration.distortion == tuple(model.lens.distortion)

    message_type, encoding = DRIVER_MESSAGES[sensor]
    reader = open_bag(bag)
    try:
        assert bag_topics(reader)["/dvs/events"] == message_type
    finally:
        reader.close()
    infos = [info for _, info in iter_bag_events(bag)]
    assert all((info.width, info.height) == (model.width, model.height) for info in infos)
    if encoding is not None:
        assert {info.encoding for info in infos} == {encoding}

    expected = make_preset("rotation_short", duration_s, seed=0, camera=sensor).simulate().events
    events = read_bag(bag).events
    resolution_ns = 1 if encoding is None else 1000  # the packet encodings stamp whole microseconds
    assert len(events) == len(expected) > 1000
    assert np.array_equal(events.x, expected.x) and np.array_equal(events.y, expected.y)
    assert np.array_equal(events.p, expected.p)
    assert np.array_equal(events.t, expected.t // resolution_ns * resolution_ns)


def test_simulate_writes_a_folder_that_reads_back_with_the_sensors_size(tmp_path, capsys):
    """calib.txt stores no size: the simulator's simulation.yaml gives it (346x260, not 240x180)."""
    folder = tmp_path / "sim"
    assert main(["simulate", "--preset", "six_dof", "--sensor", "davis346", "--duration", "0.02",
                 "--output", str(folder), "--no-progress"]) == 0
    capsys.readouterr()
    recording = read_ecd_folder(folder)
    assert recording.calibration == SENSORS["davis346"].calibration()
    assert recording.simulation["camera"] == "davis346" and recording.simulation["preset"] == "six_dof"
    assert recording.depth_maps.shape[1:] == (260, 346)
    expected = make_preset("six_dof", 0.02, camera="davis346").simulate().events
    assert recording.events.equals(expected)


def test_simulate_event_encoding_overrides_the_sensors_and_applies_to_bags_only(tmp_path, capsys):
    bag = tmp_path / "sim"
    assert main(["simulate", "--sensor", "imx636", "--duration", "0.002", "--format", "rosbag2",
                 "--event-encoding", "dvs_msgs", "--output", str(bag), "--no-progress"]) == 0
    reader = open_bag(bag)
    try:
        assert bag_topics(reader)["/dvs/events"] == "dvs_msgs/msg/EventArray"
    finally:
        reader.close()
    capsys.readouterr()
    assert main(["simulate", "--event-encoding", "evt3", "--output", str(tmp_path / "folder"),
                 "--no-progress"]) == 1
    error = capsys.readouterr().err.strip()
    assert "--event-encoding" in error and "--format" in error and "\n" not in error
    assert not (tmp_path / "folder").exists()


# ----------------------------------------------------------------------------------------
# --sensor on the real command line


@pytest.mark.parametrize("command", ["simulate", "evaluate", "evaluate-depth", "evaluate-flow"])
def test_an_unknown_sensor_is_refused_in_one_line_naming_the_choices(tmp_path, command):
    arguments = ["--output", tmp_path / "out", "--sensor", "davis999"]
    if command != "simulate":
        arguments += ["--simulate", "rotation_short"]
    result = focus_ros_cli(command, *arguments)
    assert result.returncode == 1
    error = result.stderr.strip()
    assert "\n" not in error and "Traceback" not in error, error
    assert error.startswith(f"focus-ros {command}: error:") and "davis999" in error and SENSOR_CHOICES in error
    assert not (tmp_path / "out").exists()


def test_sensor_without_simulate_is_refused_in_one_line(tmp_path):
    folder = tmp_path / "sim"
    assert main(["simulate", "--duration", "0.02", "--output", str(folder), "--no-progress"]) == 0
    result = focus_ros_cli("evaluate", folder, "--sensor", "imx636", "--output", tmp_path / "out")
    assert result.returncode == 1
    error = result.stderr.strip()
    assert "\n" not in error and "--sensor" in error and "--simulate" in error and "--calib" in error


def test_evaluate_commands_simulate_the_chosen_sensor(tmp_path):
    """Each evaluating command with --sensor evaluates the sequence the simulator renders for that
    sensor (other sensors give other events for the same motion: a DAVIS346 twice as many per
    second as the DAVIS240C, so 30,000-event windows half as long): its windows are that
    sequence's, and the depth maps cover that sensor's pixels."""
    from focus_ros.estimators.angular_velocity import reference_time_ns
    from focus_ros.evaluation.sequence import simulate_sequence

    result = focus_ros_cli("evaluate", "--simulate", "rotation_short", "--sensor", "davis346", "--duration", "0.1",
                           "--losses", "variance", "--polarity", "without", "--max-windows", "2", "--workers", "1",
                           "--plot-losses", "none", "--quiet", "--output", tmp_path / "evaluate")
    assert result.returncode == 0, result.stderr
    assert "davis346" in (tmp_path / "evaluate" / "table.md").read_text().splitlines()[0]
    # the two windows are the first 2 x 30,000 events of the DAVIS346's sequence: their reference times
    events = simulate_sequence("rotation_short", 0.1, 0, camera="davis346").events
    expected_ns = [reference_time_ns(events[start:start + 30000], "middle") for start in (0, 30000)]
    with open(tmp_path / "evaluate" / "estimates" / "variance__without.csv", newline="") as handle:
        t_ref_ns = [round(float(row["t_ref"]) * 1e9) for row in csv.DictReader(handle)]
    assert t_ref_ns == expected_ns
    result = focus_ros_cli("evaluate-flow", "--simulate", "rotation_short", "--sensor", "dvxplorer",
                           "--duration", "0.02", "--losses", "variance", "--max-windows", "1", "--window-events",
                           "30000", "--quiet", "--output", tmp_path / "flow")
    assert result.returncode == 0, result.stderr
    header = (tmp_path / "flow" / "flow_table.md").read_text().splitlines()[0]
    assert "dvxplorer" in header
    # its one window: the first 30,000 events of the DVXplorer's sequence (1.6 ms; 10 ms on a DAVIS240C)
    events = simulate_sequence("rotation_short", 0.02, 0, camera="dvxplorer").events
    assert f"1 30000-event windows (median span {(events.t[29999] - events.t[0]) / 1e6:.1f} ms)" in header, header
    result = focus_ros_cli("evaluate-depth", "--simulate", "slider", "--sensor", "davis346", "--duration", "0.3",
                           "--keyframes", "1", "--keyframe-events", "50000", "--losses", "local_variance",
                           "--polarity", "without", "--plot-losses", "none", "--planes", "20", "--quiet",
                           "--output", tmp_path / "depth")
    assert result.returncode == 0, result.stderr
    assert "davis346" in (tmp_path / "depth" / "depth_table.md").read_text().splitlines()[0]
    # density = points / reference pixels with ground truth: the slider's scene fills the view, so
    # those are the DAVIS346's 346 x 260 pixels (a DAVIS240C's would be 240 x 180)
    with open(tmp_path / "depth" / "depth_table.csv", newline="") as handle:
        rows = [row for row in csv.DictReader(handle) if row["status"] == "ok"]
    assert rows
    for row in rows:
        assert int(row["points"]) / float(row["density"]) == pytest.approx(346 * 260, rel=1e-4), row


# ----------------------------------------------------------------------------------------
# issue 23 item 11: the simulator's own output is evaluated against its exact ground truth

EVALUATE_OPTIONS = ("--losses", "variance", "--polarity", "without", "--max-windows", "6", "--workers", "1",
                    "--plot-losses", "none", "--quiet")


def evaluated_rms(output: Path) -> float:
    with open(output / "table.csv") as handle:
        (row,) = list(csv.DictReader(handle))
    return float(row["rms"])


def compared_with(output: Path) -> str:
    return next(line for line in (output / "table.md").read_text().splitlines() if "compared with" in line)


@pytest.fixture(scope="module")
def simulated_outputs(tmp_path_factory):
    """The same seeded preset written by `focus-ros simulate` as a folder and as a bag."""
    root = tmp_path_factory.mktemp("simulated")
    for name, extra in (("folder", ()), ("bag", ("--format", "rosbag2"))):
        result = focus_ros_cli("simulate", "--preset", "rotation_short", "--duration", "0.3", "--seed", "5",
                               *extra, "--output", root / name, "--no-progress")
        assert result.returncode == 0, result.stderr
    in_process = root / "in_process"
    result = focus_ros_cli("evaluate", "--simulate", "rotation_short", "--duration", "0.3", "--seed", "5",
                           *EVALUATE_OPTIONS, "--output", in_process)
    assert result.returncode == 0, result.stderr
    return root, evaluated_rms(in_process)


@pytest.mark.parametrize("written", ["folder", "bag"])
def test_evaluate_on_the_simulators_output_uses_its_exact_ground_truth(simulated_outputs, written):
    root, in_process_rms = simulated_outputs
    output = root / f"evaluated_{written}"
    result = focus_ros_cli("evaluate", root / written, *EVALUATE_OPTIONS, "--output", output)
    assert result.returncode == 0, result.stderr
    assert "no gyro delay" in result.stderr  # it says which ground truth it took
    assert "no gyro delay" in compared_with(output)
    assert evaluated_rms(output) == pytest.approx(in_process_rms, rel=1e-9, abs=1e-9)
    # the ω compared with is the IMU's at each window's t_ref itself (comparison.csv has 9 digits), not
    # the one 2.4 ms earlier, which differs by far more (ω changes by over 0.01 rad/s in 2.4 ms here)
    imu = np.loadtxt(root / "folder" / "imu.txt")
    comparison = np.loadtxt(output / "comparison.csv", delimiter=",", skiprows=1)
    for axis in range(3):
        undelayed = np.interp(comparison[:, 0], imu[:, 0], imu[:, 4 + axis])
        delayed = np.interp(comparison[:, 0] - 2.4e-3, imu[:, 0], imu[:, 4 + axis])
        assert np.allclose(comparison[:, 1 + axis], undelayed, rtol=0, atol=1e-7)
        assert np.abs(delayed - undelayed).max() > 0.01


def test_an_explicit_imu_delay_still_wins_on_a_simulated_sequence(simulated_outputs):
    root, in_process_rms = simulated_outputs
    output = root / "delayed"
    result = focus_ros_cli("evaluate", root / "folder", "--imu-delay", "2.4", *EVALUATE_OPTIONS, "--output", output)
    assert result.returncode == 0, result.stderr
    assert "delayed by 2.4 ms" in compared_with(output)
    assert evaluated_rms(output) != pytest.approx(in_process_rms, rel=1e-3)


# ----------------------------------------------------------------------------------------
# config/: one parameter file per sensor and driver

#: file -> (sensor, event topic the driver publishes, camera_info topic beside it)
CONFIG_FILES = {"davis240c.yaml": ("davis240c", "/dvs/events", "/dvs/camera_info"),
                "davis346_libcaer.yaml": ("davis346", "/event_camera/events", "/event_camera/camera_info"),
                "dvxplorer_libcaer.yaml": ("dvxplorer", "/event_camera/events", "/event_camera/camera_info"),
                "evk4_metavision.yaml": ("imx636", "/event_camera/events", "/event_camera/camera_info")}


def test_every_sensor_has_a_config_file_and_every_config_file_a_sensor():
    configs = {path.name for path in (REPOSITORY / "config").glob("*.yaml")
               if path.name != "generic_template.yaml" and not path.name.startswith(("depth", "optical_flow"))}
    assert configs == set(CONFIG_FILES)
    assert {sensor for sensor, _, _ in CONFIG_FILES.values()} == set(SENSORS)


@pytest.mark.parametrize("name", sorted(CONFIG_FILES))
def test_config_file_names_only_declared_parameters_and_the_sensors_calibration(name):
    """rclpy reads it as a params file; every name is a parameter the nodes declare (rclpy would
    ignore a misspelt one silently); the driver files hold the event input's parameters only, which
    every focus_ros node declares; the calibration is the sensor's; the message type and QoS are
    what its driver publishes."""
    from rclpy.parameter import parameter_dict_from_yaml_file, parameter_value_to_python

    from focus_ros.ros.angular_velocity_node import PARAMETERS as NODE_PARAMETERS
    from focus_ros.ros.event_input import PARAMETERS as INPUT_PARAMETERS, SUBSCRIBABLE_TYPES

    path = REPOSITORY / "config" / name
    loaded = parameter_dict_from_yaml_file(str(path), use_wildcard=True)
    assert set(loaded) == set(flattened_parameters(yaml.safe_load(path.read_text())["/**"]["ros__parameters"]))
    values = {key: parameter_value_to_python(parameter.value) for key, parameter in loaded.items()}
    assert set(values) <= set(INPUT_PARAMETERS) | set(NODE_PARAMETERS), set(values) - set(INPUT_PARAMETERS)
    sensor, _, camera_info_topic = CONFIG_FILES[name]
    model = SENSORS[sensor]
    if name != "davis240c.yaml":
        assert set(values) <= set(INPUT_PARAMETERS), "a driver file sets the event input only"
        assert values["event_message_type"] == "event_camera_msgs/EventPacket"
        assert values["qos_reliability"] == "best_effort"  # the ros-event-camera drivers publish best effort
    assert values["event_message_type"] in SUBSCRIBABLE_TYPES
    assert values["camera_info_topic"] == camera_info_topic
    assert (values["calibration.width"], values["calibration.height"]) == (model.width, model.height)
    assert [values[f"calibration.{k}"] for k in ("fx", "fy", "cx", "cy")] == \
        pytest.approx([model.lens.fx, model.lens.fy, model.lens.cx, model.lens.cy], rel=1e-12)
    assert list(values["calibration.distortion"]) == pytest.approx(list(model.lens.distortion), abs=1e-12)


@pytest.mark.parametrize("name", sorted(CONFIG_FILES))
def test_config_file_configures_a_real_event_input_that_subscribes_with_its_type_and_qos(name):
    """A node started with --params-file FILE and remapped onto the driver's topic, as the file's
    header shows: its event input takes every value, subscribes to the topic with the file's
    message type and reliability, and falls back to the file's calibration."""
    rclpy = pytest.importorskip("rclpy")
    from rclpy.qos import ReliabilityPolicy

    from focus_ros.ros.event_input import EventInput

    sensor, event_topic, camera_info_topic = CONFIG_FILES[name]
    context = rclpy.Context()
    rclpy.init(context=context, domain_id=77)
    try:
        node = rclpy.create_node("angular_velocity_node", context=context, cli_args=[
            "--ros-args", "--params-file", str(REPOSITORY / "config" / name), "-r", f"events:={event_topic}"])
        event_input = EventInput(node, lambda batch: None)
        try:
            assert event_input.camera_info_topic == camera_info_topic
            message_type = node.get_parameter("event_message_type").value
            package, type_name = message_type.split("/")
            subscriptions = dict(node.get_subscriber_names_and_types_by_node(node.get_name(), node.get_namespace()))
            assert subscriptions[event_topic] == [f"{package}/msg/{type_name}"]
            (info,) = node.get_subscriptions_info_by_topic(event_topic)
            reliability = node.get_parameter("qos_reliability").value
            assert info.qos_profile.reliability == (ReliabilityPolicy.BEST_EFFORT if reliability == "best_effort"
                                                    else ReliabilityPolicy.RELIABLE)
            assert node.get_parameter("calibration.width").value == SENSORS[sensor].width
        finally:
            event_input.close()
            node.destroy_node()
    finally:
        rclpy.shutdown(context=context)
