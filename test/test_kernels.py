"""focus_ros.kernels: numba's cache filled at install, so that a node's first launch compiles nothing.

Every check runs in a fresh Python process with its own NUMBA_CACHE_DIR (numba chooses where
it caches when a kernel's module is imported, and a process never forgets what it compiled):

- with an empty cache, every estimator kind has kernels to compile (missing_kernels says so);
- building and running a kind from an empty cache touches only the kernels of its modules
  (the table focus_ros.kernels.GROUPS), and every kernel of the package is in some group;
- after ``python -m focus_ros.kernels`` (once, module fixture: about 1 min on 2 cores),
  nothing is missing, and a fresh process that takes simulated events through a node's
  pipeline (encoded as the driver sends them, decoded, guarded, then built and run as the
  node's engine does) compiles nothing: numba's own counters (``dispatcher.stats``) show
  only cache loads;
- a changed source file makes its kernels' entries stale for missing_kernels as for numba.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time

import pytest

from numba.core.caching import FunctionCache

from focus_ros import kernels

#: a cold compile of the whole package takes about 1 min on 2 cores (2 at load 4); CI machines are shared
PRECOMPILE_TIMEOUT_S = 900


def run_python(code: str, cache_dir, timeout: float = 300) -> str:
    """Run ``code`` in a fresh interpreter whose numba caches in ``cache_dir``; its stdout (the
    test fails with stdout and stderr if it exits non-zero)."""
    environment = dict(os.environ, NUMBA_CACHE_DIR=str(cache_dir), PYTHONUNBUFFERED="1")
    completed = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=environment, cwd=cache_dir,
                               capture_output=True, text=True, timeout=timeout)
    assert completed.returncode == 0, completed.stdout + completed.stderr
    return completed.stdout


def last_json(output: str):
    return json.loads(output.strip().splitlines()[-1])


#: what every check process prints at its end: numba's counters summed over every kernel of
#: focus_ros (versions compiled, versions loaded from the cache) and the kernels that compiled
COUNTERS = """
    from focus_ros.kernels import compile_counts, modules_of
    from focus_ros.kernels.cache import compiled_kernels
    compiled, loaded = compile_counts(modules_of())
    touched = sorted(name for name, kernel in compiled_kernels(modules_of()).items() if kernel.overloads)
    print(json.dumps({"compiled": compiled, "loaded": loaded, "touched": touched, "result": result}))
"""

#: a node's path from a driver's messages to its first estimate, in one process. "simulated": a
#: simulated sequence's events encoded as the DAVIS driver publishes them (make demo's bags),
#: decoded and guarded as the node's event input does; "random": random events (no other kernel
#: than the estimator's runs).
#: Then the estimator built (its warm-up included) with the node's default settings
#: (focus_ros.kernels.precompile.node_settings) and one job run with pictures, as the node's engine
#: does (focus_ros.runtime.kinds).
NODE_PATH = """
    import json
    import numpy as np
    from focus_ros.camera import SENSORS
    from focus_ros.events import Events
    from focus_ros.kernels.precompile import node_settings
    from focus_ros.poses import Trajectory
    from focus_ros.runtime.kinds import configured_estimator, kind_named, run_job

    kind_name, source = "{kind}", "{source}"
    if source == "simulated":
        from focus_ros import codecs
        from focus_ros.sources.simulator import simulate_preset
        from focus_ros.stream import StreamGuard
        recording = simulate_preset("rotation_short" if kind_name == "angular_velocity" else "slider", duration_s=0.3)
        calibration = recording.calibration
        message = codecs.encode_event_array(recording.events, calibration.height, calibration.width, "dvs")
        events, info = codecs.EventMessageDecoder("dvs_msgs/EventArray")(message)
        events = StreamGuard(calibration.width, calibration.height).check(events).events
        trajectory = Trajectory.from_poses(recording.poses)
    else:
        calibration = SENSORS["davis240c"].lens
        generator = np.random.default_rng(7)
        count = 60000
        events = Events.from_arrays(generator.integers(0, 240, count), generator.integers(0, 180, count),
                                    np.sort(generator.integers(0, 300_000_000, count)),
                                    generator.choice([-1, 1], count))
        trajectory = Trajectory([-1, 300_000_001], [[0.0, 0.0, 0.0], [0.08, 0.0, 0.0]], [[0.0, 0.0, 0.0, 1.0]] * 2)
    if kind_name == "angular_velocity":
        window, extra = events[len(events) // 2:len(events) // 2 + 30000], True
    elif kind_name == "optical_flow":
        window, extra = events[-30000:], None
    else:
        window, extra = events, trajectory
    kind = kind_named(kind_name)
    estimator = configured_estimator(kind, None, calibration, node_settings(kind_name, calibration),
                                     keep_warm_start=False)
    outcome = run_job(kind, estimator, window, extra, images=True)
    result = type(outcome.estimate).__name__
"""


def node_path(kind: str, source: str) -> str:
    return textwrap.dedent(NODE_PATH).replace("{kind}", kind).replace("{source}", source)


@pytest.fixture(scope="module")
def filled_cache(tmp_path_factory):
    """A NUMBA_CACHE_DIR filled by ``python -m focus_ros.kernels`` from empty; (folder, its output)."""
    folder = tmp_path_factory.mktemp("numba_cache")
    environment = dict(os.environ, NUMBA_CACHE_DIR=str(folder), PYTHONUNBUFFERED="1")
    completed = subprocess.run([sys.executable, "-m", "focus_ros.kernels"], env=environment, cwd=folder,
                               capture_output=True, text=True, timeout=PRECOMPILE_TIMEOUT_S)
    assert completed.returncode == 0, completed.stdout + completed.stderr
    return folder, completed.stdout


def test_every_kernel_is_cached_and_in_a_group():
    """Every numba kernel of the package (outside the ROS layer and the command line, which have
    none) caches itself, and lives in a module of some group: precompile and missing_kernels
    see it (a new module of kernels needs its row in focus_ros.kernels.groups.GROUPS)."""
    import importlib
    import pkgutil

    import focus_ros
    from focus_ros.kernels.cache import module_kernels

    grouped = set(kernels.modules_of())
    found = {}
    for module in pkgutil.walk_packages(focus_ros.__path__, "focus_ros."):
        if module.name.startswith(("focus_ros.ros", "focus_ros.cli")) or module.name.endswith("__main__"):
            continue
        importlib.import_module(module.name)
        found.update(module_kernels(module.name))
    assert len(found) > 60  # the walk found the package's kernels (87 on 2026-11-27)
    assert sorted({name.rpartition(".")[0] for name in found} - grouped) == []
    assert [name for name, kernel in found.items() if not isinstance(kernel._cache, FunctionCache)] == []


@pytest.mark.parametrize("kind", kernels.KINDS)
def test_a_cold_kind_has_kernels_to_compile_and_touches_only_its_modules(kind, tmp_path):
    """From an empty cache: missing_kernels(kind) lists kernels; building the kind with the node's
    defaults and running one job then compiles some, every one of them in the kind's own modules
    and among those listed; afterwards they are no longer missing."""
    output = run_python(textwrap.dedent(f"""
        import json
        from focus_ros.kernels import missing_kernels
        print(json.dumps(missing_kernels("{kind}")))
    """) + node_path(kind, "random") + textwrap.dedent(COUNTERS) + textwrap.dedent(f"""
        print(json.dumps(missing_kernels("{kind}")))
    """), tmp_path)
    lines = output.strip().splitlines()
    before, counters, after = json.loads(lines[0]), json.loads(lines[-2]), json.loads(lines[-1])
    assert before, "an empty cache, yet nothing to compile"
    assert counters["compiled"] > 0 and counters["touched"]
    outside = [name for name in counters["touched"] if name.rpartition(".")[0] not in kernels.modules_of(kind)]
    assert outside == [], f"{kind} ran kernels outside its modules in focus_ros.kernels.GROUPS"
    assert not set(counters["touched"]) & set(after), "kernels compiled and cached are still reported missing"
    assert set(counters["touched"]) <= set(before)


def test_precompile_reports_each_group(filled_cache):
    folder, output = filled_cache
    for name in kernels.GROUPS:
        assert f"   {name} " in output, output
    assert str(folder) in output  # says where the cache is
    assert "total" in output


def test_after_precompile_nothing_is_missing_and_the_check_is_fast(filled_cache):
    folder, _ = filled_cache
    counts = last_json(run_python("""
        import json, time
        from focus_ros.kernels import KINDS, GROUPS, missing_kernels, modules_of
        from focus_ros.kernels.cache import compiled_kernels
        compiled_kernels(modules_of())     # imports every module (a node has imported its own)
        started = time.perf_counter()
        missing = {name: missing_kernels(name) for name in list(GROUPS) + [None]}
        elapsed = time.perf_counter() - started
        print(json.dumps({"missing": {str(k): v for k, v in missing.items()}, "seconds": elapsed,
                          "kernels": len(compiled_kernels(modules_of()))}))
    """, folder))
    assert counts["missing"] == {name: [] for name in list(kernels.GROUPS) + ["None"]}
    assert counts["kernels"] > 50
    assert counts["seconds"] < 0.5 * (len(kernels.GROUPS) + 1)  # under 0.5 s per call (measured: ~0.02 s)


@pytest.mark.parametrize("kind", kernels.KINDS)
def test_after_precompile_a_nodes_first_job_compiles_nothing(filled_cache, kind):
    folder, _ = filled_cache
    counters = last_json(run_python(node_path(kind, "simulated") + textwrap.dedent(COUNTERS), folder))
    assert counters["result"] in ("WindowEstimate", "FlowEstimate", "DepthKeyframe")
    assert counters["loaded"] > 0, "the counters saw no kernel at all"
    assert counters["compiled"] == 0, f"compiled although precompiled: {counters}"


def test_a_changed_source_is_stale_for_missing_kernels_as_for_numba(tmp_path):
    """numba's staleness rule, seen by has_usable_entry: a kernel in a module outside focus_ros
    is compiled (entry usable), its file changed (entry stale: numba compiles again, and
    has_usable_entry said it would)."""
    package = tmp_path / "package"
    package.mkdir()
    source = package / "kernel_module.py"
    source.write_text("import numba\n\n@numba.njit(cache=True)\ndef twice(x):\n    return 2 * x\n")
    probe = """
        import json, sys
        sys.path.insert(0, {package!r})
        import kernel_module
        from focus_ros.kernels.cache import has_usable_entry
        usable = has_usable_entry(kernel_module.twice)
        kernel_module.twice(3.0)
        print(json.dumps([usable, sum(kernel_module.twice.stats.cache_misses.values())]))
    """.replace("{package!r}", repr(str(package)))
    cache = tmp_path / "cache"
    cache.mkdir()
    assert last_json(run_python(probe, cache)) == [False, 1]   # empty: would compile, compiled
    assert last_json(run_python(probe, cache)) == [True, 0]    # cached: loads
    source.write_text(source.read_text() + "\n# an edit\n")
    assert last_json(run_python(probe, cache)) == [False, 1]   # stale: would compile, compiled


def test_compile_subcommand_checks_without_compiling(filled_cache):
    """``focus-ros compile --check`` lists nothing on a filled cache (exit 0) and lists the
    missing kernels on an empty one (exit 1)."""
    folder, _ = filled_cache
    environment = dict(os.environ, NUMBA_CACHE_DIR=str(folder))
    command = [sys.executable, "-m", "focus_ros.cli", "compile", "--check"]
    filled = subprocess.run(command, env=environment, cwd=folder, capture_output=True, text=True, timeout=120)
    assert filled.returncode == 0 and "nothing to compile" in filled.stdout, filled.stdout + filled.stderr
    empty_folder = folder.parent / "empty_numba_cache"
    empty_folder.mkdir(exist_ok=True)
    started = time.monotonic()
    empty = subprocess.run(command, env=dict(environment, NUMBA_CACHE_DIR=str(empty_folder)), cwd=folder,
                           capture_output=True, text=True, timeout=120)
    assert empty.returncode == 1 and "would compile: focus_ros.depth.dsi._rays" in empty.stdout, empty.stdout
    assert time.monotonic() - started < 30  # nothing compiled (a compile of everything takes minutes)
    assert not any(empty_folder.rglob("*.nbi"))


def test_a_second_run_for_the_same_sources_does_nothing(filled_cache):
    """``--if-changed`` (what setup.py runs at every colcon build, and make after a change of
    focus_ros/) finds the fingerprint of the fixture's complete run and compiles nothing."""
    from focus_ros.kernels.cache import sources_fingerprint

    folder, _ = filled_cache
    recorded = [path.read_text().strip() for path in folder.rglob("focus_ros_kernels.sources")]
    assert len(recorded) == 1, "the complete run recorded no fingerprint of its sources"
    if recorded[0] != sources_fingerprint():
        pytest.skip("focus_ros's sources were edited while these tests ran: a recompilation is right")
    started = time.monotonic()
    completed = subprocess.run([sys.executable, "-m", "focus_ros.kernels", "--fresh", "--if-changed"],
                               env=dict(os.environ, NUMBA_CACHE_DIR=str(folder)), cwd=folder, capture_output=True,
                               text=True, timeout=120)
    assert completed.returncode == 0 and "nothing to do" in completed.stdout, completed.stdout + completed.stderr
    assert time.monotonic() - started < 30   # a compilation takes minutes
    assert any(folder.rglob("*.nbi"))        # and --fresh removed nothing
