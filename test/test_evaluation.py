"""Evaluation (issue 6): ground truth, sign/offset check, error statistics, tables, the resumable
angular-velocity job runner and ``focus-ros evaluate`` on a short simulated sequence."""

from __future__ import annotations

import csv
import json
import math

import numpy as np
import pytest

from focus_ros.cli import main
from focus_ros.evaluation import alignment, assemble, ground_truth, metrics, angular_velocity, tables
from focus_ros.sources.recording import ImuSamples, Poses

SIMULATION = ["--simulate", "rotation_short", "--sim-end", "0.35", "--seed", "0"]
LOSSES = "variance,mean_absolute_value"
MAX_WINDOWS = "14"


def _sinusoids(t_s):
    """A smooth 3-axis test signal (rad/s) with different frequencies per axis."""
    t_s = np.asarray(t_s, dtype=np.float64)
    return np.stack([3.0 * np.sin(2 * np.pi * 0.9 * t_s), 2.0 * np.cos(2 * np.pi * 1.7 * t_s + 0.3),
                     1.5 * np.sin(2 * np.pi * 2.3 * t_s + 1.0)], axis=1)


def _ground_truth_from(function, start_s=0.0, end_s=2.0, rate_hz=1000.0):
    t_s = np.arange(start_s, end_s, 1.0 / rate_hz)
    return ground_truth.GroundTruth(np.round(t_s * 1e9).astype(np.int64), function(t_s), "test")


# ---------------------------------------------------------------------------- metrics


def test_error_statistics_match_reference_formulas_and_skip_nan_windows():
    rng = np.random.default_rng(1)
    truth = rng.normal(size=(40, 3))
    estimates = truth + rng.normal(scale=0.05, size=(40, 3))
    estimates[5] = np.nan   # degenerate window
    truth[9, 1] = np.nan    # outside the ground truth's span
    statistics = metrics.error_statistics(estimates, truth, peak_deg_s=200.0)
    errors = [[math.degrees(estimates[w, a] - truth[w, a]) for a in range(3)]
              for w in range(40) if w not in (5, 9)]
    pooled = [e for row in errors for e in row]
    mean = sum(pooled) / len(pooled)
    for axis in range(3):
        expected = math.sqrt(sum(row[axis] ** 2 for row in errors) / len(errors))
        assert statistics.rms_per_axis[axis] == pytest.approx(expected, rel=1e-12)
    assert statistics.mean == pytest.approx(mean, rel=1e-12)
    assert statistics.std == pytest.approx(math.sqrt(sum((e - mean) ** 2 for e in pooled) / len(pooled)), rel=1e-12)
    rms = math.sqrt(sum(e * e for e in pooled) / len(pooled))
    assert statistics.rms == pytest.approx(rms, rel=1e-12)
    assert statistics.rms_percent_of_peak == pytest.approx(100 * rms / 200.0, rel=1e-12)
    assert (statistics.windows, statistics.used) == (40, 38)
    norms = sorted(math.sqrt(sum(e * e for e in row)) for row in errors)  # 38 windows
    assert statistics.median_norm == pytest.approx((norms[18] + norms[19]) / 2, rel=1e-12)
    assert statistics.max_norm == pytest.approx(norms[-1], rel=1e-12)
    # 90th percentile, linear interpolation between order statistics: position 0.9 * 37 = 33.3
    assert statistics.p90_norm == pytest.approx(norms[33] + 0.3 * (norms[34] - norms[33]), rel=1e-12)
    assert statistics.above_5x_median == sum(n > 5 * statistics.median_norm for n in norms)


def test_one_wrong_window_shows_in_the_error_distribution():
    """29 windows 1 deg/s off and one 40 deg/s off: the median stays 1, the maximum is 40 and
    one window lies above 5x the median; the table says so."""
    truth = np.zeros((30, 3))
    estimates = np.tile(np.radians([1.0, 0.0, 0.0]), (30, 1))
    estimates[17] = np.radians([0.0, 40.0, 0.0])
    statistics = metrics.error_statistics(estimates, truth, peak_deg_s=100.0)
    assert statistics.median_norm == pytest.approx(1.0)
    assert statistics.max_norm == pytest.approx(40.0)
    assert statistics.above_5x_median == 1
    row = tables.TableRow("variance", "Variance", "without", statistics=statistics)
    line = tables.markdown_distribution([row], modes=("without",)).splitlines()[2]
    assert line == "| Variance | 1.00 | 1.00 | 40.0 | 40.0 | 1 |"


def test_biased_estimator_is_reported_with_its_offset():
    """Estimates = truth + a known constant bias: the table shows that bias, per axis and pooled."""
    bias_deg_s = np.array([5.0, -3.0, 2.0])
    t_ref = np.arange(30, dtype=np.int64) * 5_000_000 + 100_000_000
    truth = _ground_truth_from(_sinusoids)
    omega_true = truth.at(t_ref)
    estimates = omega_true + np.deg2rad(bias_deg_s)
    estimates[7] = np.nan
    job = angular_velocity.Job("variance", "without")
    result = angular_velocity.JobResult(job, t_ref, estimates, np.isnan(estimates[:, 0]), 900.0, 30.0)
    comparison = assemble.compare_with_ground_truth([result], truth, align="none")
    (row,) = assemble.table_rows([job, angular_velocity.Job("mean_absolute_value", "without", "degenerate")],
                                 {job.name: result}, comparison)[:1]
    assert row.statistics.rms_per_axis == pytest.approx(np.abs(bias_deg_s), abs=1e-9)
    assert row.statistics.mean == pytest.approx(bias_deg_s.mean(), abs=1e-9)
    assert row.statistics.std == pytest.approx(bias_deg_s.std(), abs=1e-9)
    assert row.statistics.rms == pytest.approx(math.sqrt(np.mean(bias_deg_s ** 2)), abs=1e-9)
    assert row.statistics.used == 29 and row.degenerate_windows == 1
    rows = assemble.table_rows([job, angular_velocity.Job("mean_absolute_value", "without", "degenerate")],
                               {job.name: result}, comparison)
    markdown = tables.markdown_details(rows, ("without",))
    assert "| Variance | 5.00 | 3.00 | 2.00 | 1.33 |" in markdown
    assert "| Mean Absolute Value | - | - | - | - | - | - | - | - |" in markdown


# ---------------------------------------------------------------------------- ground truth


def test_imu_ground_truth_is_delayed_and_interpolated_linearly():
    t_ns = np.arange(0, 10_000_000, 1_000_000, dtype=np.int64)
    omega = np.stack([t_ns * 1e-6, -2.0 * t_ns * 1e-6, np.full(len(t_ns), 0.5)], axis=1)
    imu = ImuSamples(t_ns, omega, np.zeros_like(omega))
    truth = ground_truth.from_imu(imu, delay_ns=2_400_000)
    # the sample stamped t describes t + 2.4 ms: at 5.4 ms we read the sample of 3.0 ms
    assert truth.at([5_400_000])[0] == pytest.approx([3.0, -6.0, 0.5])
    assert truth.at([5_900_000])[0] == pytest.approx([3.5, -7.0, 0.5])  # halfway between samples
    assert np.isnan(truth.at([1_000_000])).all()  # before the delayed span


def test_mocap_ground_truth_recovers_constant_body_rate():
    from scipy.spatial.transform import Rotation

    omega = np.array([0.7, -1.2, 2.5])  # rad/s in the body (camera) frame
    t_s = np.arange(0, 0.5, 0.005)
    start = Rotation.from_euler("xyz", [0.3, -0.2, 1.0])
    orientations = [start * Rotation.from_rotvec(omega * t) for t in t_s]  # R(t) = R0 exp([ω]x t)
    poses = Poses(np.round(t_s * 1e9).astype(np.int64), np.zeros((len(t_s), 3)),
                  np.array([r.as_quat() for r in orientations]))
    truth = ground_truth.from_poses(poses)
    assert truth.angular_velocity == pytest.approx(np.tile(omega, (len(t_s) - 1, 1)), abs=1e-9)


def test_ground_truth_rejects_times_that_do_not_increase():
    with pytest.raises(ValueError, match="sample 2"):
        ground_truth.GroundTruth(np.array([0, 5, 5, 9]), np.zeros((4, 3)))


# ---------------------------------------------------------------------------- alignment


def _estimates_of(function, noise=0.02, seed=0):
    t_s = np.arange(0.2, 1.8, 0.006)
    rng = np.random.default_rng(seed)
    return np.round(t_s * 1e9).astype(np.int64), function(t_s) + rng.normal(scale=noise, size=(len(t_s), 3))


def test_alignment_accepts_matching_ground_truth():
    t_ref, estimates = _estimates_of(_sinusoids)
    found = alignment.estimate_alignment(t_ref, estimates, _ground_truth_from(_sinusoids))
    assert found.reliable and list(found.signs) == [1, 1, 1]
    assert abs(found.offset_ns) <= 250_000
    assert found.warning() is None


def test_alignment_detects_an_axis_flipped_in_the_ground_truth():
    t_ref, estimates = _estimates_of(_sinusoids)
    flipped = _ground_truth_from(lambda t: _sinusoids(t) * np.array([1.0, -1.0, 1.0]))
    found = alignment.estimate_alignment(t_ref, estimates, flipped)
    assert list(found.signs) == [1, -1, 1]
    assert "axis y has the opposite sign" in found.warning()
    corrected = alignment.apply_alignment(flipped, found)
    assert corrected.at(t_ref) == pytest.approx(_sinusoids(t_ref / 1e9), abs=1e-3)


def test_alignment_detects_a_ground_truth_shifted_in_time():
    t_ref, estimates = _estimates_of(_sinusoids)
    # the ground truth lags by 12 ms: ω_gt(t) = ω(t - 12 ms), so ω(t) = ω_gt(t + 12 ms)
    late = _ground_truth_from(lambda t: _sinusoids(t - 0.012))
    found = alignment.estimate_alignment(t_ref, estimates, late)
    assert found.offset_ns == pytest.approx(12_000_000, abs=250_000)
    assert list(found.signs) == [1, 1, 1]
    assert "offset by +12.00 ms" in found.warning()
    assert found.warning(applied=True).endswith("corrected (--align auto)")


def test_alignment_is_inconclusive_without_motion():
    t_ref, estimates = _estimates_of(lambda t: np.zeros((len(t), 3)), noise=0.01)
    found = alignment.estimate_alignment(t_ref, estimates, _ground_truth_from(_sinusoids))
    assert not found.reliable and found.warning() is None


# ---------------------------------------------------------------------------- windows and jobs


def test_covered_share_is_the_time_near_an_estimate_wherever_the_stamps_fall():
    """covered_share against counting, nanosecond by nanosecond, the instants within half a
    period of a stamp; estimates one period apart cover it all whatever their phase, a skipped one
    leaves a period's hole."""
    from focus_ros.evaluation.timing import covered_share

    rng = np.random.default_rng(3)
    for _ in range(20):
        first, last, period = 1000, 1000 + int(rng.integers(200, 2000)), 2 * int(rng.integers(3, 40))
        stamps = rng.integers(first - 50, last + 50, size=int(rng.integers(0, 40)))
        instants = np.arange(first, last)
        near = np.zeros(len(instants), bool)  # each 1-ns instant by its middle (an even period: exact)
        for stamp in stamps:
            near |= np.abs(instants + 0.5 - stamp) <= period / 2
        assert covered_share(stamps, first, last, period) == pytest.approx(near.mean(), abs=1e-12)
    for phase in (0, 1, 7, 10, 19):  # every 20 ns from the first instant on, at any phase
        stamps = np.arange(phase, 10_000, 20)
        assert covered_share(stamps, 0, 10_000, 20) == pytest.approx(1.0, abs=20 / 10_000)
        assert covered_share(np.delete(stamps, 200), 0, 10_000, 20) == pytest.approx(1 - 20 / 10_000, abs=20 / 10_000)
    with pytest.raises(ValueError, match="first_ns < last_ns"):
        covered_share([5], 10, 10, 20)


def test_windows_are_consecutive_subsampled_and_limited():
    t_ns = np.arange(1000, dtype=np.int64) * 1000  # one event per µs
    windows = angular_velocity.build_windows(t_ns, 100)
    assert windows.tolist() == [[i, i + 100] for i in range(0, 1000, 100)]
    assert angular_velocity.build_windows(t_ns, 100, every=3).tolist() == [[0, 100], [300, 400], [600, 700],
                                                                           [900, 1000]]
    assert angular_velocity.build_windows(t_ns, 100, every=2, max_windows=2).tolist() == [[0, 100], [200, 300]]
    # events of [150 µs, 480 µs): indices 150..479 -> three whole windows
    assert angular_velocity.build_windows(t_ns, 100, time_range_ns=(150_000, 480_000)).tolist() == [
        [150, 250], [250, 350], [350, 450]]
    with pytest.raises(ValueError, match="--every"):
        angular_velocity.build_windows(t_ns, 100, every=0)


def test_jobs_mark_the_papers_dash_combinations():
    jobs = {job.name: job for job in angular_velocity.plan_jobs(["mean_absolute_value", "mean_timestamp",
                                                                 "local_mean_absolute_value", "variance"])}
    assert jobs["mean_absolute_value__without"].status == "degenerate"
    assert jobs["local_mean_absolute_value__without"].status == "degenerate"
    assert jobs["mean_timestamp__with"].status == "degenerate"
    assert jobs["mean_absolute_value__with"].status == "ok"
    assert jobs["variance__without"].status == jobs["variance__with"].status == "ok"
    with pytest.raises(ValueError, match="unknown loss"):
        angular_velocity.plan_jobs(["sharpness"])


def test_area_with_polarity_is_a_job_and_its_loss_is_timed(tmp_path):
    """The engine evaluates the area with polarity (sum over the positive and the negative
    count images): planned as a runnable job, run, and its loss step timed (the signed IWE
    would make the counts-only area raise). How the two timings compare (the whole evaluation
    costs more than the loss alone) is measured by benchmarks/bench_loss_timing.py."""
    jobs = {job.name: job for job in angular_velocity.plan_jobs(["area_exponential", "mean_timestamp"])}
    assert jobs["area_exponential__with"].status == "ok"
    assert jobs["area_exponential__without"].status == "ok"
    assert jobs["mean_timestamp__with"].status == "degenerate"
    from focus_ros.sources.simulator import simulate_preset
    recording = simulate_preset("rotation_short", None, 0, end_s=0.3)
    windows = angular_velocity.build_windows(recording.events.t, 20_000, max_windows=2)
    assert len(windows) == 2
    job = jobs["area_exponential__with"]
    options = angular_velocity.EstimatorOptions(blur_sigma_px=1.0)
    summary = angular_velocity.event_summary(recording.events)
    fingerprint = angular_velocity.job_fingerprint(job, windows, options, summary)
    angular_velocity.run_job(job, recording.events, recording.calibration, windows, options, tmp_path, fingerprint,
                             timing_windows=1, timing_repeats=3)
    result = angular_velocity.read_job_result(tmp_path, job)
    assert not result.degenerate.any()
    assert math.isfinite(result.us_per_evaluation) and result.us_per_evaluation > 0
    assert math.isfinite(result.us_per_loss_evaluation) and result.us_per_loss_evaluation > 0
    # the blur is part of the fingerprint: another sigma is another run
    unblurred = angular_velocity.EstimatorOptions(blur_sigma_px=0.0)
    assert fingerprint != angular_velocity.job_fingerprint(job, windows, unblurred, summary)


# ---------------------------------------------------------------------------- focus-ros evaluate


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory):
    """One short evaluation: 0.35 s of rotation_short, 14 windows, 2 losses x both polarities, 2 workers."""
    output = tmp_path_factory.mktemp("evaluation")
    code = main(["evaluate", *SIMULATION, "-o", str(output), "--losses", LOSSES, "--max-windows", MAX_WINDOWS,
                 "--workers", "2", "--quiet", "--plot-losses", "variance"])
    assert code == 0
    return output


def _read_csv(path):
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


def _true_angular_velocity(t_s):
    from focus_ros.sources.simulator import make_preset
    return make_preset("rotation_short", None, 0).trajectory.angular_velocity(np.asarray(t_s))


def test_evaluate_rms_matches_an_independent_computation_from_its_csv(evaluated):
    table = {(row["loss"], row["polarity"]): row for row in _read_csv(evaluated / "table.csv")}
    for job in ("variance__without", "variance__with", "mean_absolute_value__with"):
        estimates = _read_csv(evaluated / "estimates" / f"{job}.csv")
        assert len(estimates) == int(MAX_WINDOWS)
        t_ref = [float(row["t_ref"]) for row in estimates]
        truth = _true_angular_velocity(t_ref)  # the simulator's own profile, not the IMU samples
        errors = [[math.degrees(float(row[key]) - truth[w][a]) for a, key in enumerate(("wx", "wy", "wz"))]
                  for w, row in enumerate(estimates)]
        pooled = [e for row in errors for e in row]
        loss, polarity = job.split("__")
        row = table[(loss, polarity)]
        # 1 kHz IMU samples interpolated vs the exact profile: differences of ~1e-3 deg/s
        for axis, key in enumerate(("error_x", "error_y", "error_z")):
            assert float(row[key]) == pytest.approx(math.sqrt(sum(r[axis] ** 2 for r in errors) / len(errors)),
                                                    abs=0.01)
        assert float(row["mean"]) == pytest.approx(sum(pooled) / len(pooled), abs=0.01)
        assert float(row["rms"]) == pytest.approx(math.sqrt(sum(e * e for e in pooled) / len(pooled)), abs=0.01)
        assert float(row["us_per_evaluation"]) > 0 and float(row["us_per_loss_evaluation"]) > 0
    # the estimator works: variance errors are a small fraction of the motion
    assert float(table[("variance", "without")]["rms_percent_of_peak"]) < 5.0
    assert table[("mean_absolute_value", "without")]["status"] == "degenerate"
    assert table[("mean_absolute_value", "without")]["rms"] == ""


def test_evaluate_writes_tables_and_plots(evaluated):
    markdown = (evaluated / "table.md").read_text()
    assert "| Mean Absolute Value | - | - |" in markdown
    assert "| Variance |" in markdown
    for name in ("variance__without_estimate.png", "variance__with_errors.png", "variance__with_iwe.png"):
        assert (evaluated / "plots" / name).stat().st_size > 5000


def test_evaluate_resumes_without_redoing_finished_jobs(evaluated, capsys):
    csv_path = evaluated / "estimates" / "variance__with.csv"
    before = csv_path.stat().st_mtime_ns
    code = main(["evaluate", *SIMULATION, "-o", str(evaluated), "--losses", LOSSES, "--max-windows", MAX_WINDOWS,
                 "--workers", "2", "--quiet", "--plot-losses", "none"])
    assert code == 0
    run = json.loads((evaluated / "run.json").read_text())
    assert run["jobs_run"] == [] and len(run["jobs_skipped"]) == 3
    assert csv_path.stat().st_mtime_ns == before
    # other windows into the same folder: refused, not mixed
    code = main(["evaluate", *SIMULATION, "-o", str(evaluated), "--losses", LOSSES, "--max-windows", "5",
                 "--quiet", "--plot-losses", "none"])
    assert code == 1
    assert "holds results of a different run" in capsys.readouterr().err


def test_sign_and_offset_check_on_real_estimates(evaluated):
    """The check on the estimator's own output: a ground truth flipped on one axis or shifted is caught."""
    job = angular_velocity.Job("variance", "without")
    result = angular_velocity.read_job_result(evaluated, job)
    exact = _ground_truth_from(_true_angular_velocity, 0.0, 0.4)
    assert assemble.compare_with_ground_truth([result], exact, max_lag_ns=30_000_000).alignment.warning() is None
    flipped = exact.with_signs([1, 1, -1])
    found = assemble.compare_with_ground_truth([result], flipped, max_lag_ns=30_000_000).alignment
    assert list(found.signs) == [1, 1, -1] and "axis z" in found.warning()
    shifted = exact.shifted(8_000_000)
    comparison = assemble.compare_with_ground_truth([result], shifted, align="auto", max_lag_ns=30_000_000)
    assert comparison.alignment.offset_ns == pytest.approx(8_000_000, abs=1_000_000)
    aligned_rms = metrics.error_statistics(result.angular_velocity, comparison.truth, 300.0).rms
    shifted_rms = metrics.error_statistics(result.angular_velocity, shifted.at(result.t_ref_ns), 300.0).rms
    assert aligned_rms < 0.5 * shifted_rms


def test_evaluate_warns_about_a_shifted_imu(tmp_path, capsys):
    code = main(["evaluate", *SIMULATION, "-o", str(tmp_path), "--losses", "variance", "--polarity", "without",
                 "--max-windows", MAX_WINDOWS, "--imu-delay", "10", "--quiet", "--plot-losses", "none"])
    assert code == 0
    error = capsys.readouterr().err
    assert "ground truth is offset by" in error and "use --align auto" in error


def test_evaluate_rejects_bad_options(tmp_path, capsys):
    assert main(["evaluate", *SIMULATION, "-o", str(tmp_path), "--losses", "variance,sharpness"]) == 1
    assert "unknown loss 'sharpness'" in capsys.readouterr().err
    assert main(["evaluate", "-o", str(tmp_path)]) == 1
    assert "give a sequence path or --simulate" in capsys.readouterr().err
    assert main(["evaluate", str(tmp_path / "missing"), "-o", str(tmp_path)]) == 1
    assert "sequence not found" in capsys.readouterr().err
    with pytest.raises(SystemExit) as refused:  # the option's declared range, refused as argparse refuses
        main(["evaluate", *SIMULATION, "-o", str(tmp_path), "--blur-sigma", "-1"])
    assert refused.value.code == 2 and "--blur-sigma must be >= 0" in capsys.readouterr().err
