"""One entry point for sequences: ECD folders and ROS 1 / ROS 2 bags read the same."""

import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from conftest import slice_folder
from focus_ros.camera import Calibration
from focus_ros.events import Events
from focus_ros.sources.bags import BagTopics, write_bag
from focus_ros.sources.ecd import read_ecd_folder
from focus_ros.sources.recording import Recording
from focus_ros.sources.sequence import (ECD, ROSBAG1, ROSBAG2, iter_sequence_events, load_recording,
                                        sequence_calibration, sequence_format)


def test_formats_are_told_apart_and_unknown_input_is_named(tmp_path):
    folder = slice_folder("shapes_rotation")
    assert sequence_format(folder) == ECD and sequence_format(folder / "events.txt") == ECD
    recording = read_ecd_folder(folder)
    write_bag(tmp_path / "s.bag", recording, version=1)
    write_bag(tmp_path / "s2", recording, version=2)
    assert sequence_format(tmp_path / "s.bag") == ROSBAG1 and sequence_format(tmp_path / "s2") == ROSBAG2
    with pytest.raises(FileNotFoundError, match="nothing_here"):
        sequence_format(tmp_path / "nothing_here")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="neither an Event Camera Dataset folder"):
        sequence_format(tmp_path / "empty")


def test_every_format_yields_the_same_events_and_calibration(tmp_path):
    folder = slice_folder("poster_rotation")
    recording = read_ecd_folder(folder)
    write_bag(tmp_path / "p.bag", recording, version=1, events_per_message=4000)
    write_bag(tmp_path / "p2", recording, version=2, storage="sqlite3", events_per_message=4000)
    for path in (folder, tmp_path / "p.bag", tmp_path / "p2"):
        streamed = Events.concatenate(list(iter_sequence_events(path)))
        assert streamed.equals(recording.events), path
        assert sequence_calibration(path) == recording.calibration
        assert load_recording(path).events.equals(recording.events)


def test_missing_calibration_is_said(tmp_path):
    folder = tmp_path / "no_calib"
    folder.mkdir()
    (folder / "events.txt").write_text("0.000001000 1 2 1\n")
    with pytest.raises(FileNotFoundError, match="calib.txt"):
        sequence_calibration(folder)


def davis346_events(count: int = 4000) -> Events:
    rng = np.random.default_rng(5)
    t = np.sort(rng.integers(0, 10**9, count)) // 1000 * 1000 + 10**9
    return Events.from_arrays(rng.integers(0, 346, count), rng.integers(0, 260, count), t, rng.integers(0, 2, count))


def test_a_calib_txt_takes_the_size_the_bag_declares(tmp_path):
    """calib.txt stores no sensor size: for a bag it is the size its event messages declare
    (346x260 here), unless --width/--height say otherwise; for a folder, the DAVIS240C's."""
    write_bag(tmp_path / "bag", Recording(events=davis346_events()), event_encoding="libcaer_cmp")
    calib = tmp_path / "calib.txt"
    calib.write_text("243 243 173 130\n")
    assert (sequence_calibration(tmp_path / "bag", calib).width, sequence_calibration(tmp_path / "bag", calib).height) \
        == (346, 260)
    assert sequence_calibration(tmp_path / "bag", calib, 640, 480).width == 640
    folder = slice_folder("shapes_rotation")
    assert (sequence_calibration(folder, calib).width, sequence_calibration(folder, calib).height) == (240, 180)


def test_camera_info_on_another_topic_is_found_and_its_absence_names_calib(tmp_path):
    calibration = Calibration(346, 260, 243.0, 243.0, 173.0, 130.0)
    recording = Recording(events=davis346_events(), calibration=calibration)
    write_bag(tmp_path / "renamed", recording, topics=BagTopics(events="/event_camera/events",
                                                                camera_info="/event_camera/camera_info"))
    assert sequence_calibration(tmp_path / "renamed") == calibration
    write_bag(tmp_path / "none", Recording(events=recording.events))
    with pytest.raises(ValueError, match="the bag has no camera_info .*--calib"):
        sequence_calibration(tmp_path / "none")
    folder = tmp_path / "no_calib"
    folder.mkdir()
    (folder / "events.txt").write_text("0.000001000 1 2 1\n")
    with pytest.raises(FileNotFoundError, match="calib.txt; give a calibration file with --calib"):
        sequence_calibration(folder)


def test_events_outside_the_sensor_are_refused_naming_the_options(tmp_path):
    events = davis346_events()
    write_bag(tmp_path / "bag", Recording(events=events), event_encoding="libcaer_cmp", events_per_message=1000)
    small = Calibration(240, 180, 200.0, 200.0, 120.0, 90.0)
    first_outside = int(np.argmax((events.x >= 240) | (events.y >= 180)))
    received = []
    with pytest.raises(ValueError, match=rf"event at pixel \({events.x[first_outside]}, {events.y[first_outside]}\) "
                                         r"lies outside the 240x180 px sensor .*--width/--height.*--calib"):
        for chunk in iter_sequence_events(tmp_path / "bag", within=small):
            received.append(chunk)
    assert sum(map(len, received)) == first_outside // 1000 * 1000  # the messages before the one holding it
    fitting = Calibration(346, 260, 243.0, 243.0, 173.0, 130.0)
    assert Events.concatenate(list(iter_sequence_events(tmp_path / "bag", within=fitting))).equals(events)


def test_make_test_says_why_tests_are_skipped(tmp_path):
    """`make test` runs pytest with -rs: a test skipped for want of the real data says so, with the reason."""
    repository = Path(__file__).resolve().parents[1]
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    stamps = [".venv/.focus_ros-deps", ".venv/.focus_ros-interfaces"]
    if subprocess.run(["make", "-q", *stamps], cwd=repository, capture_output=True).returncode != 0:
        pytest.skip("the .venv of `make setup` is missing or out of date: `make test` would rebuild it first")
    environment = dict(os.environ, FOCUS_ROS_SHARED_DATA=str(tmp_path / "no_data"))
    environment.pop("CI", None)  # in CI missing data fails instead of skipping
    result = subprocess.run(
        ["make", "--no-print-directory", "test",
         f"PYTEST_ARGS=-p no:cacheprovider {__file__}::test_formats_are_told_apart_and_unknown_input_is_named"],
        cwd=repository, env=environment, capture_output=True, text=True, timeout=600)
    assert "1 skipped" in result.stdout, result.stdout + result.stderr
    assert "SKIPPED" in result.stdout and f"real event data not found at {tmp_path / 'no_data'}" in result.stdout
