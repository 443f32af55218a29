"""Real ROS 2 plumbing for tests: nodes in subprocesses, a client node in the test.

Every test gets its own ROS_DOMAIN_ID and localhost-only discovery, so tests do not
hear each other (or anything else on the machine).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

VENV_BIN = Path(sys.executable).parent
_domain_counter = itertools.count()


def ros_environment() -> dict:
    """Environment for a ROS 2 process on loopback, with a domain of its own."""
    env = dict(os.environ)
    env["ROS_DOMAIN_ID"] = str(1 + (os.getpid() * 7 + next(_domain_counter)) % 100)
    env["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
    env.pop("ROS_LOCALHOST_ONLY", None)
    env["PYTHONUNBUFFERED"] = "1"
    env["RCUTILS_COLORIZED_OUTPUT"] = "0"
    return env


def executable(name: str) -> str:
    """The console-script entry point, as `ros2 run focus_ros <name>` would start it."""
    path = VENV_BIN / name
    if not path.exists():
        pytest.fail(f"entry point {name} not installed in {VENV_BIN}: run `make setup`")
    return str(path)


class NodeProcess:
    """A node started as a subprocess; stdout/stderr captured to a file for assertions."""

    def __init__(self, command: list[str], env: dict, log_path: Path):
        self.log_path = log_path
        self._log_file = open(log_path, "wb")
        self.process = subprocess.Popen(command, env=env, stdout=self._log_file,
                                        stderr=subprocess.STDOUT, start_new_session=True)

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
        self._log_file.close()
        return self.process.returncode


def spin_until(executor, condition, timeout_s: float, step_s: float = 0.05) -> bool:
    """Spin the executor until condition() is true or the timeout passes."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        executor.spin_once(timeout_sec=step_s)
    return condition()


@contextlib.contextmanager
def client_node(name: str, monkeypatch):
    """A real rclpy node in the test process, in a ROS domain of its own.

    Yields (environment for the processes it talks to, node, executor); shuts down after.
    """
    import rclpy
    from rclpy.executors import SingleThreadedExecutor

    env = ros_environment()
    for key in ("ROS_DOMAIN_ID", "ROS_AUTOMATIC_DISCOVERY_RANGE"):
        monkeypatch.setenv(key, env[key])
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
