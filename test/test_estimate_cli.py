"""`focus-ros estimate` on a small ECD folder built from the real slice."""

import csv
import shutil

import numpy as np
import pytest

from conftest import slice_folder
from focus_ros.cli import main
from focus_ros.commands.estimate import CSV_COLUMNS, _read_text_event_chunks


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


def test_streaming_reader_chunks_and_bad_line(tmp_path):
    path = tmp_path / "events.txt"
    lines = [f"{0.001 * i:.9f} {i % 240} {i % 180} {i % 2}" for i in range(1000)]
    path.write_text("\n".join(lines) + "\n")
    chunks = list(_read_text_event_chunks(path, chunk_bytes=997))
    assert len(chunks) > 10
    assert sum(len(chunk) for chunk in chunks) == 1000
    assert np.concatenate([chunk.t for chunk in chunks])[-1] == 999_000_000
    lines[500] = "0.5 12 oops 1"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(ValueError, match=r"events.txt:501: "):
        list(_read_text_event_chunks(path, chunk_bytes=997))
