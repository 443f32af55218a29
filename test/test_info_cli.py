"""`focus-ros info`: what a bag or a folder holds for events, checked against numbers
computed here from the events that were written (and the peer bags' known counts)."""

from __future__ import annotations

import json
import os
import subprocess

import numpy as np
import pytest

from conftest import peer_bag
from ros_harness import executable
from focus_ros.camera import Calibration
from focus_ros.cli import main
from focus_ros.events import Events
from focus_ros.sources import bags
from focus_ros.sources.recording import ImuSamples, Recording

SECOND = 1_000_000_000


def synthetic_recording() -> Recording:
    """2 s of events at a rate that steps from 100 kev/s to 1 Mev/s for 50 ms."""
    rng = np.random.default_rng(12)
    start = 1_700_000_000 * SECOND
    quiet = rng.integers(0, 2 * SECOND, 200_000)
    burst = SECOND + rng.integers(0, 50_000_000, 50_000)
    t = np.sort(np.r_[quiet, burst]) // 1000 * 1000 + start
    events = Events.from_arrays(rng.integers(0, 346, len(t)), rng.integers(0, 260, len(t)), t,
                                rng.integers(0, 2, len(t)))
    imu_t = np.arange(start, start + 2 * SECOND, 5_000_000)
    imu = ImuSamples(imu_t, np.zeros((len(imu_t), 3)), np.zeros((len(imu_t), 3)))
    return Recording(events=events, calibration=Calibration(346, 260, 250.0, 250.0, 173.0, 130.0), imu=imu)


@pytest.mark.parametrize("version, encoding", [(2, "libcaer_cmp"), (1, "evt3"), (2, None)])
def test_info_reports_the_written_events(tmp_path, capsys, version, encoding):
    recording = synthetic_recording()
    path = tmp_path / ("seq.bag" if version == 1 else "seq")
    bags.write_bag(path, recording, version=version, event_encoding=encoding, events_per_message=5000)
    assert main(["info", str(path), "--json", "--quiet"]) == 0
    report = json.loads(capsys.readouterr().out)
    events = recording.events
    (stream,) = report["event_streams"]
    assert stream["events"] == len(events) == stream["on"] + stream["off"]
    assert stream["on"] == int(np.count_nonzero(events.p > 0))
    assert (stream["first_event_ns"], stream["last_event_ns"]) == (int(events.t[0]), int(events.t[-1]))
    assert stream["sensor_sizes"] == ["346x260"]
    assert stream["encodings"] == ([encoding] if encoding else [])
    assert stream["messages"] == -(-len(events) // 5000)
    # peak rate: the fullest 10 ms bin counted here; the burst makes it ~1.1 Mev/s
    counts = np.bincount((events.t - events.t[0]) // 10_000_000)
    assert stream["peak_rate_ev_per_s_10ms"] == pytest.approx(counts[1:-1].max() * 100)
    assert 0.9e6 < stream["peak_rate_ev_per_s_10ms"] < 1.4e6
    assert stream["mean_rate_ev_per_s"] == pytest.approx(len(events) / ((events.t[-1] - events.t[0]) / 1e9))
    assert report["camera_info"] == ["/dvs/camera_info"] and report["imu"] == ["/dvs/imu"]
    assert report["poses"] == []
    # the text form says the same in lines a person reads
    assert main(["info", str(path), "--quiet"]) == 0
    text = capsys.readouterr().out
    assert f"{len(events):,} (ON {stream['on']:,}" in text and "peak" in text and "346x260 px" in text


def test_info_on_the_event_camera_py_bag(capsys):
    path = peer_bag("event_camera_py/test_events_1")
    assert main(["info", str(path), "--json", "--quiet"]) == 0
    (stream,) = json.loads(capsys.readouterr().out)["event_streams"]
    assert (stream["off"], stream["on"], stream["triggers"]) == (218291, 125183, 2078 + 2079)
    assert stream["encodings"] == ["evt3"] and stream["messages"] == 517


def test_info_errors_are_one_line(tmp_path, capsys):
    assert main(["info", str(tmp_path / "missing")]) == 1
    error = capsys.readouterr().err.strip()
    assert error.startswith("focus-ros info: error:") and "missing" in error and "\n" not in error


def test_info_on_an_event_camera_dataset_folder(tmp_path, capsys):
    from focus_ros.sources.ecd import write_ecd_folder

    recording = synthetic_recording()
    events = recording.events[:60_000]
    write_ecd_folder(tmp_path / "seq", Recording(events=events, imu=recording.imu))
    assert main(["info", str(tmp_path / "seq"), "--json", "--quiet"]) == 0
    report = json.loads(capsys.readouterr().out)
    (stream,) = report["event_streams"]
    assert (stream["events"], stream["on"]) == (len(events), int(np.count_nonzero(events.p > 0)))
    assert (stream["first_event_ns"], stream["last_event_ns"]) == (int(events.t[0]), int(events.t[-1]))
    assert (stream["max_x"], stream["max_y"]) == (int(events.x.max()), int(events.y.max()))
    assert report["format"] == "Event Camera Dataset folder" and report["imu"] == ["imu.txt"]
    assert report["camera_info"] == [] and report["poses"] == []


# ----------------------------------------------------------------------------------------
# Sequences a user can give by mistake, through the command line as a user runs it


def focus_ros_cli(*arguments) -> subprocess.CompletedProcess:
    """`focus-ros ARGUMENTS` as a user runs it: the installed entry point, a new process."""
    environment = {key: value for key, value in os.environ.items() if key != "FOCUS_ROS_DEBUG"}
    return subprocess.run([executable("focus-ros"), *map(str, arguments)], capture_output=True,
                          text=True, env=environment, timeout=600)


def test_info_on_a_bag_without_events_says_so_and_lists_what_it_holds(tmp_path):
    """An IMU + camera_info bag (a recording whose driver was not publishing): the report, then one
    error line naming what is missing and what the bag holds; exit status 1 (nothing to estimate from)."""
    recording = synthetic_recording()
    path = tmp_path / "imu_only"
    bags.write_bag(path, Recording(events=recording.events[:0], calibration=recording.calibration, imu=recording.imu))
    result = focus_ros_cli("info", path, "--quiet")
    assert result.returncode == 1
    assert "/dvs/imu" in result.stdout and "events:               none" in result.stdout
    (error,) = result.stderr.strip().splitlines()
    assert error.startswith("focus-ros info: error:") and "holds no event messages" in error
    assert f"/dvs/imu (sensor_msgs/msg/Imu, {len(recording.imu)} messages)" in error
    assert "/dvs/camera_info (sensor_msgs/msg/CameraInfo, 1 message)" in error
    result = focus_ros_cli("info", path, "--quiet", "--json")
    assert result.returncode == 1 and json.loads(result.stdout)["event_streams"] == []


def test_info_on_a_bag_whose_event_topic_is_empty(tmp_path):
    """The event topic recorded but no message on it (rosbag2 keeps a subscribed topic that got nothing)."""
    from rosbags.rosbag2 import StoragePlugin, Writer

    store = bags.typestore_with_event_types(2)
    path = tmp_path / "silent_driver"
    with Writer(path, version=9, storage_plugin=StoragePlugin.MCAP) as writer:
        writer.add_connection("/event_camera/events", bags.EVENT_PACKET_TYPE, typestore=store)
    result = focus_ros_cli("info", path, "--quiet")
    assert result.returncode == 1
    (error,) = result.stderr.strip().splitlines()
    assert "holds no event messages" in error and "/event_camera/events has none" in error


def test_info_says_why_a_calib_txt_is_unusable(tmp_path):
    from focus_ros.sources.ecd import write_ecd_folder

    recording = synthetic_recording()
    folder = tmp_path / "seq"
    write_ecd_folder(folder, Recording(events=recording.events[:1000], calibration=Calibration.davis240c()))
    result = focus_ros_cli("info", folder, "--quiet")
    assert result.returncode == 0 and "camera_info:          calib.txt\n" in result.stdout  # usable: no remark
    (folder / "calib.txt").write_text("199.1 198.8 132.2\n")  # cx, cy, distortion lost
    result = focus_ros_cli("info", folder, "--quiet")
    assert result.returncode == 0, result.stderr  # the events are fine; --calib can replace the calibration
    line = next(line for line in result.stdout.splitlines() if line.startswith("camera_info:"))
    assert "calib.txt (unusable:" in line and "expected 4, 8 or 9 numbers" in line and "found 3" in line
    (folder / "calib.txt").write_text("fx fy cx cy\n")
    report = json.loads(focus_ros_cli("info", folder, "--quiet", "--json").stdout)
    assert report["camera_info"] == ["calib.txt"]
    assert "calibration must be numbers" in report["camera_info_unusable"]["calib.txt"]


def test_info_says_why_a_bags_camera_info_is_unusable(tmp_path):
    recording = synthetic_recording()
    path = tmp_path / "uncalibrated"  # a driver publishing the all-zero K of an uncalibrated camera
    bags.write_bag(path, Recording(events=recording.events[:20_000],
                                   calibration=Calibration(346, 260, 0.0, 0.0, 173.0, 130.0)))
    result = focus_ros_cli("info", path, "--quiet")
    assert result.returncode == 0, result.stderr
    line = next(line for line in result.stdout.splitlines() if line.startswith("camera_info:"))
    assert "/dvs/camera_info (unusable:" in line and "focal length" in line and "fx 0.0" in line
