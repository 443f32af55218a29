"""Real ROS 2 plumbing for tests: nodes in subprocesses, a client node in the test.

Every test gets its own ROS_DOMAIN_ID and localhost-only discovery, so tests do not
hear each other (or anything else on the machine): a test process reserves a few domain
IDs for itself (a lock file per ID in the temporary folder, held until it exits) and takes
them in turn, so that two test runs on one machine never share a domain.

Executables are those of the focus_ros under test, in either layout:
- a colcon workspace (`colcon test`): ``<prefix>/lib/focus_ros/<name>``, where ``<prefix>`` is
  the install prefix of the imported focus_ros package (what ``ros2 run focus_ros <name>``
  starts);
- the local virtual environment of ``make test`` (editable install): beside ``sys.executable``.

Processes started here never outlive the test run: each is registered and stopped by
:func:`stop_all_processes` (called after every test by test/conftest.py and at exit), and
on Linux the kernel kills it if the test process itself dies (PR_SET_PDEATHSIG).
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import itertools
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from focus_ros.ros.demos.processes import die_with_parent

PACKAGE = "focus_ros"
REPOSITORY_ROOT = Path(__file__).resolve().parents[1]
VENV_BIN = Path(sys.executable).parent
_domain_counter = itertools.count()
#: ROS domain IDs the tests may use (1-100) and how many one test process reserves: 20, so
#: that five runs fit side by side and a domain comes back only 20 tests later, long after
#: the DDS participants of its previous test are gone
_DOMAIN_IDS = range(1, 101)
_DOMAINS_PER_PROCESS = 20
_domain_locks: list[tuple[int, object]] = []  # (domain ID, its open lock file), held until exit
_running: list["NodeProcess"] = []


def _reserved_domains() -> list[int]:
    """The domain IDs this process holds (reserved on first use: an exclusive lock on
    ``focus_ros_test_domain_<ID>.lock`` in the temporary folder, taken without waiting,
    from a place that depends on the process id). When every ID is taken by other runs,
    one from the process id, as before there were locks."""
    if not _domain_locks:
        first = os.getpid() % len(_DOMAIN_IDS)
        for offset in range(len(_DOMAIN_IDS)):
            domain = _DOMAIN_IDS[(first + offset) % len(_DOMAIN_IDS)]
            lock = open(Path(tempfile.gettempdir()) / f"focus_ros_test_domain_{domain}.lock", "w")
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:  # another test run holds it
                lock.close()
                continue
            _domain_locks.append((domain, lock))
            if len(_domain_locks) == _DOMAINS_PER_PROCESS:
                break
    return [domain for domain, _ in _domain_locks] or [_DOMAIN_IDS[os.getpid() % len(_DOMAIN_IDS)]]


def ros_environment() -> dict:
    """Environment for a ROS 2 process on loopback, with a domain of its own (the next of
    this process's reserved domains, in turn)."""
    env = dict(os.environ)
    domains = _reserved_domains()
    env["ROS_DOMAIN_ID"] = str(domains[next(_domain_counter) % len(domains)])
    env["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
    env.pop("ROS_LOCALHOST_ONLY", None)
    env["PYTHONUNBUFFERED"] = "1"
    env["RCUTILS_COLORIZED_OUTPUT"] = "0"
    return env


def _installed_distribution():
    """The first installed focus_ros metadata on sys.path, skipping the checkout's own build
    artifacts (the ``focus_ros.egg-info`` an editable install or a build leaves in the source)."""
    import importlib.metadata

    checkout = REPOSITORY_ROOT.resolve()
    for entry in sys.path:
        folder = Path(entry or ".").resolve()
        if folder == checkout or not folder.is_dir():
            continue
        for distribution in importlib.metadata.distributions(name=PACKAGE, path=[str(folder)]):
            return distribution
    return None


def install_prefix() -> Path | None:
    """The ament install prefix of the focus_ros under test (colcon layout), or None (.venv layout).

    ``colcon test`` puts the installed package's metadata first on the path (PYTHONPATH) while
    pytest imports the code from the source folder; ``make test`` finds the editable install of
    the .venv (its metadata says so). So: an editable focus_ros -> None; otherwise the prefix the
    ament index gives for focus_ros (what ``ros2 run`` uses), if that prefix holds the metadata.
    """
    import json

    distribution = _installed_distribution()
    if distribution is None:
        return None
    direct_url = json.loads(distribution.read_text("direct_url.json") or "{}")
    if direct_url.get("dir_info", {}).get("editable"):
        return None
    try:
        from ament_index_python.packages import PackageNotFoundError, get_package_prefix
        prefix = Path(get_package_prefix(PACKAGE)).resolve()
    except (ImportError, OSError, PackageNotFoundError):
        return None
    site_packages = Path(distribution.locate_file("")).resolve()
    return prefix if site_packages.is_relative_to(prefix) else None


def executable_directories() -> list[Path]:
    """Where the focus_ros executables under test are looked up, in order."""
    prefix = install_prefix()
    return [prefix / "lib" / PACKAGE] if prefix is not None else [VENV_BIN]


def executable(name: str) -> str:
    """The console-script entry point, as `ros2 run focus_ros <name>` would start it."""
    for directory in executable_directories():
        path = directory / name
        if path.is_file() and os.access(path, os.X_OK):
            return str(path)
    searched = ", ".join(str(d) for d in executable_directories())
    pytest.fail(f"entry point {name} not installed in {searched}: run `make setup` (or `colcon build`)")


class NodeProcess:
    """A node started as a subprocess; stdout/stderr captured to a file for assertions."""

    def __init__(self, command: list[str], env: dict, log_path: Path):
        self.log_path = log_path
        self._log_file = open(log_path, "wb")
        self.process = subprocess.Popen(command, env=env, stdout=self._log_file,
                                        stderr=subprocess.STDOUT, start_new_session=True,
                                        preexec_fn=die_with_parent)
        _running.append(self)

    def __enter__(self) -> "NodeProcess":
        return self

    def __exit__(self, *exc_info) -> None:
        self.stop()

    def log(self) -> str:
        if not self._log_file.closed:
            self._log_file.flush()
        return self.log_path.read_text(errors="replace")

    def alive(self) -> bool:
        return self.process.poll() is None

    def stop(self, timeout: float = 10.0) -> int:
        if self.alive():
            os.killpg(self.process.pid, signal.SIGINT)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        with contextlib.suppress(OSError):  # anything the node started in its group
            os.killpg(self.process.pid, signal.SIGKILL)
        self._log_file.close()
        if self in _running:
            _running.remove(self)
        return self.process.returncode


def running_processes() -> set["NodeProcess"]:
    """The processes started here and not stopped yet."""
    return set(_running)


def stop_all_processes(keep: set["NodeProcess"] = frozenset()) -> list[str]:
    """Stop every process started here and not stopped yet, except those in ``keep``;
    returns the commands of those that were still alive."""
    left = []
    for process in [p for p in _running if p not in keep]:
        if process.alive():
            left.append(" ".join(map(str, process.process.args)))
        with contextlib.suppress(Exception):
            process.stop(timeout=5.0)
    return left


atexit.register(stop_all_processes)


def spin_until(executor, condition, timeout_s: float, step_s: float = 0.05) -> bool:
    """Spin the executor until condition() is true or the timeout passes."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        executor.spin_once(timeout_sec=step_s)
    return condition()


def check_worker_restart_reported(killed_pid: int, values: dict, node: "NodeProcess") -> None:
    """After the estimator process ``killed_pid`` of ``node`` was killed (SIGKILL): its
    /diagnostics ``values`` count one restart and name another process, the node still runs,
    and its log says which process stopped and that it is restarting, without a traceback."""
    assert int(values["worker_restarts"]) == 1, values
    assert int(values["estimator_process_pid"]) not in (0, killed_pid), values
    assert node.alive()
    log = node.log()
    assert re.search(rf"estimator process \(pid {killed_pid}\) stopped \(killed by signal 9\).*restarting", log), log
    assert "Traceback" not in log


@contextlib.contextmanager
def client_node(name: str, monkeypatch=None):
    """A real rclpy node in this process, in a ROS domain of its own.

    Yields (environment for the processes it talks to, node, executor); shuts down after. The
    domain is set in this process's environment through pytest's ``monkeypatch`` (undone after the
    test), or for good without it (a benchmark's process).
    """
    import rclpy
    from rclpy.executors import SingleThreadedExecutor

    env = ros_environment()
    for key in ("ROS_DOMAIN_ID", "ROS_AUTOMATIC_DISCOVERY_RANGE"):
        if monkeypatch is not None:
            monkeypatch.setenv(key, env[key])
        else:
            os.environ[key] = env[key]
    context = rclpy.Context()
    rclpy.init(context=context)
    node = rclpy.create_node(name, context=context)
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(node)
    try:
        yield env, node, executor
    finally:
        executor.shutdown()
        node.destroy_node()
        rclpy.shutdown(context=context)


class NodeSession:
    """A test's client node and the node processes it starts, over real topics on loopback.

    Subscribes to /diagnostics (``reports``: every DiagnosticArray received, in order, queue
    depth ``reports_depth``). Processes started with :meth:`start` log to
    ``<log_folder>/<log_name>_<n>.log`` and are stopped by :meth:`stop_processes` (called by
    :func:`node_session` at the end). ``subscriber_settle_s`` (s, default 0) is slept after
    :meth:`wait_for_subscriber` sees its subscribers, for tests that need the match settled
    on both sides before publishing.
    """

    def __init__(self, env: dict, node, executor, log_folder: Path, reports_depth: int = 10,
                 subscriber_settle_s: float = 0.0):
        from diagnostic_msgs.msg import DiagnosticArray

        self.env, self.node, self.executor = env, node, executor
        self.log_folder = Path(log_folder)
        self.subscriber_settle_s = subscriber_settle_s
        self.processes: list[NodeProcess] = []
        self.reports: list = []
        node.create_subscription(DiagnosticArray, "/diagnostics", self.reports.append, reports_depth)

    def start(self, executable_name: str, *ros_args: str, params_file: Path | None = None,
              reliable: bool = False, log_name: str | None = None, wait_for_report: bool = True,
              report_timeout_s: float = 30.0) -> NodeProcess:
        """Start ``executable_name`` as `ros2 run` does: ``--ros-args [--params-file F]
        [-p qos_reliability:=reliable] *ros_args``. ``reliable``: reliable QoS, where a test
        counts on every message arriving (best effort may lose the first messages while
        discovery settles). ``wait_for_report``: wait (up to ``report_timeout_s``, s) until
        this session has received a /diagnostics report — the first node's first report
        reaching the test means discovery is done both ways."""
        command = [executable(executable_name), "--ros-args"]
        if params_file is not None:
            command += ["--params-file", str(params_file)]
        if reliable:
            command += ["-p", "qos_reliability:=reliable"]
        command += list(ros_args)
        log_path = self.log_folder / f"{log_name or executable_name}_{len(self.processes)}.log"
        process = NodeProcess(command, self.env, log_path)
        self.processes.append(process)
        if wait_for_report:
            assert spin_until(self.executor, lambda: self.reports, report_timeout_s), process.log()
        return process

    def collect(self, message_type, topic: str, depth: int = 100) -> list:
        """A list that receives every message on ``topic`` while the executor spins."""
        received: list = []
        self.node.create_subscription(message_type, topic, received.append, depth)
        return received

    def wait_for_subscriber(self, publisher, timeout_s: float = 20.0, count: int = 1) -> None:
        """Spin until ``publisher`` has ``count`` subscribers (fails after ``timeout_s``, s, with
        the log of the last started process), then sleep ``subscriber_settle_s``."""
        assert spin_until(self.executor, lambda: publisher.get_subscription_count() >= count, timeout_s), \
            "the node never subscribed: " + (self.processes[-1].log() if self.processes else "")
        if self.subscriber_settle_s > 0:
            time.sleep(self.subscriber_settle_s)

    def publisher(self, message_type, topic: str, depth: int = 100, timeout_s: float = 20.0, count: int = 1):
        """A publisher on ``topic``, returned once ``count`` subscribers match (:meth:`wait_for_subscriber`)."""
        publisher = self.node.create_publisher(message_type, topic, depth)
        self.wait_for_subscriber(publisher, timeout_s, count)
        return publisher

    def spin(self, seconds: float) -> None:
        """Spin the executor for ``seconds`` (s)."""
        spin_until(self.executor, lambda: False, seconds)

    def stop_processes(self) -> None:
        for process in self.processes:
            process.stop()


@contextlib.contextmanager
def node_session(name: str, monkeypatch, log_folder: Path, **options):
    """A :class:`NodeSession` around :func:`client_node` (``options`` go to NodeSession);
    every process it started is stopped at the end."""
    with client_node(name, monkeypatch) as (env, node, executor):
        session = NodeSession(env, node, executor, log_folder, **options)
        try:
            yield session
        finally:
            session.stop_processes()
