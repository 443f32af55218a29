"""`focus-ros info`: what a bag or a folder holds for events, checked against numbers
computed here from the events that were written (and the peer bags' known counts)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from conftest import SHARED_DATA
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
    path = SHARED_DATA / "peer_bags" / "event_camera_py" / "test_events_1"
    if not path.exists():
        pytest.skip(f"peer bag not found at {path}")
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
