"""`focus-ros estimate` on a small ECD folder built from the real slice."""

import csv
import shutil

import numpy as np
import pytest

from conftest import slice_folder
from focus_ros.cli import main
from focus_ros.cli.estimate import CSV_COLUMNS


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
                 "-o", str(output), "--max-windows", "1", "--quiet"]) == 0
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
        assert main(["estimate", str(path), "--output", str(csv_path), "--quiet"]) == 0
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
        assert main(["estimate", str(sequence), "-o", str(output), "--max-windows", "1", "--t-ref", "start",
                     "--optimizer", optimizer, "--blur-sigma", blur, "--quiet"]) == 0
        with open(output) as handle:
            row = list(csv.DictReader(handle))[0]
        estimates[optimizer, blur] = np.array([float(row[key]) for key in ("wx", "wy", "wz")])
        assert np.all(np.abs(estimates[optimizer, blur] - [3.576, 3.945, -1.754]) < 0.5)
    assert not np.array_equal(estimates["cg", "0"], estimates["cg", "1"])  # the option reaches the objective
    assert main(["estimate", str(sequence), "--blur-sigma", "-0.5", "--quiet"]) == 1
    error = capsys.readouterr().err.strip()
    assert "--blur-sigma must be >= 0" in error and len(error.splitlines()) == 1
