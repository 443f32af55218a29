"""Run an evaluation grid (sequence x task x loss x setting jobs) on this machine's cores or on
a Ray cluster: the one executor behind ``focus-ros evaluate``, ``evaluate-depth`` and
``evaluate-flow``.

A **job** (:class:`GridJob`) is one unit of an evaluation: a (loss, polarity) of the angular
velocity on one sequence, a loss of the optical flow, a polarity mode of the depth. It names a
module-level function, its (small, picklable) arguments, the sequence whose events it reads,
a fingerprint (a hash of everything its result depends on) and the store its result goes to.

The flow of :func:`run_grid`, on the driver (the process that runs the command):

1. every job whose store holds a result with its fingerprint is skipped (resume);
2. each sequence a pending job needs is **delivered** once: written as .npy files to
   ``<its output folder>/events_store`` that the workers memory-map (a job reads the pages of
   its windows only), or, with Ray and ``ship_data``, put once into Ray's object store
   (``ray.put``: only the event range the sequence's jobs use, sent once per node);
3. the executor runs the pending jobs: :class:`LocalExecutor` (a process pool of ``workers``
   processes, forked, as before; one worker runs them in this process) or
   :class:`RayExecutor` (one Ray task per job, ``max_retries``: a worker process or node that
   dies costs a retry of its jobs);
4. a finished job's result comes back to the driver, which writes it to the job's store
   atomically (whole or not at all) as soon as it arrives: a job retried by Ray is written
   once, a run stopped with Ctrl-C keeps what was written and the next run resumes from it;
5. the results are returned **in job order** (not completion order), so that tables and
   figures assembled from them are the same bytes whichever executor ran the jobs.

The progress bar counts jobs (done, in flight, failed); :class:`GridReport` gives the wall
time, the CPU time of the jobs (their processes' ``time.process_time``) and the speed-up over
running the same jobs one after the other (sum of the jobs' wall times / the grid's wall time).

Ray is imported only when a :class:`RayExecutor` is created (the extra ``focus_ros[ray]``).
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import pickle
import socket
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator, Protocol

import numpy as np

from focus_ros.events import Events

EVENT_FIELDS = ("x", "y", "t", "p")
#: Ray retries a job this many times when its worker process or node dies (not when it raises)
RAY_MAX_RETRIES = 3
#: seconds to wait for a cluster address to accept a connection before saying it is unreachable
CONNECT_TIMEOUT_S = 5.0
INSTALL_HINT = "pip install 'focus_ros[ray]' (or: pip install ray)"


class GridError(ValueError):
    """A problem with the executor's options or cluster (printed as one line by the CLI)."""


# ---------------------------------------------------------------------------- jobs and stores


class ResultStore(Protocol):
    """Where a job's result lives on the driver: ``load`` gives the stored result of a job with
    its fingerprint or None (not run yet, or run with other inputs); ``save`` writes it atomically."""

    def load(self, job: "GridJob"): ...

    def save(self, job: "GridJob", result) -> None: ...


@dataclass(frozen=True)
class GridJob:
    """One job: ``function(data, **arguments)`` with ``data`` the :class:`SequenceData` of
    ``sequence``; ``key`` names it (unique within a grid); ``fingerprint`` hashes what its result
    depends on; ``store`` keeps its result (on the driver only: never sent to a worker)."""

    key: str
    sequence: str
    function: Callable
    arguments: dict
    fingerprint: str
    store: ResultStore = field(compare=False, repr=False)


def fingerprint(*parts) -> str:
    """A 16-hex-digit hash of picklable parts (settings dataclasses, arrays, numbers, strings):
    equal parts give equal fingerprints in the same Python and numpy versions."""
    digest = hashlib.sha256()
    for part in parts:
        if isinstance(part, np.ndarray):
            digest.update(f"{part.dtype.str}{part.shape}".encode())
            digest.update(np.ascontiguousarray(part).tobytes())
        else:
            digest.update(pickle.dumps(part, protocol=4))
    return digest.hexdigest()[:16]


def write_atomically(path: Path, data: bytes | str) -> None:
    """Write a file whole or not at all (a temporary file in the same folder, then a rename)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_bytes(data.encode() if isinstance(data, str) else data)
    os.replace(temporary, path)


class PickleStore:
    """Results as ``<folder>/<job key>.pickle`` holding {fingerprint, result}. A file with another
    fingerprint (other settings, windows or data) is treated as absent: the job runs again and
    replaces it."""

    def __init__(self, folder: Path):
        self.folder = Path(folder)

    def path(self, job: GridJob) -> Path:
        return self.folder / f"{job.key.replace('/', '__')}.pickle"

    def load(self, job: GridJob):
        path = self.path(job)
        if not path.is_file():
            return None
        try:
            stored = pickle.loads(path.read_bytes())
        except Exception:  # a file from another version of the code: run the job again
            return None
        return stored["result"] if stored.get("fingerprint") == job.fingerprint else None

    def save(self, job: GridJob, result) -> None:
        write_atomically(self.path(job), pickle.dumps({"fingerprint": job.fingerprint, "result": result}, protocol=4))


# ---------------------------------------------------------------------------- sequence data


@dataclass
class SequenceData:
    """What a job reads: a recording (calibration, ground truth, ...) whose events are the
    sequence's events [offset, offset + len(events)) — all of them, or the range shipped."""

    recording: object
    offset: int = 0

    @property
    def events(self) -> Events:
        return self.recording.events

    def window(self, start: int, end: int) -> Events:
        """A copy of the sequence's events [start, end) (indices of the whole sequence)."""
        begin, stop = start - self.offset, end - self.offset
        if begin < 0 or stop > len(self.events.t):
            raise ValueError(f"events [{start}, {end}) are outside the data delivered [{self.offset}, "
                             f"{self.offset + len(self.events.t)})")
        return Events(*(np.array(getattr(self.events, name)[begin:stop]) for name in EVENT_FIELDS))


@dataclass(frozen=True)
class SequenceInput:
    """A sequence as the driver hands it to :func:`run_grid`: its recording, the event index
    range [first, last) its jobs read, and the folder for its event store (the sequence's output
    folder: on a path every node sees when Ray workers read it)."""

    name: str
    recording: object
    event_range: tuple[int, int]
    folder: Path

    @classmethod
    def of_windows(cls, name: str, recording, windows: np.ndarray, folder: Path) -> "SequenceInput":
        """The input of jobs that read windows (W, 2) [start, stop) of event indices: their range."""
        return cls(name, recording, (int(windows[0, 0]), int(windows[-1, 1])), folder)


@dataclass(frozen=True)
class StoredSequence:
    """A sequence written to a folder by :func:`write_sequence_store`: the handle sent to workers;
    written_ns tells one writing from the next (a worker opens each writing once)."""

    folder: str
    written_ns: int


def write_sequence_store(recording, folder: Path) -> StoredSequence:
    """The recording's events as x.npy, y.npy, t.npy, p.npy and the rest (calibration, ground
    truth) as recording.pickle in ``folder``, for workers to memory-map (a job then reads from
    disk only the pages of its windows). Rewritten every run (a few 100 MB/s)."""
    folder = Path(folder).resolve()
    folder.mkdir(parents=True, exist_ok=True)
    for name in EVENT_FIELDS:
        temporary = folder / f"{name}.tmp.npy"
        np.save(temporary, np.asarray(getattr(recording.events, name)))
        os.replace(temporary, folder / f"{name}.npy")
    rest = dataclasses.replace(recording, events=None)
    write_atomically(folder / "recording.pickle", pickle.dumps(rest, protocol=4))
    return StoredSequence(str(folder), time.time_ns())


def remove_sequence_store(folder: Path) -> None:
    """Delete an event store (rebuilt from the sequence by the next run that needs it)."""
    folder = Path(folder)
    for name in (*(f"{name}.npy" for name in EVENT_FIELDS), "recording.pickle"):
        (folder / name).unlink(missing_ok=True)
    try:
        folder.rmdir()
    except OSError:
        pass


_opened: dict = {}  # in a worker process: StoredSequence -> SequenceData (opened once)


def open_data(handle) -> SequenceData:
    """The SequenceData behind a handle, in a worker: itself, or a store memory-mapped read-only
    (once per process)."""
    if isinstance(handle, SequenceData):
        return handle
    data = _opened.get(handle)
    if data is None:
        folder = Path(handle.folder)
        rest = pickle.loads((folder / "recording.pickle").read_bytes())
        events = Events(*(np.load(folder / f"{name}.npy", mmap_mode="r") for name in EVENT_FIELDS))
        data = _opened[handle] = SequenceData(dataclasses.replace(rest, events=events), 0)
    return data


# ---------------------------------------------------------------------------- one job, anywhere


@dataclass
class Outcome:
    """A finished job as it comes back to the driver: its result, the process and host that ran
    it, and its wall and CPU time (s; CPU: the process's, all its threads)."""

    result: object
    pid: int
    host: str
    wall_s: float
    cpu_s: float


def run_grid_job(function: Callable, arguments: dict, handle) -> Outcome:
    """Run one job in this process (a pool worker, a Ray worker, or the driver itself)."""
    wall, cpu = time.perf_counter(), time.process_time()
    result = function(open_data(handle), **arguments)
    return Outcome(result, os.getpid(), socket.gethostname(), time.perf_counter() - wall, time.process_time() - cpu)


# ---------------------------------------------------------------------------- executors


class Executor(Protocol):
    """Runs jobs: ``start(pending)`` before the first, ``deliver(sequence)`` gives the handle
    its jobs get, ``run(tasks)`` yields (index, Outcome or the exception) as they finish,
    ``close()`` at the end. ``slots``: jobs that run at once; ``name``: for the report."""

    slots: int
    name: str

    def start(self, pending: int) -> None: ...

    def deliver(self, sequence: SequenceInput): ...

    def run(self, tasks: list) -> Iterator[tuple[int, object]]: ...

    def close(self) -> None: ...


class LocalExecutor:
    """This machine: a pool of ``workers`` forked processes (default: every core), each job's
    events memory-mapped from the sequence's event store; with one worker, or one job, the jobs
    run in this process on the recording itself."""

    def __init__(self, workers: int | None = None):
        self.workers = (os.cpu_count() or 1) if workers is None else max(1, int(workers))
        self.slots = self.workers
        self.name = f"local, {self.workers} process{'es' if self.workers > 1 else ''}"
        self._in_process = True
        self._stores: list[Path] = []

    def start(self, pending: int) -> None:
        self._in_process = self.workers == 1 or pending <= 1
        self.slots = 1 if self._in_process else min(self.workers, pending)

    def deliver(self, sequence: SequenceInput):
        if self._in_process:
            return SequenceData(sequence.recording, 0)
        store = write_sequence_store(sequence.recording, Path(sequence.folder) / "events_store")
        self._stores.append(Path(store.folder))
        return store

    def run(self, tasks: list) -> Iterator[tuple[int, object]]:
        if self._in_process:
            for index, function, arguments, handle in tasks:
                try:
                    yield index, run_grid_job(function, arguments, handle)
                except Exception as error:  # a failed job is reported, the others go on
                    yield index, error
            return
        yield from self._run_in_pool(tasks)

    def _run_in_pool(self, tasks: list) -> Iterator[tuple[int, object]]:
        import multiprocessing

        context = multiprocessing.get_context("fork" if sys.platform.startswith("linux") else "spawn")
        pool = context.Pool(self.slots, initializer=_ignore_interrupts)
        try:
            waiting = {index: pool.apply_async(run_grid_job, (function, arguments, handle))
                       for index, function, arguments, handle in tasks}
            while waiting:
                finished = [index for index, result in waiting.items() if result.ready()]
                if not finished:
                    time.sleep(0.05)
                for index in finished:
                    result = waiting.pop(index)
                    try:
                        yield index, result.get()
                    except Exception as error:
                        yield index, error
            pool.close()
        except BaseException:
            pool.terminate()
            raise
        finally:
            pool.join()

    def close(self) -> None:
        for folder in self._stores:
            remove_sequence_store(folder)
        self._stores.clear()


def _ignore_interrupts() -> None:
    """Pool workers leave Ctrl-C to the driver (which terminates the pool)."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)


class RayExecutor:
    """A Ray cluster: ``address`` "auto" (the cluster this machine belongs to, or RAY_ADDRESS),
    "local" (start one on this machine, ``workers`` CPUs, stopped at the end) or HOST:PORT (a
    head node's GCS port, 6379 by default). One task per job (1 CPU, ``max_retries``
    RAY_MAX_RETRIES). ``ship_data``: each sequence's event range goes through the object store;
    otherwise workers memory-map the event store in the sequence's output folder, which must then
    be on a path every node sees at the same place (NFS)."""

    def __init__(self, address: str = "auto", ship_data: bool = False, workers: int | None = None):
        ray = import_ray()
        self.ray = ray
        self.ship_data = ship_data
        self._stores: list[Path] = []
        self._connect(address, workers)
        self.slots = max(1, int(ray.cluster_resources().get("CPU", 1)))
        self.name = (f"Ray at {address}, {self.slots} CPU{'s' if self.slots > 1 else ''} on "
                     f"{len([n for n in ray.nodes() if n.get('Alive')])} node(s)"
                     + (", data shipped" if ship_data else ", data on a shared path"))
        self._remote = ray.remote(num_cpus=1, max_retries=RAY_MAX_RETRIES)(run_grid_job)

    def _connect(self, address: str, workers: int | None) -> None:
        import logging

        environment = {name: os.environ[name] for name in ("NUMBA_CACHE_DIR",) if name in os.environ}
        options = dict(logging_level=logging.ERROR, log_to_driver=False, configure_logging=True,
                       runtime_env={"env_vars": environment} if environment else None)
        if address == "local":
            self.ray.init(num_cpus=workers, include_dashboard=False, **options)
            return
        if address != "auto":
            check_reachable(address)
        try:
            self.ray.init(address=address, **options)
        except Exception as error:  # no cluster found, another Ray or Python version, ...
            first = (str(error).strip().splitlines() or [type(error).__name__])[0]
            raise GridError(f"cannot connect to a Ray cluster at '{address}': {first}") from None

    def start(self, pending: int) -> None:
        pass

    def deliver(self, sequence: SequenceInput):
        if self.ship_data:
            first, last = sequence.event_range
            events = sequence.recording.events
            part = Events(*(np.ascontiguousarray(getattr(events, name)[first:last]) for name in EVENT_FIELDS))
            return self.ray.put(SequenceData(dataclasses.replace(sequence.recording, events=part), first))
        store = write_sequence_store(sequence.recording, Path(sequence.folder) / "events_store")
        self._stores.append(Path(store.folder))
        return store

    def run(self, tasks: list) -> Iterator[tuple[int, object]]:
        """Submit every task, yield them as they finish. Stopped early (Ctrl-C), the unfinished
        tasks end with the driver's disconnection in :meth:`close` (Ray stops a job's workers when
        its driver leaves; cancelling them one by one raced with their replies in Ray 2.60)."""
        ray = self.ray
        references = {self._remote.remote(function, arguments, handle): index
                      for index, function, arguments, handle in tasks}
        while references:
            ready, _ = ray.wait(list(references), num_returns=1, timeout=0.5)
            for reference in ready:
                index = references.pop(reference)
                try:
                    yield index, ray.get(reference)
                except ray.exceptions.RayTaskError as error:  # the job raised: its own exception
                    yield index, error.as_instanceof_cause()
                except ray.exceptions.RayError as error:  # retries exhausted, object lost, ...
                    yield index, error

    def close(self) -> None:
        for folder in self._stores:
            remove_sequence_store(folder)
        self._stores.clear()
        self.ray.shutdown()


def import_ray():
    """The ray module, or GridError with the one line saying how to install it."""
    try:
        import ray
    except ImportError:
        raise GridError(f"--ray needs Ray, which is not installed: {INSTALL_HINT}") from None
    return ray


def check_reachable(address: str, timeout_s: float = CONNECT_TIMEOUT_S) -> None:
    """GridError in one line when nothing accepts a TCP connection at HOST[:PORT] (Ray's own
    attempt waits for minutes, printing warnings)."""
    host, _, port = address.rpartition(":") if ":" in address else (address, "", "6379")
    host = host.removeprefix("ray://") or address
    try:
        with socket.create_connection((host, int(port)), timeout=timeout_s):
            pass
    except (OSError, ValueError) as error:
        raise GridError(f"cannot reach a Ray cluster at '{address}' ({getattr(error, 'strerror', None) or error}): "
                        "start one with `ray start --head`, or give --ray auto on one of its nodes") from None


def add_executor_arguments(parser, workers_default: str = "all cores") -> None:
    """--workers, --ray [ADDRESS] and --ship-data: where the jobs run (the evaluate commands);
    workers_default: what the help says --workers defaults to (see :func:`executor_from_arguments`)."""
    parser.add_argument("--workers", type=int, help=f"local processes (default: {workers_default}); with --ray "
                                                    "local: the CPUs of the cluster it starts")
    parser.add_argument("--ray", nargs="?", const="auto", metavar="ADDRESS",
                        help="run the jobs as Ray tasks: 'auto' (the default: the cluster this machine belongs "
                             "to, or $RAY_ADDRESS), HOST:PORT of a head node (ray start --head), or 'local' "
                             f"(start one here); same results as a local run; needs {INSTALL_HINT}")
    parser.add_argument("--ship-data", action="store_true",
                        help="with --ray: send each sequence's events to the cluster once through Ray's object "
                             "store; without it the workers read them from OUTPUT, which must then be on a path "
                             "every node sees (e.g. NFS)")


def executor_from_arguments(args, default_workers: int | None = None) -> "Executor":
    """The executor of :func:`add_executor_arguments`'s options (GridError in one line when wrong);
    default_workers: local processes without --workers (None: every core)."""
    workers = args.workers if args.workers is not None or args.ray else default_workers
    return make_executor(workers, args.ray, args.ship_data)


def run_command(args, command: str, plan: Callable[[], tuple[list, dict]],
                default_workers: int | None = None) -> "GridReport":
    """An evaluate command's grid, the one way the three run it: the executor of its options
    (:func:`executor_from_arguments`: a wrong --ray is said before any sequence is read), then
    ``plan()`` -> (jobs, sequences: name -> SequenceInput), :func:`run_grid`, the executor
    closed whatever happens, and the run reported (:func:`report_run`, args.output, args.quiet)."""
    executor = executor_from_arguments(args, default_workers)
    try:
        jobs, sequences = plan()
        report = run_grid(jobs, sequences, executor, not args.quiet, command)
    finally:
        executor.close()
    report_run(report, args.output, command, args.quiet)
    return report


def report_run(report: "GridReport", output: Path, command: str, quiet: bool) -> None:
    """Print each failed job and (unless quiet) the grid's summary on stderr; write the run's
    measurements to ``output``/grid_run.json (wall, CPU, speed-up, where each job ran)."""
    import json

    for key, message in report.failed.items():
        print(f"focus-ros {command}: job {key} failed: {message}", file=sys.stderr)
    if not quiet:
        print(report.summary(), file=sys.stderr)
    Path(output).mkdir(parents=True, exist_ok=True)
    write_atomically(Path(output) / "grid_run.json", json.dumps(report.as_dict(), indent=1))


def make_executor(workers: int | None = None, ray_address: str | None = None, ship_data: bool = False) -> Executor:
    """The executor of the command-line options: local unless ``ray_address`` is given."""
    if workers is not None and workers <= 0:
        raise GridError(f"--workers must be positive, got {workers}")
    if ray_address is None:
        if ship_data:
            raise GridError("--ship-data goes with --ray (local workers read the event store directly)")
        return LocalExecutor(workers)
    return RayExecutor(ray_address, ship_data, workers)


# ---------------------------------------------------------------------------- the grid


def one_line(error: BaseException) -> str:
    """An exception as one line: its last line (a Ray task error's is the job's own exception),
    prefixed with its type when that line does not name it."""
    lines = [line for line in str(error).strip().splitlines() if line.strip()]
    last = lines[-1].strip() if lines else ""
    name = type(error).__name__
    return last if ": " in last and last.split(": ")[0].isidentifier() else f"{name}: {last}"


@dataclass
class GridReport:
    """What :func:`run_grid` did. results: key -> result of every job that has one, in job order;
    ran / skipped (resumed) / failed (key -> message); outcomes: key -> Outcome of the jobs run;
    wall_s: the grid's wall time (s); deliver_s, save_s: the driver's time delivering the
    sequences (event stores or ray.put) and writing the results (s: serial work that bounds
    how far a grid scales)."""

    executor: str
    slots: int
    results: dict = field(default_factory=dict)
    ran: list = field(default_factory=list)
    skipped: list = field(default_factory=list)
    failed: dict = field(default_factory=dict)
    outcomes: dict = field(default_factory=dict)
    wall_s: float = 0.0
    deliver_s: float = 0.0
    save_s: float = 0.0

    @property
    def job_s(self) -> float:
        """Sum of the wall times of the jobs run (s): a serial run's time, without overheads."""
        return float(sum(outcome.wall_s for outcome in self.outcomes.values()))

    @property
    def cpu_s(self) -> float:
        """Sum of the CPU times of the jobs run (s)."""
        return float(sum(outcome.cpu_s for outcome in self.outcomes.values()))

    @property
    def speedup(self) -> float:
        """Sum of job times / wall time: the speed-up over running the jobs one after the other."""
        return self.job_s / self.wall_s if self.wall_s > 0 and self.outcomes else float("nan")

    def summary(self) -> str:
        """One line: jobs, wall time, CPU time, speed-up, executor."""
        return (f"{len(self.ran)} jobs run, {len(self.skipped)} resumed, {len(self.failed)} failed in "
                f"{self.wall_s:.1f} s wall, {self.cpu_s:.1f} s CPU, sum of job times {self.job_s:.1f} s: "
                f"speed-up {self.speedup:.2f}x over a serial run ({self.executor})")

    def part(self, prefix: str) -> "GridReport":
        """The jobs whose keys start with ``prefix`` (e.g. one sequence's), keyed without it."""
        def strip(keys):
            return [key[len(prefix):] for key in keys if key.startswith(prefix)]

        def strip_map(mapping):
            return {key[len(prefix):]: value for key, value in mapping.items() if key.startswith(prefix)}

        return GridReport(self.executor, self.slots, strip_map(self.results), strip(self.ran), strip(self.skipped),
                          strip_map(self.failed), strip_map(self.outcomes), self.wall_s, self.deliver_s, self.save_s)

    def as_dict(self) -> dict:
        """For a JSON record of the run (machine measurements: not part of the compared results)."""
        return {"executor": self.executor, "slots": self.slots, "wall_s": self.wall_s, "cpu_s": self.cpu_s,
                "job_s": self.job_s, "speedup": self.speedup, "deliver_s": self.deliver_s, "save_s": self.save_s,
                "ran": self.ran, "skipped": self.skipped,
                "failed": self.failed,
                "jobs": {key: {"pid": o.pid, "host": o.host, "wall_s": o.wall_s, "cpu_s": o.cpu_s}
                         for key, o in self.outcomes.items()}}


def run_grid(jobs: list[GridJob], sequences: dict, executor: Executor, show_progress: bool = True,
             description: str = "jobs") -> GridReport:
    """Run the jobs not finished in their stores on ``executor`` (module docstring); sequences:
    name -> SequenceInput. Does not close the executor."""
    keys = [job.key for job in jobs]
    if len(set(keys)) != len(keys):
        raise ValueError("grid jobs need distinct keys")
    started = time.perf_counter()
    report = GridReport(executor.name, executor.slots)
    stored = {}
    pending = []
    for job in jobs:
        result = job.store.load(job)
        if result is None:
            pending.append(job)
        else:
            stored[job.key] = result
            report.skipped.append(job.key)
    if pending:
        executor.start(len(pending))
        report.slots = executor.slots
        handles = {}
        delivering = time.perf_counter()
        for job in pending:
            if job.sequence not in handles:
                handles[job.sequence] = executor.deliver(sequences[job.sequence])
        report.deliver_s = time.perf_counter() - delivering
        tasks = [(index, job.function, job.arguments, handles[job.sequence]) for index, job in enumerate(pending)]
        _collect(pending, executor.run(tasks), executor.slots, report, show_progress, description)
    for job in jobs:  # job order, whatever order they finished in
        if job.key in stored:
            report.results[job.key] = stored[job.key]
        elif job.key in report.outcomes:
            report.results[job.key] = job.store.load(job)
    report.wall_s = time.perf_counter() - started
    return report


def _collect(pending: list[GridJob], finished: Iterator, slots: int, report: GridReport, show_progress: bool,
             description: str) -> None:
    """Write each job's result as it finishes (its store, atomically), counting on a tqdm bar."""
    from tqdm import tqdm

    with tqdm(total=len(pending), unit="job", desc=description, disable=not show_progress, file=sys.stderr) as bar:
        bar.set_postfix(running=min(slots, len(pending)), failed=0)
        done = 0
        for index, outcome in finished:
            job = pending[index]
            done += 1
            if isinstance(outcome, Outcome):
                saving = time.perf_counter()
                job.store.save(job, outcome.result)
                report.save_s += time.perf_counter() - saving
                outcome.result = None  # the store has it; keep only the measurements
                report.outcomes[job.key] = outcome
                report.ran.append(job.key)
            else:
                report.failed[job.key] = one_line(outcome)
            bar.set_postfix(running=min(slots, len(pending) - done), failed=len(report.failed), refresh=False)
            bar.update(1)
