"""`focus-ros estimate` on a small ECD folder built from the real slice."""

import csv
import shutil

import numpy as np
import pytest

from conftest import BOXES_ROTATION_REFERENCE, slice_folder
from test_info_cli import focus_ros_cli
from focus_ros.camera import Calibration
from focus_ros.cli import main
from focus_ros.cli.estimate import CSV_COLUMNS
from focus_ros.events import Events
from focus_ros.pipelines.angular_velocity import real_time_defaults
from focus_ros.sources.bags import write_bag
from focus_ros.sources.recording import ImuSamples, Recording


@pytest.fixture
def sequence(tmp_path):
    """Three time-shifted copies of the boxes_rotation slice (90,000 events)."""
    source = slice_folder("boxes_rotation")
    table = np.loadtxt(source / "events.txt")
    span = table[-1, 0] - table[0, 0] + 1e-6
    parts = [table + [index * span, 0, 0, 0] for index in range(3)]
    folder = tmp_path / "seq"
    folder.mkdir()
    np.savetxt(folder / "events.txt", np.concatenate(parts), fmt=["%.9f", "%d", "%d", "%d"])
    shutil.copy(source / "calib.txt", folder / "calib.txt")
    return folder


def test_estimate_writes_one_row_per_window(sequence, tmp_path):
    output = tmp_path / "omega.csv"
    assert main(["estimate", str(sequence), "-o", str(output), "--window-events", "20000",
                 "--stride", "15000", "--quiet"]) == 0
    with open(output) as handle:
        rows = list(csv.reader(handle))
    assert tuple(rows[0]) == CSV_COLUMNS
    # 90,000 events, windows of 20,000 every 15,000: starts 0, 15k, ..., 60k -> 5 windows
    assert len(rows) - 1 == 5
    times = [float(row[0]) for row in rows[1:]]
    assert times == sorted(times) and 49.0 < times[0] < 49.02
    first = np.array([float(v) for v in rows[1][1:4]])
    assert np.all(np.abs(first - [3.576, 3.945, -1.754]) < 1.0)  # same peak as the reference


def test_events_file_and_calib_paths(sequence, tmp_path):
    output = tmp_path / "omega.csv"
    assert main(["estimate", str(sequence / "events.txt"), "--calib", str(sequence / "calib.txt"),
                 "-o", str(output), "--window-events", "30000", "--max-windows", "1", "--quiet"]) == 0
    assert len(output.read_text().splitlines()) == 2


def test_clear_errors(sequence, tmp_path, capsys):
    assert main(["estimate", str(tmp_path / "missing")]) == 1
    assert "sequence not found" in capsys.readouterr().err
    (sequence / "calib.txt").unlink()
    assert main(["estimate", str(sequence)]) == 1
    error = capsys.readouterr().err.strip()
    assert "calibration not found" in error and len(error.splitlines()) == 1
    assert main(["estimate", str(sequence), "--calib", str(tmp_path / "c.txt"),
                 "--loss", "mean_absolute_value"]) == 1


def test_degenerate_loss_is_refused(sequence, capsys):
    assert main(["estimate", str(sequence), "--loss", "mean_absolute_value", "--quiet"]) == 1
    assert "degenerate without polarity" in capsys.readouterr().err


def test_bag_gives_the_same_estimates_as_the_folder(sequence, tmp_path):
    """The same events as a ROS 1 bag and a ROS 2 bag (camera_info inside): same CSV."""
    from focus_ros.sources.bags import write_bag
    from focus_ros.sources.ecd import read_ecd_folder

    recording = read_ecd_folder(sequence)
    outputs = {}
    for name, path, version in (("folder", sequence, None), ("ros1", tmp_path / "seq.bag", 1),
                                ("ros2", tmp_path / "seq_ros2", 2)):
        if version:
            write_bag(path, recording, version=version, events_per_message=7000)
        csv_path = tmp_path / f"{name}.csv"
        assert main(["estimate", str(path), "--output", str(csv_path), "--window-events", "30000", "--quiet"]) == 0
        outputs[name] = csv_path.read_text()
    assert outputs["folder"].count("\n") >= 3
    assert outputs["ros1"] == outputs["folder"]
    assert outputs["ros2"] == outputs["folder"]


def test_optimizer_and_blur_options(sequence, tmp_path, capsys):
    """Every optimizer of focus_ros.optimize is offered (bfgs included); --blur-sigma 0 and 1
    both find the reference peak from a cold start, and a negative sigma is refused."""
    estimates = {}
    for optimizer, blur in (("bfgs", "1"), ("cg", "0"), ("cg", "1")):
        output = tmp_path / f"{optimizer}_{blur}.csv"
        assert main(["estimate", str(sequence), "-o", str(output), "--window-events", "30000", "--max-windows", "1",
                     "--t-ref", "start", "--optimizer", optimizer, "--blur-sigma", blur, "--quiet"]) == 0
        with open(output) as handle:
            row = list(csv.DictReader(handle))[0]
        estimates[optimizer, blur] = np.array([float(row[key]) for key in ("wx", "wy", "wz")])
        assert np.all(np.abs(estimates[optimizer, blur] - [3.576, 3.945, -1.754]) < 0.5)
    assert not np.array_equal(estimates["cg", "0"], estimates["cg", "1"])  # the option reaches the objective
    # refused by the option's declared range, as argparse refuses (usage, then one error line; exit 2)
    with pytest.raises(SystemExit) as refused:
        main(["estimate", str(sequence), "--blur-sigma", "-0.5", "--quiet"])
    assert refused.value.code == 2
    errors = [line for line in capsys.readouterr().err.strip().splitlines() if "error" in line]
    assert len(errors) == 1 and "--blur-sigma must be >= 0" in errors[0]


# ----------------------------------------------------------------------------------------
# Sequences a user can give by mistake, through the command line as a user runs it


def random_events(count: int, width: int, height: int, seed: int = 3) -> Events:
    """Events spread over a width x height px sensor, 1 s from t = 1 s (microsecond times)."""
    rng = np.random.default_rng(seed)
    t = np.sort(rng.integers(0, 1_000_000, count)) * 1000 + 1_000_000_000
    return Events.from_arrays(rng.integers(0, width, count), rng.integers(0, height, count), t,
                              rng.integers(0, 2, count))


def one_error_line(result) -> str:
    assert result.returncode == 1, result.stdout + result.stderr
    (line,) = result.stderr.strip().splitlines()
    return line


@pytest.mark.parametrize("command", ["estimate", "depth"])
def test_a_bag_without_events_is_named_as_such_with_what_it_holds(tmp_path, command):
    """No event topic and no camera_info: the missing events are the error (not the calibration),
    with the bag's topics and types; nothing is written."""
    t = np.arange(1_000_000_000, 2_000_000_000, 5_000_000)
    imu = ImuSamples(t, np.zeros((len(t), 3)), np.zeros((len(t), 3)))
    bag = tmp_path / "imu_only"
    write_bag(bag, Recording(events=random_events(0, 1, 1), imu=imu))
    error = one_error_line(focus_ros_cli(command, bag, "-o", tmp_path / "out", "--quiet"))
    assert error.startswith(f"focus-ros {command}: error:") and "the bag holds no event messages" in error
    assert f"/dvs/imu (sensor_msgs/msg/Imu, {len(t)} messages)" in error and "camera_info" not in error
    assert not (tmp_path / "out").exists()


def test_errors_name_the_option_that_fixes_them_and_leave_no_csv(tmp_path):
    """A DAVIS346 bag (EventPackets declaring 346x260) without camera_info: the error names --calib;
    with a calib.txt the bag's declared size is used; a size that does not fit (--width/--height
    240x180) is named, and the failed run leaves no CSV (an earlier one stays as it was)."""
    bag = tmp_path / "davis346"
    write_bag(bag, Recording(events=random_events(12_000, 346, 260)), event_encoding="libcaer_cmp",
              events_per_message=3000)
    calib = tmp_path / "calib.txt"
    calib.write_text("243.0 243.0 173.0 130.0 -0.25 0.08 0.0 0.0\n")
    output = tmp_path / "omega.csv"
    error = one_error_line(focus_ros_cli("estimate", bag, "-o", output, "--quiet"))
    assert "the bag has no camera_info" in error and "--calib" in error
    assert not output.exists()
    result = focus_ros_cli("estimate", bag, "--calib", calib, "-o", output, "--window-events", "5000", "--quiet")
    assert result.returncode == 0, result.stderr
    assert len(output.read_text().splitlines()) == 1 + 2
    earlier = output.read_text()
    error = one_error_line(focus_ros_cli("estimate", bag, "--calib", calib, "--width", "240", "--height", "180",
                                         "-o", output, "--window-events", "5000", "--quiet"))
    assert "lies outside the 240x180 px sensor" in error and "--width/--height" in error
    assert output.read_text() == earlier
    assert sorted(p.name for p in tmp_path.iterdir()) == ["calib.txt", "davis346", "omega.csv"]


def test_events_beyond_the_default_sensor_name_width_and_height(tmp_path):
    """An ECD folder of a DAVIS346 (calib.txt holds no size; the default is the DAVIS240C's)."""
    from focus_ros.sources.ecd import write_ecd_folder

    folder = tmp_path / "davis346"
    write_ecd_folder(folder, Recording(events=random_events(8_000, 346, 260)))
    (folder / "calib.txt").write_text("243.0 243.0 173.0 130.0\n")
    output = tmp_path / "omega.csv"
    error = one_error_line(focus_ros_cli("estimate", folder, "-o", output, "--window-events", "4000", "--quiet"))
    assert "outside the 240x180 px sensor" in error and "--width/--height" in error and not output.exists()
    result = focus_ros_cli("estimate", folder, "--width", "346", "--height", "260", "-o", output,
                           "--window-events", "4000", "--quiet")
    assert result.returncode == 0, result.stderr
    assert len(output.read_text().splitlines()) == 1 + 2


def test_an_unusable_camera_info_names_calib(tmp_path):
    bag = tmp_path / "uncalibrated"
    write_bag(bag, Recording(events=random_events(6_000, 240, 180),
                             calibration=Calibration(240, 180, 0.0, 0.0, 120.0, 90.0)))
    error = one_error_line(focus_ros_cli("estimate", bag, "-o", tmp_path / "omega.csv", "--quiet"))
    assert "focal length" in error and "give a calibration file with --calib" in error
    (tmp_path / "calib.txt").write_text("200.0 200.0 120.0 90.0\n")
    result = focus_ros_cli("estimate", bag, "--calib", tmp_path / "calib.txt", "-o", tmp_path / "omega.csv",
                           "--window-events", "3000", "--quiet")
    assert result.returncode == 0, result.stderr
    assert len((tmp_path / "omega.csv").read_text().splitlines()) == 1 + 2


# ----------------------------------------------------------------------------------------
# A recording shorter than one window: estimated as one


def first_events_folder(tmp_path, count: int):
    """An ECD folder of the first ``count`` events of the boxes_rotation slice, with its calib.txt."""
    source = slice_folder("boxes_rotation")
    folder = tmp_path / f"first_{count}"
    folder.mkdir()
    lines = (source / "events.txt").read_text().splitlines(keepends=True)[:count]
    (folder / "events.txt").write_text("".join(lines))
    shutil.copy(source / "calib.txt", folder / "calib.txt")
    return folder


@pytest.mark.parametrize("windows", [(), ("--window-events", "60000")], ids=["auto", "60000_events"])
def test_a_recording_shorter_than_one_window_gives_one_estimate_and_says_so(tmp_path, windows):
    """The 30,000 real events of boxes_rotation span 5.5 ms: less than the first auto window (0.7
    events per IWE pixel, about 30,240 events, or 20 ms) and than 60,000 events. The recording is
    estimated as one window, said in one line; one CSV row, its columns as always."""
    folder = slice_folder("boxes_rotation")
    output = tmp_path / "omega.csv"
    result = focus_ros_cli("estimate", folder, "-o", output, "--quiet", *windows)
    assert result.returncode == 0, result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith(f"focus-ros estimate: {folder} holds 30,000 events in 5.5 ms, less than one window (")
    assert line.endswith("): estimated as one window") and ("(auto windows: " in line) == (not windows)
    with open(output) as handle:
        (row,) = list(csv.DictReader(handle))
    assert tuple(row) == CSV_COLUMNS and row["degenerate"] == "0"
    assert 49.006624 <= float(row["t_ref"]) <= 49.012158  # within the recording
    omega = np.array([float(row[key]) for key in ("wx", "wy", "wz")])
    # No gyro comes with the slice (no imu.txt): the reference is the published contrast-maximisation
    # estimate of exactly these events (ec_slices/README.md). The tolerance from the sensor: an error
    # dw moves a warped event by about f dw dt px (f = 199 px; dt up to the 5.5 ms span, the reference's
    # t_ref being the first event): 199 * 0.5 rad/s * 5.5 ms = 0.55 px, about the pixel the events are
    # quantised to; estimates that close focus these events alike, a wrong peak or sign lies rad/s away.
    assert np.linalg.norm(omega - np.array(BOXES_ROTATION_REFERENCE)) < 0.5, omega


def test_too_few_events_to_estimate_are_named_with_the_minimum_and_write_no_row(tmp_path):
    """Below the estimator's minimum (min_events: fewer are withheld as few_events) there is
    nothing to estimate: a warning naming the minimum, the CSV's header only. At the minimum the
    recording is one window again."""
    minimum = real_time_defaults().min_events
    output = tmp_path / "omega.csv"
    folder = first_events_folder(tmp_path, minimum - 1)
    result = focus_ros_cli("estimate", folder, "-o", output, "--quiet")
    assert result.returncode == 0, result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith(f"focus-ros estimate: warning: {folder} holds no complete window (auto windows: ")
    assert line.endswith(f") and fewer than the {minimum} events to estimate as one: no window written")
    assert output.read_text().splitlines() == [",".join(CSV_COLUMNS)]
    folder = first_events_folder(tmp_path, minimum)
    result = focus_ros_cli("estimate", folder, "-o", output, "--quiet")
    assert result.returncode == 0, result.stderr
    assert f"holds {minimum} events in " in result.stderr and "estimated as one window" in result.stderr
    assert len(output.read_text().splitlines()) == 1 + 1
