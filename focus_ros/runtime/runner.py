"""The nodes' side: :class:`EstimatorRunner` runs one estimator kind beside a node.

A thread of the runner's own keeps one of the two engines (:class:`~focus_ros.runtime.EstimatorProcess`,
or :class:`~focus_ros.runtime.InlineEstimator` in that thread) configured and fed from a queue
of jobs (the caller's queue policy: newest or all, bounded), restarts a dead worker, counts
what happened (completed, dropped, lost, failed, restarts, time per job, latency) and hands
each result to the caller's callback; its ``diagnostic_values()`` and ``health()`` are the
nodes' shared ``/diagnostics`` status logic. Nothing here imports rclpy.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from focus_ros.camera import Calibration
from focus_ros.events import Events
from focus_ros.runtime.cpus import format_cpu_list, parse_cpu_list
from focus_ros.runtime.inline import InlineEstimator
from focus_ros.runtime.kinds import WorkerResult, kind_named
from focus_ros.runtime.process import EstimatorProcess, WorkerDied


@dataclass
class Job:
    """One unit of work for an :class:`EstimatorRunner`: the events (through the shared slots),
    the kind's extra input (pickled to the worker: depth's trajectory segment), the caller's
    own ``context`` (stays in the caller, handed back with the result) and ``received_s``
    (time.monotonic() when its last input arrived, for the latency)."""

    events: Events
    extra: Any = None
    context: Any = None
    received_s: float = float("nan")


class PictureRate:
    """Says whether the next job should bring its pictures back: only while ``watched()`` (someone
    subscribes) and at most ``rate_hz()`` times a second (0 = never). For EstimatorRunner's
    ``images_wanted``."""

    def __init__(self, rate_hz: Callable[[], float], watched: Callable[[], bool]):
        self._rate_hz, self._watched = rate_hz, watched
        self._last_s = float("-inf")

    def __call__(self) -> bool:
        rate, now = self._rate_hz(), time.monotonic()
        if rate <= 0 or now - self._last_s < 1.0 / rate or not self._watched():
            return False
        self._last_s = now
        return True


class EstimatorRunner:
    """One estimator kind run for a node: a thread of its own keeps the engine (an
    :class:`EstimatorProcess`, or an :class:`InlineEstimator` when ``in_process`` is false)
    configured and fed, collects results in order and hands each to ``on_result(job,
    result)`` (in that thread; ``result.estimate`` is never None there).

    calibration, settings: the configuration the engine starts with (loading the compiled
    code before data flows); jobs wait until :meth:`configure` gives the real one.
    unit: the noun of the counts ("window", "keyframe"); max_pending(): jobs waiting at most,
    the oldest dropped beyond it; skippable(): the worker may skip a job when a newer one is
    queued behind it (queue policy "newest"); hold_events(): while the engine is not ready yet
    (starting with the node, restarting after a death), jobs are held instead of dropped as
    max_pending() says, up to this many events in all (the oldest dropped beyond it; 0 = no
    hold); once it is ready every held job is estimated in order, none skipped (catching up),
    then max_pending() and skippable() apply again. A job pushed with ``held=True`` (cut from
    events that arrived before the caller could use them: ``EventBatch.held``) is caught up on
    the same way until it has left the queue: such a burst came at the sensor's rate, before the
    node could use it, and a live policy would take it for falling behind. images_wanted(): ask for the kind's pictures
    with the next job (called with the runner's lock held: must not take the caller's lock);
    logger: info/warning/error(text); warn_once(key, text): the caller's once-only warning;
    capacity_events: initial shared slot size (events); cpus: the CPUs of the estimator
    process in taskset's syntax (the nodes' ``estimator_cpus``; "" = any; ValueError naming
    ``estimator_cpus`` when unusable (:func:`~focus_ros.runtime.cpus.parse_cpu_list`) or given
    with ``in_process`` false).

    A dead worker is restarted (counted in ``restarts``; noticed by the next call to it, or
    within ``WATCH_PERIOD_S`` (s) when no job flows, its jobs in flight counted lost,
    warm start reset); a job whose estimation raises is counted ``failed`` and warned once;
    the node carries on either way. Thread-safe: ``push``, ``configure``, ``reset``,
    ``forget_warm_start``, ``clear_pending`` from any thread.

    Threads and state (everything below under the one condition variable ``_lock``):

    - ``_config``: the configuration jobs are estimated with; written by the caller
      (``configure``), None until then (jobs wait).
    - ``_engine``: written only by the runner's thread (started in :meth:`_prepare`, set to None
      after a failed restart); the caller's thread uses it in ``push`` to submit at once.
    - ``_stale``: the engine must be given ``_config`` before the next job. Set at the start,
      by ``configure`` and after a failed restart; cleared by the runner's thread when it takes
      the configuration (:meth:`_take_engine_update`), which needs a known ``_config``.
    - ``_reset_due``: the warm start must be forgotten before the next job. Set by ``reset`` and
      ``forget_warm_start``; cleared by the runner's thread when it takes it.
    - ``_configuring``: the runner's thread is calling the engine outside the lock for
      something no submit may interleave with: configure/reset, a job larger than the shared
      slots (they grow), a restart. Set and cleared by the runner's thread only.
    - ``_died``: a :class:`WorkerDied` raised by a submit (in either thread); taken by the
      runner's thread, which restarts the worker.

    Jobs go to the engine only when :meth:`_ready`: an engine, and none of ``_stale``,
    ``_reset_due``, ``_configuring``, ``_died``.
    """

    #: how often (s) the runner's thread looks at an idle engine (a dead worker noticed within it)
    WATCH_PERIOD_S = 0.5

    def __init__(self, kind: str, calibration: Calibration, settings, *, in_process: bool,
                 on_result: Callable[[Job, WorkerResult], None], logger, warn_once: Callable[[str, str], None],
                 unit: str = "window", max_pending: Callable[[], int] = lambda: 1,
                 skippable: Callable[[], bool] = lambda: False, hold_events: Callable[[], int] = lambda: 0,
                 images_wanted: Callable[[], bool] = lambda: False,
                 capacity_events: int = 60_000, name: str = "focus_ros_estimator", cpus: str = ""):
        self.kind = kind_named(kind)
        self.in_process = bool(in_process)
        try:  # named as the nodes' parameter, for the one-line error a node stops with
            self.cpus = parse_cpu_list(cpus)
        except ValueError as error:
            raise ValueError(f"estimator_cpus: {error}") from None
        if self.cpus and not self.in_process:
            raise ValueError(f"estimator_cpus '{cpus}' applies to the estimator process: it needs the estimator in "
                             "a process of its own (estimator_process true)")
        self.unit = unit
        self._on_result, self._logger, self._warn_once = on_result, logger, warn_once
        self._max_pending, self._skippable, self._images_wanted = max_pending, skippable, images_wanted
        self._hold_events = hold_events
        self._capacity_events = int(capacity_events)
        self._lock = threading.Condition()
        self._preload = (calibration, settings)
        # the runner's state, all guarded by self._lock (see "Threads and state" in the class docstring)
        self._config = None               # (calibration, settings) jobs are estimated with, once known
        self._engine = None               # EstimatorProcess or InlineEstimator, built by the thread
        self._stale = True                # the engine must be (re)configured before the next job
        self._reset_due = False           # the warm start must be forgotten before the next job
        self._configuring = False         # the thread is (re)configuring the engine: no job goes in
        self._died: WorkerDied | None = None  # noticed while submitting: the thread restarts the worker
        self._pending: deque = deque()    # jobs waiting for the engine
        self._catching_up = True          # the engine has not been ready since it (re)started: hold, then catch up
        self._held_until = 0              # counts["completed"] just after the last held job was pushed
        self._submitted: deque = deque()  # handed to the engine: (job, submit time), in order
        self.counts = dict(completed=0, estimated=0, dropped=0, lost=0, failed=0, restarts=0)
        self._period = dict(estimator_s=[], estimator_cpu_s=[], round_trip_s=[], latency_s=[])
        self._last_latency_s = float("nan")
        self._running = True
        self._stopping = threading.Event()  # set by stop(): ends any wait for the worker at once
        self.state = "starting"  # for /diagnostics: starting, compiling, running, restarting, stopped
        self._thread = threading.Thread(target=self._work, name=name, daemon=True)
        self._thread.start()

    # ----------------------------------------------------------------- the caller's side
    def configure(self, calibration: Calibration, settings) -> None:
        """Estimate the next jobs with this configuration (the warm start carries over)."""
        with self._lock:
            self._config = (calibration, settings)
            self._stale = True
            self._lock.notify_all()

    def reset(self) -> None:
        """Forget the waiting jobs and the warm start (a restart of the stream)."""
        with self._lock:
            self._pending.clear()
            self._reset_due = True
            self._lock.notify_all()

    def forget_warm_start(self) -> None:
        """Forget the warm start, the waiting jobs kept (an estimate the caller withheld as wrong,
        e.g. a runaway, must not start the next solves): from the next job submitted on (one
        already in the engine keeps it)."""
        with self._lock:
            self._reset_due = True
            self._lock.notify_all()

    def clear_pending(self) -> None:
        with self._lock:
            self._pending.clear()

    def push(self, job: Job, held: bool = False) -> None:
        """Queue one job (any thread); beyond max_pending() the oldest waiting one is dropped,
        except while catching up (see the class docstring; ``held``: the job was cut from held
        events)."""
        with self._lock:
            self.counts["completed"] += 1
            self._pending.append(job)
            if held:
                self._held_until = self.counts["completed"]
            limit = max(int(self._max_pending()), 1)
            budget = int(self._hold_events()) if self._is_catching_up() else 0
            while len(self._pending) > limit and (budget <= 0 or self._held_events() > budget):
                self._pending.popleft()
                self.counts["dropped"] += 1
            # straight from the caller's thread, so that the estimator process starts on the job
            # without waiting for this runner's thread to get the GIL back
            self._submit_pending()
            self._lock.notify_all()

    @property
    def pending(self) -> int:
        return len(self._pending)

    def _is_catching_up(self) -> bool:
        """Every waiting job is estimated in order, none dropped below hold_events() nor skipped
        (lock held): the engine has not been ready since it (re)started, or a held job still waits
        (jobs leave the queue in order: submitted, dropped, or cleared)."""
        left_the_queue = self.counts["completed"] - len(self._pending)
        return self._catching_up or left_the_queue < self._held_until

    def _held_events(self) -> int:
        """Events in the waiting jobs (lock held)."""
        return sum(len(job.events) for job in self._pending)

    @property
    def pid(self) -> int:
        engine = self._engine
        return (engine.pid or 0) if engine is not None else 0

    def diagnostic_values(self) -> dict:
        """The counts and the medians since the previous call, for /diagnostics: ``{unit}s_completed``,
        ``_dropped`` (queue overflow or skipped for a newer one), ``_lost`` (in a worker that
        died), ``_failed``, ``_pending``, ``processed_ratio`` (estimated / completed since the
        start), ``processing_ms_per_{unit}`` and its CPU time, ``round_trip_ms_per_{unit}``
        (submitted to result), ``latency_ms`` (last input received to result handled),
        ``estimator_process_pid`` (0 inline), ``estimator_cpus`` (the CPUs the process may run
        on now, taskset's syntax; "" inline), ``worker_restarts`` and ``estimator_state``
        (``starting``, ``compiling`` (kernels missing from Numba's cache), ``running``,
        ``restarting`` (after its process died), ``stopped``)."""
        with self._lock:
            counts = dict(self.counts)
            period = {name: values[:] for name, values in self._period.items()}
            for values in self._period.values():
                values.clear()
            pending = len(self._pending)

        def median_ms(values):
            return 1e3 * float(np.median(values)) if values else float("nan")

        unit = self.unit
        return {
            f"{unit}s_completed": counts["completed"],
            f"{unit}s_dropped": counts["dropped"],
            f"{unit}s_lost": counts["lost"],
            f"{unit}s_failed": counts["failed"],
            f"{unit}s_pending": pending,
            "processed_ratio": counts["estimated"] / counts["completed"] if counts["completed"] else float("nan"),
            f"processing_ms_per_{unit}": median_ms(period["estimator_s"]),
            f"processing_cpu_ms_per_{unit}": median_ms(period["estimator_cpu_s"]),
            f"round_trip_ms_per_{unit}": median_ms(period["round_trip_s"]),
            "latency_ms": median_ms(period["latency_s"]) if period["latency_s"] else 1e3 * self._last_latency_s,
            "estimator_process_pid": self.pid,
            "estimator_cpus": self._cpus_in_use(),
            "worker_restarts": counts["restarts"],
            "estimator_state": self.state,
        }

    def _cpus_in_use(self) -> str:
        engine = self._engine
        return format_cpu_list(engine.cpus_in_use()) if isinstance(engine, EstimatorProcess) else ""

    def health(self) -> tuple[str, str] | None:
        """("error" | "warn", message) when the estimation is in trouble, None when fine: the
        estimator process not running (after a failed restart), compiling its kernels (no
        estimate until done: a first start with an empty Numba cache), or most jobs dropped."""
        with self._lock:
            counts = dict(self.counts)
            engine_missing = self._engine is None
        if counts["restarts"] > 0 and engine_missing:
            return "error", "estimator process not running"
        if self.state == "compiling":
            return "warn", f"compiling the {self.kind.name} estimator's kernels (not in Numba's cache): jobs held"
        if counts["dropped"] > 0 and counts["dropped"] >= counts["estimated"]:
            return "warn", f"falling behind: most {self.unit}s dropped"
        return None

    def stop(self, timeout_s: float = 2.0) -> None:
        """Stop the thread and the engine, in every state (starting, compiling, estimating, a
        worker hung or dead), within about ``timeout_s`` + 3 s: the thread is told without
        waiting for the lock, every wait for the worker is cancelled, the worker is asked to
        stop and killed when it does not (``EstimatorProcess.close``). An inline engine busy
        with a job cannot be interrupted: its thread is a daemon, left to end with the process."""
        self._running = False
        self._stopping.set()
        if self._lock.acquire(timeout=timeout_s / 2):  # the thread holds it only briefly, never while waiting
            try:
                self._lock.notify_all()
            finally:
                self._lock.release()
        self._thread.join(timeout=timeout_s / 2)
        engine = self._engine
        if engine is not None:
            engine.close(timeout_s=timeout_s / 4)
        self.state = "stopped"

    # ----------------------------------------------------------------- the runner's thread
    def _ready(self) -> bool:
        """Jobs may go to the engine now (lock held): it exists and nothing is due or under way."""
        return (self._engine is not None and not self._stale and not self._reset_due and not self._configuring
                and self._died is None)

    def _submit_pending(self) -> None:
        """Hand waiting jobs to the engine while it has room (lock held)."""
        engine = self._engine
        if not self._ready():
            return
        if self._catching_up and not self._pending:
            self._catching_up = False  # ready, and nothing held (any more): the caller's policy from now on
        skippable = bool(self._skippable()) and not self._is_catching_up()
        while self._pending and engine.can_submit() and engine.in_flight < 2:
            job = self._pending[0]
            if not engine.fits(len(job.events)):
                return  # the runner's thread grows the shared slots
            try:
                engine.submit(job.events, images=self._pictures_wanted(), skippable=skippable, extra=job.extra)
            except WorkerDied as error:  # maybe in the caller's thread: the runner's thread restarts it
                self._died = error
                self._lock.notify_all()
                return
            self._pending.popleft()
            self._submitted.append((job, time.monotonic()))

    def _pictures_wanted(self) -> bool:
        """The caller's ``images_wanted()``, False when it fails: it asks the middleware (a
        publisher's subscriber count), and on SIGINT or SIGTERM rclpy's own handler invalidates
        the context before the node stops this runner, so for a moment every such call raises.
        No picture is wanted then, and the thread must not end with a traceback."""
        try:
            return bool(self._images_wanted())
        except Exception:  # noqa: BLE001 - e.g. RCLError "publisher's context is invalid"
            return False

    def _feed_large_job(self) -> None:
        """A job larger than the shared slots: submitted from here, once nothing is in flight."""
        engine = self._engine
        with self._lock:
            if (not self._ready() or not self._pending or engine.fits(len(self._pending[0].events))
                    or engine.in_flight):
                return
            job = self._pending.popleft()
            images = self._pictures_wanted()
            self._submitted.append((job, time.monotonic()))
            self._configuring = True  # nothing else goes in before it (results come back in order)
        try:
            engine.submit(job.events, images=images, extra=job.extra)
        finally:
            with self._lock:
                self._configuring = False

    def _work(self) -> None:
        """The runner's thread (see :meth:`_serve`). Whatever escapes it while stopping ends
        the thread quietly; otherwise it is one error line and the state ``stopped`` (shown in
        /diagnostics), never a traceback."""
        try:
            self._serve()
        except Exception as error:  # noqa: BLE001 - the last guard of a thread nobody joins in time
            if self._running and not self._stopping.is_set():
                self._logger.error(f"the estimator's thread stopped: {type(error).__name__}: {error}")
                self.state = "stopped"

    def _serve(self) -> None:
        """Start the engine early, then until stop(): wait for something to do, restart a
        dead worker, bring the engine up to date, feed it and hand its next result on."""
        self._start_engine_early()
        while self._running:
            with self._lock:
                engine = self._engine
                if engine is None or engine.in_flight == 0:
                    self._lock.wait_for(self._has_work, timeout=self.WATCH_PERIOD_S)
                if not self._running:
                    return
                died, self._died = self._died, None
                if died is None:
                    died = self._watch()
            if died is not None:
                self._restart(died)
                continue
            configure, reset, config = self._take_engine_update()
            try:
                self._update_engine(configure, reset, config)
                collected = self._feed_and_collect()
            except WorkerDied as error:
                if not self._running:
                    return
                self._restart(error)
                continue
            except Exception as error:  # noqa: BLE001 - a bad job must not stop the estimation
                if not self._running:
                    return
                self._count_failed(error)
                continue
            if collected is None:
                continue
            if not self._hand_on(*collected):
                return

    def _watch(self) -> WorkerDied | None:
        """The engine's death noticed between jobs (lock held): a worker killed while no job
        flows would otherwise be found only by the next submit, and /diagnostics would show its
        pid as running until then. No job goes in until the restart (``_configuring``)."""
        engine = self._engine
        died = engine.ended() if engine is not None else None
        if died is not None:
            self._configuring = True
        return died

    def _start_engine_early(self) -> None:
        """Start the engine with the preload configuration (imports, compiled code) before the
        caller knows how to configure it; when that fails, it is started once configured."""
        try:
            self._prepare(*self._preload, configure=False, reset=False)
        except Exception as error:  # noqa: BLE001 - started again once configured
            if not self._stopping.is_set():
                self._logger.warning(f"estimator not started yet: {error}")

    def _has_work(self) -> bool:
        """Something for the runner's thread to do (lock held): stop; jobs waiting and the
        engine ready for them; a reset due; a dead worker to restart; results to collect; or a
        known configuration to apply (or an engine to start with it)."""
        return bool(not self._running or (self._pending and self._ready()) or
                    self._reset_due or self._died is not None or
                    (self._engine is not None and self._engine.in_flight > 0) or
                    (self._config is not None and (self._stale or self._engine is None)))

    def _take_engine_update(self) -> tuple[bool, bool, tuple | None]:
        """(configure, reset, config): what the engine needs before the next job, taken under
        the lock (the flags cleared here). configure: the configuration changed, or there is
        no engine, and one is known (else ``_stale`` stays set); reset: forget the warm start.
        ``_configuring`` stays set until :meth:`_update_engine` is done: no job goes in meanwhile."""
        with self._lock:
            configure = (self._stale or self._engine is None) and self._config is not None
            reset = self._reset_due
            self._stale = self._stale and not configure
            self._reset_due = False
            self._configuring = configure or reset
            return configure, reset, self._config

    def _update_engine(self, configure: bool, reset: bool, config) -> None:
        """Apply what :meth:`_take_engine_update` took (start, configure, reset the engine);
        ``_configuring`` cleared afterwards, whatever happens. configure implies a known config;
        a reset without one has nothing to forget (jobs wait for the configuration)."""
        if configure or reset:
            try:
                if config is not None:  # a reset before any configuration: no job ran, no warm start to forget
                    self._prepare(*config, configure=configure, reset=reset)
            finally:
                with self._lock:
                    self._configuring = False

    def _feed_and_collect(self) -> tuple[Job, float, WorkerResult] | None:
        """Hand the engine what it can take and wait (0.2 s at most) for its next result:
        (job, submit time, result), or None when nothing is in flight or nothing came."""
        self._feed_large_job()
        with self._lock:
            self._submit_pending()
        engine = self._engine
        if engine is None or engine.in_flight == 0:
            return None
        result = engine.collect(timeout_s=0.2)
        if result is None:
            return None
        with self._lock:
            job, submitted = self._submitted.popleft()
            self._submit_pending()
        return job, submitted, result

    def _count_failed(self, error: Exception) -> None:
        """A job whose estimation raised: said once, counted ``failed``; its entry in
        ``_submitted`` dropped when the engine no longer holds it."""
        self._warn_once("estimate_failed", f"estimation failed on a {self.unit}: {error}")
        with self._lock:
            self.counts["failed"] += 1
            if self._engine is not None and len(self._submitted) > self._engine.in_flight:
                self._submitted.popleft()

    def _hand_on(self, job: Job, submitted: float, result: WorkerResult) -> bool:
        """One collected result: a skipped job counted ``dropped``; an estimate handed to the
        caller's ``on_result`` and counted with its times. False when ``on_result`` failed
        because the runner is stopping (the thread then ends)."""
        if result.estimate is None:  # skipped by the worker for a newer job
            with self._lock:
                self.counts["dropped"] += 1
            return True
        round_trip_s = time.monotonic() - submitted
        try:
            self._on_result(job, result)
        except Exception as error:  # noqa: BLE001 - e.g. publishing while shutting down
            if not self._running:
                return False
            self._warn_once("result_failed", f"handling a {self.unit}'s result failed: {error}")
        latency_s = time.monotonic() - job.received_s
        with self._lock:
            self.counts["estimated"] += 1
            self._period["estimator_s"].append(result.estimator_s)
            self._period["estimator_cpu_s"].append(result.estimator_cpu_s)
            self._period["round_trip_s"].append(round_trip_s)
            if latency_s == latency_s:
                self._period["latency_s"].append(latency_s)
                self._last_latency_s = latency_s
        return True

    def _prepare(self, calibration, settings, configure: bool, reset: bool) -> None:
        """Start the engine (process or inline) or bring it up to date (runner's thread)."""
        if self._engine is None:
            self.state = "compiling" if self._say_if_compiling() else "starting"
            if self.in_process:
                engine = EstimatorProcess(calibration, settings, kind=self.kind.name,
                                          capacity_events=self._capacity_events, cpus=self.cpus,
                                          cancelled=self._stopping)
                self._log_started(engine)
            else:
                engine = InlineEstimator(calibration, settings, kind=self.kind.name)
            with self._lock:
                self._engine = engine
            self.state = "running"
            return
        if configure:
            try:
                self._engine.configure(calibration, settings)
            except ValueError as error:  # checked when set; kept as a last resort
                self._logger.error(f"settings not usable: {error}; keeping the previous ones")
        if reset:
            self._engine.reset()

    def _say_if_compiling(self) -> bool:
        """True when the engine about to start must compile kernels that Numba's cache lacks
        (an empty, stale or unwritable cache: :func:`focus_ros.kernels.missing_kernels`); said
        once in the log, with the expected time, so that a slow first start is not silence."""
        from focus_ros.kernels.cache import missing_kernels
        from focus_ros.kernels.groups import expected_compile_s
        missing = missing_kernels(self.kind.name)
        if missing:
            self._warn_once("compiling", f"compiling the {self.kind.name} estimator's kernels ({len(missing)} not in "
                            f"Numba's cache): about {expected_compile_s(self.kind.name):.0f} s, once; "
                            "`python -m focus_ros.kernels` at install does it beforehand")
        return bool(missing)

    def _log_started(self, engine: "EstimatorProcess") -> None:
        """Say which process the estimator runs in, on which CPUs, and why not there if refused."""
        self._logger.info(f"estimator running in process {engine.pid}"
                          + (f" on CPU {format_cpu_list(self.cpus)}" if self.cpus else ""))
        if engine.pinning_error:
            self._logger.error(engine.pinning_error)

    def _restart(self, error: Exception) -> None:
        """The estimator process died: say so, count it, start a new one (runner's thread)."""
        with self._lock:
            lost = len(self._submitted)
            self._submitted.clear()
            self.counts["lost"] += lost
            self.counts["restarts"] += 1
            self._configuring = True  # no job goes in before the new worker is configured
            self._catching_up = True  # jobs coming meanwhile are held, then estimated in order
        self._logger.error(f"{error}: restarting it ({lost} {self.unit}(s) in progress lost, warm start reset)")
        self.state = "restarting"
        try:
            self._engine.restart()
            self._log_started(self._engine)
            self.state = "running"
            with self._lock:
                self._configuring = False
                if not self._stopping.is_set():
                    self._submit_pending()
        except (WorkerDied, OSError) as again:
            if self._stopping.is_set():
                return
            self._logger.error(f"could not restart the estimator process: {again}; retrying in 1 s")
            self._engine.close()
            with self._lock:
                self._engine = None
                self._stale = True
                self._configuring = False
            self._stopping.wait(1.0)
