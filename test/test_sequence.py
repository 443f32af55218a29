"""One entry point for sequences: ECD folders and ROS 1 / ROS 2 bags read the same."""

import pytest

from conftest import slice_folder
from focus_ros.events import Events
from focus_ros.sources.bags import write_bag
from focus_ros.sources.ecd import read_ecd_folder
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
