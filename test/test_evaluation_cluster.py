"""Evaluation grids on a real Ray cluster (issue 35): a head and a worker node of one CPU each on
loopback (``ray start`` in subprocesses, test/ray_cluster.py), two seeded simulated rotations x
three losses of the angular velocity and of the optical flow.

The promise checked: the same jobs give the same files on Ray as on the local process pool —
byte for byte, except the columns that measure this machine's speed (µs per evaluation, ms per
window: they differ between two local runs too) — even when a Ray worker is SIGKILLed in the
middle of a job (Ray retries it) or the driver is stopped with Ctrl-C and run again (it resumes
from the jobs written). And the one-line errors: Ray missing, a cluster unreachable.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from focus_ros.cli import main

sys.path.insert(0, str(Path(__file__).parent))
from ray_cluster import LoopbackRayCluster, free_port  # noqa: E402

LOSSES = "variance,gradient_magnitude,area_exponential"
SEQUENCES = ["--simulate", "rotation_short", "--sim-end", "0.3", "--seed", "0,1"]  # 2 sequences
EVALUATE = ["evaluate", *SEQUENCES, "--losses", LOSSES, "--polarity", "without", "--max-windows", "12",
            "--plot-losses", "variance", "--quiet"]
EVALUATE_FLOW = ["evaluate-flow", *SEQUENCES, "--losses", LOSSES, "--max-windows", "3", "--quiet"]
JOBS = 6  # per command: 2 sequences x 3 losses
#: files that record this run (times, pids) rather than results
RUN_RECORDS = {"grid_run.json", "run.json"}
#: table columns measuring this machine's speed (CSV names; Markdown headers contain µs or ms)
TIMING_COLUMNS = {"us_per_evaluation", "us_per_loss_evaluation", "median_ms_per_window"}


# ---------------------------------------------------------------------------- comparing outputs


def _result_files(folder: Path) -> dict[str, Path]:
    """Relative path -> file of an output folder, without run records, the per-job metadata
    (timings) and the stored job results (their timings), which the tables are made from."""
    files = {}
    for path in sorted(folder.rglob("*")):
        relative = path.relative_to(folder).as_posix()
        if path.is_file() and path.name not in RUN_RECORDS and not (
                "/estimates/" in f"/{relative}" and path.suffix == ".json") and "/jobs/" not in f"/{relative}":
            files[relative] = path
    return files


def _without_timings(path: Path) -> bytes:
    """The file's bytes, timing columns of its tables blanked (CSV by name, Markdown by header)."""
    data = path.read_bytes()
    if path.suffix == ".csv":
        rows = list(csv.reader(io.StringIO(data.decode(), newline="")))
        masked = [index for index, name in enumerate(rows[0]) if name in TIMING_COLUMNS] if rows else []
        for row in rows[1:]:
            for index in masked:
                row[index] = "-"
        text = io.StringIO(newline="")
        csv.writer(text).writerows(rows)
        return text.getvalue().encode()
    if path.suffix == ".md":
        lines, masked = data.decode().splitlines(), []
        for number, line in enumerate(lines):
            if not line.startswith("|"):
                masked = []
            elif number + 1 < len(lines) and lines[number + 1].startswith("|---"):
                masked = [i for i, cell in enumerate(line.split("|")) if re.search(r"µs|\bms\b", cell)]
            elif not line.startswith("|---"):
                cells = line.split("|")
                lines[number] = "|".join("-" if i in masked else cell for i, cell in enumerate(cells))
        return "\n".join(lines).encode()
    return data


def assert_same_results(expected: Path, actual: Path) -> None:
    expected_files, actual_files = _result_files(expected), _result_files(actual)
    assert list(actual_files) == list(expected_files)
    assert any(name.endswith(".png") for name in expected_files) and any(
        name.endswith(".csv") for name in expected_files)
    for name, path in expected_files.items():
        assert _without_timings(actual_files[name]) == _without_timings(path), name


def test_the_comparison_sees_a_changed_estimate_but_not_a_changed_timing(tmp_path):
    """The masking of timing columns hides only them: one changed digit elsewhere is a difference."""
    table = tmp_path / "a.csv"
    table.write_text("loss,us_per_evaluation,rms\r\nvariance,281.9,1.52\r\n")
    other = tmp_path / "b.csv"
    other.write_text("loss,us_per_evaluation,rms\r\nvariance,300.1,1.52\r\n")
    assert _without_timings(table) == _without_timings(other)
    other.write_text("loss,us_per_evaluation,rms\r\nvariance,281.9,1.53\r\n")
    assert _without_timings(table) != _without_timings(other)
    markdown = tmp_path / "a.md"
    markdown.write_text("# t\n\n| Focus loss | RMS | µs/eval w/o | CPU ms/window (median) |\n|---|---|---|---|\n"
                        "| Variance | 1.52 | 282 | 166.0 |\n")
    changed = tmp_path / "b.md"
    changed.write_text(markdown.read_text().replace("282 | 166.0", "290 | 170.2"))
    assert _without_timings(markdown) == _without_timings(changed)
    changed.write_text(markdown.read_text().replace("1.52", "1.55"))
    assert _without_timings(markdown) != _without_timings(changed)


# ---------------------------------------------------------------------------- the cluster


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """A head node and a worker node, one CPU each, on loopback; stopped after the module's tests,
    checked to leave no process behind."""
    pytest.importorskip("ray", reason="Ray is not installed: pip install 'focus_ros[ray]' (make setup does)")
    folder = tmp_path_factory.mktemp("ray")
    cluster = LoopbackRayCluster(folder, nodes=2, cpus=1).start()
    assert len(cluster.raylets()) == 2
    yield cluster
    cluster.stop()
    assert cluster.alive() == [], "processes of the Ray cluster still running after stop"


@pytest.fixture(scope="module")
def local_results(tmp_path_factory):
    """The grid of both commands run locally (a pool of 2 processes): the reference."""
    folder = tmp_path_factory.mktemp("local")
    assert main([*EVALUATE, "-o", str(folder / "evaluate"), "--workers", "2"]) == 0
    assert main([*EVALUATE_FLOW, "-o", str(folder / "flow"), "--workers", "2"]) == 0
    return folder


def _cli(*arguments, **options) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "focus_ros.cli", *map(str, arguments)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, **options)


def _wait(process: subprocess.Popen, timeout_s: float = 120) -> tuple[int, str]:
    _, error = process.communicate(timeout=timeout_s)
    return process.returncode, error


def test_a_worker_killed_mid_job_costs_a_retry_not_a_result(cluster, local_results, tmp_path):
    """evaluate on Ray, the workers reading the events from the output folder (a shared path: the
    same machine): one worker SIGKILLed while it runs a job; the run still succeeds with every
    job once, and its files are the local run's."""
    output = tmp_path / "evaluate"
    driver = _cli(*EVALUATE, "-o", output, "--ray", cluster.address)
    killed = None
    while driver.poll() is None and killed is None:
        busy = cluster.workers("ray::run_grid_job")
        if busy:
            time.sleep(0.2)  # into the job
            if busy[0] in cluster.workers("ray::run_grid_job"):
                os.kill(busy[0], signal.SIGKILL)
                killed = busy[0]
        time.sleep(0.02)
    code, error = _wait(driver)
    assert code == 0, error
    assert killed is not None, "no worker was seen running a job"
    record = json.loads((output / "grid_run.json").read_text())
    assert sorted(record["ran"]) == sorted(set(record["ran"])) and len(record["ran"]) == JOBS
    assert record["failed"] == {} and record["executor"].startswith("Ray at")
    assert {job["pid"] for job in record["jobs"].values()} - {killed}, "no job ran on a surviving worker"
    # fresh Ray workers load the kernels from numba's cache, as pool workers do (compiling: about a minute)
    assert max(job["wall_s"] for job in record["jobs"].values()) < 20
    assert_same_results(local_results / "evaluate", output)
    assert not list(output.rglob("events_store")), "the event store is removed after the run"


def test_ctrl_c_on_ray_keeps_finished_jobs_and_the_rerun_resumes(cluster, local_results, tmp_path):
    """evaluate-flow on Ray with the events shipped through the object store: Ctrl-C once the
    first job is written stops the run (exit 130) with some jobs written; the same command again
    runs only the others, and the files are the local run's."""
    output = tmp_path / "flow"
    command = [*EVALUATE_FLOW, "-o", output, "--ray", cluster.address, "--ship-data"]
    driver = _cli(*command)
    while driver.poll() is None and not list(output.glob("*/jobs/*.pickle")):
        time.sleep(0.02)
    driver.send_signal(signal.SIGINT)
    code, error = _wait(driver)
    assert code == 130, error
    assert error.strip().endswith("focus-ros evaluate-flow: interrupted"), error
    written = len(list(output.glob("*/jobs/*.pickle")))
    assert 0 < written < JOBS, f"{written} jobs written: the interruption was not in the middle of the run"
    code, error = _wait(_cli(*command))
    assert code == 0, error
    record = json.loads((output / "grid_run.json").read_text())
    assert len(record["skipped"]) == written and len(record["ran"]) == JOBS - written
    assert "data shipped" in record["executor"]
    assert_same_results(local_results / "flow", output)


# ---------------------------------------------------------------------------- one-line errors


def test_ray_missing_is_one_line_saying_how_to_install_it(tmp_path):
    """A PYTHONPATH whose 'ray' cannot be imported (as when Ray is not installed)."""
    hidden = tmp_path / "hide" / "ray"
    hidden.mkdir(parents=True)
    (hidden / "__init__.py").write_text("raise ImportError(\"No module named 'ray'\")\n")
    environment = dict(os.environ, PYTHONPATH=os.pathsep.join([str(hidden.parent), os.environ.get("PYTHONPATH", "")]))
    code, error = _wait(_cli(*EVALUATE_FLOW, "-o", tmp_path / "out", "--ray", env=environment))
    assert code == 1
    assert error.strip() == ("focus-ros evaluate-flow: error: --ray needs Ray, which is not installed: "
                             "pip install 'focus_ros[ray]' (or: pip install ray)")
    assert not (tmp_path / "out").exists()


def test_an_unreachable_cluster_is_one_line(tmp_path):
    started = time.monotonic()
    port = free_port()
    code, error = _wait(_cli(*EVALUATE, "-o", tmp_path / "out", "--ray", f"127.0.0.1:{port}"))
    assert code == 1 and time.monotonic() - started < 30
    lines = error.strip().splitlines()
    assert len(lines) == 1 and f"cannot reach a Ray cluster at '127.0.0.1:{port}'" in lines[0], error


def test_ship_data_needs_ray(tmp_path, capsys):
    assert main([*EVALUATE_FLOW, "-o", str(tmp_path / "out"), "--ship-data"]) == 1
    assert "--ship-data goes with --ray" in capsys.readouterr().err
