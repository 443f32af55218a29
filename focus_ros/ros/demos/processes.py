"""A node the demo starts, and stopped the way ``ros2 launch`` stops one, with nothing left behind.

Why this module exists: a demo that waited ``process.wait(timeout=10)`` on a hung ``depth_node``
raised ``TimeoutExpired`` and left the node, its estimator worker and their resource trackers
running (issue 30). What it does instead:

- :meth:`NodeProcess.start` starts the node **in a session of its own** (``setsid``): its whole
  family (the worker ``python -m focus_ros.runtime._worker_main``, multiprocessing's
  ``resource_tracker``) can be found and signalled as one, and a Ctrl-C in the demo's terminal
  reaches the demo only, which then stops the node in order instead of every process dying at
  once. On Linux the kernel also kills the node if the demo itself is killed (``SIGKILL`` leaves
  no chance to clean up: ``PR_SET_PDEATHSIG``).
- :meth:`NodeProcess.stop` sends ``SIGINT`` to the node, then ``SIGTERM`` after
  :data:`SIGINT_GRACE_S`, then ``SIGKILL`` to its session after :data:`SIGTERM_GRACE_S` (the
  order and the grace periods of ``ros2 launch``). Whatever of its family outlives it (a worker
  or a tracker holding on) gets :data:`LEFTOVER_GRACE_S` to end by itself (a worker notices
  its node is gone, a resource tracker ends when the last of its clients does and unlinks the
  shared memory first), then ``SIGTERM`` and ``SIGKILL``. It returns a :class:`StopOutcome`
  whose ``problem`` is one line (or empty when the node stopped as it should).

The family is found in ``/proc``: every process in the node's session, plus every process that
was the node's descendant when last looked at (:meth:`NodeProcess.remember_family`; a child that
called ``setsid`` leaves the session but not the memory). Remembered processes are identified by
(pid, start time), so a recycled pid is never signalled. Zombies count as gone (their parent, or
init, reaps them). Linux only, as the nodes' runtime.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

#: ros2 launch's order: SIGINT, then SIGTERM after its sigterm_timeout (5 s), then SIGKILL after
#: its sigkill_timeout (5 s). Issue 30 asks every node to end within 5 s of either signal.
SIGINT_GRACE_S = 5.0
SIGTERM_GRACE_S = 5.0
#: how long the node's family may outlive it before being signalled: a worker notices its node is
#: gone within a few seconds, a resource tracker as soon as its clients are gone
LEFTOVER_GRACE_S = 3.0
#: after SIGTERM to the leftovers, before SIGKILL (a resource tracker ignores SIGTERM: it ends by
#: itself once the others are gone, which is what lets it unlink the shared memory first)
LEFTOVER_TERM_GRACE_S = 2.0
#: how long SIGKILL may take to end a process (s): only one stuck in the kernel (state D) outlives it
KILL_WAIT_S = 5.0
#: how often the stop loops look again (s): fine enough to report stop times, cheap on /proc
POLL_S = 0.05

try:
    _prctl = ctypes.CDLL(None, use_errno=True).prctl  # resolved here, not in the forked child
except (OSError, AttributeError):
    _prctl = None


def die_with_parent() -> None:
    """A ``preexec_fn``: in the child before exec, ask the kernel to send it SIGKILL when the
    process that started it dies (Linux; nothing elsewhere). The demo's nodes and the tests' use it."""
    if _prctl is not None:
        _prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG = 1


@dataclass(frozen=True)
class ProcessInfo:
    """One process as /proc/<pid>/stat shows it."""

    pid: int
    ppid: int
    pgid: int
    sid: int
    state: str
    start_ticks: int
    command: str

    @property
    def gone(self) -> bool:
        return self.state in ("Z", "X")


def read_process(pid: int) -> ProcessInfo | None:
    """The process ``pid`` now, or None when there is none."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        raw_command = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (OSError, ValueError):
        return None
    # the command name (field 2) is in parentheses and may hold spaces or parentheses itself
    name_end = stat.rfind(")")
    fields = stat[name_end + 2:].split()
    command = raw_command.replace(b"\0", b" ").decode(errors="replace").strip() or stat[stat.find("(") + 1:name_end]
    return ProcessInfo(pid=pid, ppid=int(fields[1]), pgid=int(fields[2]), sid=int(fields[3]), state=fields[0],
                       start_ticks=int(fields[19]), command=command)


def all_processes() -> list[ProcessInfo]:
    """Every process /proc shows now."""
    processes = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            info = read_process(int(entry))
            if info is not None:
                processes.append(info)
    return processes


def descendants(pid: int, processes: list[ProcessInfo] | None = None) -> list[ProcessInfo]:
    """The processes below ``pid`` (children, their children, ...), as /proc shows them now."""
    processes = all_processes() if processes is None else processes
    children: dict[int, list[ProcessInfo]] = {}
    for info in processes:
        children.setdefault(info.ppid, []).append(info)
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child.pid)
    return found


def still_running(info: ProcessInfo) -> bool:
    """The very process ``info`` describes (same pid, same start time) is still there and not a zombie."""
    now = read_process(info.pid)
    return now is not None and now.start_ticks == info.start_ticks and not now.gone


def short_command(command: str, limit: int = 80) -> str:
    """A command line cut to ``limit`` characters, the interpreter's path dropped (for one-line reports)."""
    words = command.split()
    if len(words) > 1 and Path(words[0]).name.startswith("python"):
        words = words[1:]
    if words:
        words[0] = Path(words[0]).name if "/" in words[0] else words[0]
    text = " ".join(words)
    return text if len(text) <= limit else text[:limit - 3] + "..."


@dataclass
class StopOutcome:
    """How :meth:`NodeProcess.stop` ended the node ``name`` (``pid``): the signal that did it
    (``SIGINT``, ``SIGTERM``, ``SIGKILL``; ``exited`` when it had ended before; ``unkillable``
    when even SIGKILL did not, within KILL_WAIT_S), its exit code, the seconds
    it took, the processes of its family that outlived it and had to be killed, and
    ``problem``: one line saying what went wrong ('' when the node stopped on SIGINT or SIGTERM
    and nothing of its own was left); ``hurried``: a second interrupt cut the grace periods short."""

    name: str
    pid: int
    signal: str
    returncode: int | None
    seconds: float
    killed_leftovers: list[str] = field(default_factory=list)
    hurried: bool = False

    @property
    def problem(self) -> str:
        parts = []
        if self.signal == "SIGKILL" and self.hurried:
            parts.append(f"{self.name} killed (SIGKILL) at once: interrupted again while it was stopping")
        elif self.signal == "SIGKILL":
            parts.append(f"{self.name} did not stop within {SIGINT_GRACE_S:.0f} s of SIGINT and "
                         f"{SIGTERM_GRACE_S:.0f} s of SIGTERM: killed (SIGKILL)")
        elif self.signal == "unkillable":
            parts.append(f"{self.name} (pid {self.pid}) survived SIGKILL for {KILL_WAIT_S:.0f} s "
                         "(stuck in the kernel?)")
        if self.killed_leftovers:
            parts.append(f"{len(self.killed_leftovers)} of its processes outlived it and were killed: "
                         + ", ".join(self.killed_leftovers))
        return "; ".join(parts)


class NodeProcess:
    """A node started as ``ros2 run`` starts it, in a session of its own, its output in ``log_path``
    (see the module docstring). ``name``: how reports call it (``depth_node``)."""

    def __init__(self, command: list[str], log_path: Path, env: dict, name: str):
        self.name = name
        self.log_path = Path(log_path)
        self._log = open(self.log_path, "wb")
        try:
            self.process = subprocess.Popen(command, env=env, stdin=subprocess.DEVNULL, stdout=self._log,
                                            stderr=subprocess.STDOUT, start_new_session=True,
                                            preexec_fn=die_with_parent)
        except BaseException:
            self._log.close()
            raise
        self.pid = self.process.pid
        self._family: dict[int, ProcessInfo] = {}
        self._outcome: StopOutcome | None = None
        self.remember_family()

    @property
    def returncode(self) -> int | None:
        """The node's exit code, None while it runs (a negative code: the signal that ended it)."""
        return self.process.poll()

    def alive(self) -> bool:
        return self.process.poll() is None

    def remember_family(self) -> list[ProcessInfo]:
        """Look at the node's processes now (its session and its descendants) and remember them,
        so that they are found at the end even if they left its session and it is gone by then."""
        processes = all_processes()
        # the session is safe to look up by number: Linux frees no pid still used as a session id
        family = [info for info in processes if info.sid == self.pid and info.pid != self.pid]
        if self.process.returncode is None:  # not reaped: the pid is still the node's, its children its own
            family += [info for info in descendants(self.pid, processes) if info.sid != self.pid]
        for info in family:
            if not info.gone:
                self._family.setdefault(info.pid, info)
        return family

    def family(self) -> list[ProcessInfo]:
        """The node's processes still running (not the node itself): the remembered ones and
        whatever is in its session now."""
        with contextlib.suppress(OSError):
            self.remember_family()
        return [info for info in self._family.values() if still_running(info)]

    def last_line(self, limit: int = 200) -> str:
        """The last non-empty line of the node's log (its last words, for a one-line report), not
        counting multiprocessing's resource tracker's warnings about what a killed node left (they
        say nothing about why it ended)."""
        with contextlib.suppress(OSError, ValueError):  # ValueError: closed by stop()
            self._log.flush()
        try:
            with open(self.log_path, "rb") as log:
                log.seek(0, os.SEEK_END)
                log.seek(max(log.tell() - 8192, 0))
                lines = [line.strip() for line in log.read().decode(errors="replace").splitlines()]
            lines = [line for line in lines if line and "resource_tracker" not in line
                     and not line.startswith("warnings.")]
        except OSError:
            return ""
        line = lines[-1] if lines else ""
        return line if len(line) <= limit else line[:limit - 3] + "..."

    def stop(self) -> StopOutcome:
        """Stop the node and everything of its own (see the module docstring); idempotent.

        A second Ctrl-C (or a SIGTERM) while this waits skips the grace periods: the node and its
        family get SIGKILL at once, and still nothing is left behind."""
        if self._outcome is not None:
            return self._outcome
        started = time.monotonic()
        hurry = threading.Event()
        with _signals_hurry(hurry):
            with contextlib.suppress(OSError):
                self.remember_family()  # while the node still runs: its descendants are still its own
            how = "exited"
            if self.alive():
                how = self._signal_and_wait(signal.SIGINT, SIGINT_GRACE_S, hurry) or \
                    self._signal_and_wait(signal.SIGTERM, SIGTERM_GRACE_S, hurry) or "SIGKILL"
                if how == "SIGKILL":
                    with contextlib.suppress(OSError):
                        self.remember_family()
                    with contextlib.suppress(OSError):
                        os.killpg(self.pid, signal.SIGKILL)
                    with contextlib.suppress(subprocess.TimeoutExpired):  # only a process stuck in the kernel survives
                        self.process.wait(timeout=KILL_WAIT_S)
                    if self.alive():
                        how = "unkillable"
            killed = self._end_family(hurry)
        self._log.close()
        self._outcome = StopOutcome(self.name, self.pid, how, self.process.returncode, time.monotonic() - started,
                                    killed, hurried=hurry.is_set())
        return self._outcome

    def _signal_and_wait(self, signal_number: int, grace_s: float, hurry: threading.Event) -> str:
        """Send ``signal_number`` to the node and wait up to ``grace_s`` for it to end: the
        signal's name when it ended, '' when not (or when told to hurry)."""
        if hurry.is_set():
            return ""
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal_number)
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline and not hurry.is_set():
            try:
                self.process.wait(timeout=POLL_S)
                return signal.Signals(signal_number).name
            except subprocess.TimeoutExpired:
                continue
        return signal.Signals(signal_number).name if not self.alive() else ""

    def _end_family(self, hurry: threading.Event) -> list[str]:
        """Once the node is gone: let its family end by itself (LEFTOVER_GRACE_S), then SIGTERM,
        then SIGKILL; returns 'command (pid N)' of each that had to be signalled."""
        deadline = time.monotonic() + LEFTOVER_GRACE_S
        while self.family() and time.monotonic() < deadline and not hurry.is_set():
            time.sleep(POLL_S)  # nothing to wait on for processes that are not our children: poll
        leftovers = self.family()
        if not leftovers:
            return []
        described = [f"{short_command(info.command)} (pid {info.pid})" for info in leftovers]
        for signal_number, grace_s in ((signal.SIGTERM, LEFTOVER_TERM_GRACE_S), (signal.SIGKILL, KILL_WAIT_S)):
            for info in leftovers:
                if still_running(info):
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.kill(info.pid, signal_number)
            deadline = time.monotonic() + (0.0 if hurry.is_set() and signal_number == signal.SIGTERM else grace_s)
            while any(still_running(info) for info in leftovers) and time.monotonic() < deadline:
                time.sleep(POLL_S)
            leftovers = [info for info in leftovers if still_running(info)]
            if not leftovers:
                break
        return described


@contextlib.contextmanager
def _signals_hurry(hurry: threading.Event):
    """While the node is being stopped: SIGINT and SIGTERM to the demo set ``hurry`` (skip to
    SIGKILL) instead of interrupting the stop half-way, which would leave processes behind.
    Only in the main thread (the only one Python lets set handlers); restored after."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {number: signal.getsignal(number) for number in (signal.SIGINT, signal.SIGTERM)}
    for number in previous:
        signal.signal(number, lambda *_: hurry.set())
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
