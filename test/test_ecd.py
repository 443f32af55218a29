"""Event Camera Dataset text layout: the real slices, exact times, chunking, writing, and
malformed files (errors name file and line; earlier events are kept)."""

from __future__ import annotations

from decimal import Decimal

import numpy as np
import pytest

from conftest import SLICE_NAMES, slice_folder
from focus_ros.camera import Calibration
from focus_ros.events import Events
from focus_ros.sources import ecd
from focus_ros.sources.errors import EventFileError
from focus_ros.sources.recording import ImuSamples, Poses, Recording

SECOND = 1_000_000_000

#: (first, last) event time in s, or duration in s, from the slices' README
README_SPANS = {"boxes_rotation": (49.006624, 49.012158), "poster_rotation": (51.197687, 51.203009),
                "shapes_rotation": (43.499029, 43.605033)}
README_DURATIONS = {"boxes_translation": 0.0113, "poster_translation": 0.0109}


def reference_parse(path) -> Events:
    """Straightforward reference: Python's Decimal per line (exact), no numba."""
    x, y, t, p = [], [], [], []
    for line in open(path):
        words = line.split()
        t.append(int(Decimal(words[0]) * SECOND))
        x.append(int(words[1]))
        y.append(int(words[2]))
        p.append(int(words[3]))
    return Events.from_arrays(x, y, t, p)


@pytest.mark.parametrize("name", SLICE_NAMES)
def test_real_slices_read_exactly(name):
    folder = slice_folder(name)
    events = ecd.read_events(folder)
    assert len(events) == 30000
    assert events.equals(reference_parse(folder / "events.txt"))
    assert events.x.max() <= 239 and events.y.max() <= 179
    assert np.all(np.diff(events.t) >= 0)
    if name in README_SPANS:
        first, last = README_SPANS[name]
        assert abs(events.t[0] / SECOND - first) < 2e-6 and abs(events.t[-1] / SECOND - last) < 2e-6
    else:
        assert events.duration_s == pytest.approx(README_DURATIONS[name], abs=1e-4)


def test_known_lines_of_boxes_rotation():
    events = ecd.read_events(slice_folder("boxes_rotation"))
    # first line "49.006624000 192 13 0", last "49.012157999 151 95 0"
    assert (events.t[0], events.x[0], events.y[0], events.p[0]) == (49_006_624_000, 192, 13, -1)
    assert (events.t[-1], events.x[-1], events.y[-1], events.p[-1]) == (49_012_157_999, 151, 95, -1)


@pytest.mark.parametrize("chunk_events", [1, 7, 4096, 29999, 30000, 1_000_000])
def test_chunked_reading_equals_whole_reading(chunk_events, monkeypatch):
    folder = slice_folder("poster_rotation")
    whole = ecd.read_events(folder)
    monkeypatch.setattr(ecd, "_BLOCK_BYTES", 1000)  # many file blocks: lines split across reads
    chunks = list(ecd.iter_event_chunks(folder, chunk_events))
    assert all(len(c) == chunk_events for c in chunks[:-1]) and 0 < len(chunks[-1]) <= chunk_events
    assert Events.concatenate(chunks).equals(whole)


def test_write_reproduces_the_dataset_text(tmp_path):
    folder = slice_folder("shapes_rotation")
    events = ecd.read_events(folder)
    ecd.write_events(tmp_path / "events.txt", events)
    original = (folder / "events.txt").read_text().replace("\r\n", "\n")
    assert (tmp_path / "events.txt").read_text() == original


def synthetic_recording(events: Events) -> Recording:
    rng = np.random.default_rng(0)
    t = np.arange(events.t[0] - 2_000_000, events.t[-1], 1_000_000)  # 1 kHz
    quaternions = rng.normal(size=(len(t), 4))
    quaternions /= np.linalg.norm(quaternions, axis=1, keepdims=True)
    return Recording(events=events, calibration=Calibration.davis240c(),
                     imu=ImuSamples(t, rng.normal(size=(len(t), 3)), rng.normal(9.8, 1, (len(t), 3))),
                     poses=Poses(t[::5], rng.normal(size=(len(t[::5]), 3)), quaternions[::5]))


def test_folder_round_trip(tmp_path):
    recording = synthetic_recording(ecd.read_events(slice_folder("boxes_rotation")))
    ecd.write_ecd_folder(tmp_path / "seq", recording)
    assert sorted(p.name for p in (tmp_path / "seq").iterdir()) == [
        "calib.txt", "events.txt", "groundtruth.txt", "imu.txt"]
    back = ecd.read_ecd_folder(tmp_path / "seq")
    assert back.events.equals(recording.events)
    assert back.calibration == recording.calibration
    assert np.array_equal(back.imu.t, recording.imu.t)
    assert np.array_equal(back.imu.angular_velocity, recording.imu.angular_velocity)
    assert np.array_equal(back.imu.linear_acceleration, recording.imu.linear_acceleration)
    assert np.array_equal(back.poses.t, recording.poses.t)
    assert np.array_equal(back.poses.position, recording.poses.position)
    assert np.array_equal(back.poses.orientation, recording.poses.orientation)
    # the dataset's column order: imu.txt is t ax ay az gx gy gz
    first = (tmp_path / "seq" / "imu.txt").read_text().splitlines()[0].split()
    assert float(first[4]) == recording.imu.angular_velocity[0, 0]
    assert float(first[1]) == recording.imu.linear_acceleration[0, 0]


# ----------------------------------------------------------------------------------------
# Malformed files


FAULTS = {
    "wrong column count": ("49.100000000 12 13 1 7", "expected 4 columns"),
    "non-number": ("49.1000x0000 12 13 1", "not a number"),
    "negative coordinate": ("49.100000000 -12 13 1", "not a number"),
    "polarity 2": ("49.100000000 12 13 2", "polarity must be 0 or 1"),
    "time backwards": ("1.000000000 12 13 1", "timestamp goes backwards"),
    "ten decimals": ("49.1000000000 12 13 1", "more than 9 decimals"),
    "huge x": ("49.100000000 70000 13 1", "x or y does not fit in 16 bits"),
}


def corrupt_copy(tmp_path, fault_line: str, line_number: int, truncate_after: bool = False):
    """events.txt of boxes_rotation (in tmp) with one line replaced; returns (path, good events before)."""
    lines = (slice_folder("boxes_rotation") / "events.txt").read_text().splitlines()
    lines[line_number - 1] = fault_line
    if truncate_after:
        lines = lines[:line_number]
    path = tmp_path / "events.txt"
    path.write_text("\n".join(lines) + ("" if truncate_after else "\n"))
    return path, reference_parse_lines(lines[:line_number - 1])


def reference_parse_lines(lines) -> Events:
    return Events.from_arrays([int(s.split()[1]) for s in lines], [int(s.split()[2]) for s in lines],
                              [int(Decimal(s.split()[0]) * SECOND) for s in lines],
                              [int(s.split()[3]) for s in lines])


FAULT_POSITIONS = [(1, 1000), (1234, 1000), (20001, 7), (30000, 1_000_000)]


@pytest.mark.parametrize("fault,line_number,chunk_events", [
    (fault, line_number, chunk_events) for fault in FAULTS for line_number, chunk_events in FAULT_POSITIONS
    if not (fault == "time backwards" and line_number == 1)])  # the first line cannot go backwards
def test_faulty_line_is_named_and_earlier_events_are_kept(tmp_path, fault, line_number, chunk_events):
    text, message = FAULTS[fault]
    path, before = corrupt_copy(tmp_path, text, line_number)
    received = []
    with pytest.raises(EventFileError, match=f"{path}: line {line_number}: {message}"):
        for chunk in ecd.iter_event_chunks(path, chunk_events):
            received.append(chunk)
    assert Events.concatenate(received).equals(before)


@pytest.mark.parametrize("cut", ["49.012157999 151 95", "49.012157999 151", "49.01215", "49."])
def test_truncated_last_line(tmp_path, cut):
    path, before = corrupt_copy(tmp_path, cut, 30000, truncate_after=True)
    received = []
    with pytest.raises(EventFileError, match=f"line 30000: (expected 4 columns|not a number)"):
        for chunk in ecd.iter_event_chunks(path):
            received.append(chunk)
    assert Events.concatenate(received).equals(before)


def test_crlf_and_trailing_blank_lines_are_accepted(tmp_path):
    path = tmp_path / "events.txt"
    path.write_bytes(b"1.5 1 2 1\r\n1.500000001 3 4 0\r\n\r\n\n")
    events = ecd.read_events(path)
    assert events.t.tolist() == [1_500_000_000, 1_500_000_001]
    assert events.x.tolist() == [1, 3] and events.p.tolist() == [1, -1]


def test_missing_file_and_bad_side_files(tmp_path):
    with pytest.raises(FileNotFoundError):
        list(ecd.iter_event_chunks(tmp_path / "nothing.txt"))
    (tmp_path / "imu.txt").write_text("0.1 1 2 3 4 5 6\n0.2 1 2 3 4 5\n")
    with pytest.raises(EventFileError, match="imu.txt: line 2: expected 7 columns"):
        ecd.read_imu(tmp_path / "imu.txt")
    (tmp_path / "groundtruth.txt").write_text("0.2 1 2 3 0 0 0 1\n0.1 1 2 3 0 0 0 1\n")
    with pytest.raises(EventFileError, match="groundtruth.txt: line 2: timestamp goes backwards"):
        ecd.read_groundtruth(tmp_path / "groundtruth.txt")
    (tmp_path / "groundtruth.txt").write_text("0.2 1 2 x 0 0 0 1\n")
    with pytest.raises(EventFileError, match="groundtruth.txt: line 1: not a number"):
        ecd.read_groundtruth(tmp_path / "groundtruth.txt")


def test_seconds_text_is_exact():
    assert ecd.seconds_text_to_ns("49.012157999") == 49_012_157_999
    assert ecd.seconds_text_to_ns("0.1") == 100_000_000
    assert ecd.seconds_text_to_ns("7") == 7 * SECOND
    assert ecd.ns_to_seconds_text(49_012_157_999) == "49.012157999"
    for bad in ("", ".", "1.2.3", "1e-3", "-1.0", "0.1234567891"):
        with pytest.raises(ValueError):
            ecd.seconds_text_to_ns(bad)
