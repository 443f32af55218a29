"""A real Ray cluster on loopback for tests and benchmarks: a head node and worker nodes started
with ``ray start`` in subprocesses, in a temporary folder, stopped by process group.

Each ``ray start`` leaves its daemons (GCS, raylet, agents; the raylet's worker processes) in
one process group; :meth:`LoopbackRayCluster.stop` ends exactly those groups (SIGTERM, then
SIGKILL), never Ray processes of anyone else, which ``ray stop`` would. Ray workers are found as
the raylets' children; a worker running a grid job is titled ``ray::run_grid_job``.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

RAY = str(Path(sys.executable).parent / "ray")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _processes() -> dict[int, tuple[int, int, str]]:
    """pid -> (ppid, pgid, command line) of every process readable in /proc."""
    table = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            fields = stat[stat.rindex(")") + 2:].split()
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            continue
        table[int(entry.name)] = (int(fields[1]), int(fields[2]), command)
    return table


class LoopbackRayCluster:
    """``nodes`` Ray nodes of ``cpus`` CPUs each on 127.0.0.1, their files in ``folder``."""

    def __init__(self, folder: Path, nodes: int = 2, cpus: int = 1, object_store_mb: int = 200):
        self.folder = Path(folder)
        self.nodes, self.cpus, self.object_store_mb = nodes, cpus, object_store_mb
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.groups: set[int] = set()
        self.environment = dict(os.environ, RAY_USAGE_STATS_ENABLED="0")

    def start(self) -> "LoopbackRayCluster":
        self.folder.mkdir(parents=True, exist_ok=True)
        common = ["--num-cpus", str(self.cpus), "--node-ip-address", "127.0.0.1", "--disable-usage-stats",
                  "--object-store-memory", str(self.object_store_mb * 1024 * 1024)]
        try:
            self._ray_start(["--head", "--port", str(self.port), "--temp-dir", str(self.folder),
                             "--include-dashboard", "false", *common])
            for _ in range(self.nodes - 1):
                self._ray_start(["--address", self.address, *common])
        except BaseException:
            self.stop()
            raise
        return self

    def _ray_start(self, arguments: list[str]) -> None:
        before = set(_processes())
        # a session of its own: the daemons share its process group, and only they do
        completed = subprocess.run([RAY, "start", *arguments], env=self.environment, capture_output=True, text=True,
                                   timeout=120, start_new_session=True)
        # the daemons this start left behind: new processes that name our folder
        for pid, (_, group, command) in _processes().items():
            if pid not in before and str(self.folder) in command and group != os.getpgrp():
                self.groups.add(group)
        if completed.returncode:
            raise RuntimeError(f"ray start {' '.join(arguments)} failed:\n{completed.stdout}\n{completed.stderr}")

    def raylets(self) -> list[int]:
        return [pid for pid, (_, group, command) in _processes().items()
                if group in self.groups and "raylet/raylet" in command]

    def workers(self, title: str = "ray::") -> list[int]:
        """pids of the raylets' worker processes whose title starts with ``title``."""
        raylets = set(self.raylets())
        return sorted(pid for pid, (parent, _, command) in _processes().items()
                      if parent in raylets and command.startswith(title))

    def alive(self) -> list[int]:
        """pids of every process still in the cluster's process groups."""
        return sorted(pid for pid, (_, group, _) in _processes().items() if group in self.groups)

    def stop(self, timeout_s: float = 15.0) -> None:
        """End the cluster's process groups (SIGTERM, then SIGKILL after timeout_s); their
        temporary files stay in ``folder`` (the caller's temporary directory)."""
        for sig in (signal.SIGTERM, signal.SIGKILL):
            for group in self.groups:
                try:
                    os.killpg(group, sig)
                except ProcessLookupError:
                    pass
            deadline = time.monotonic() + (timeout_s if sig == signal.SIGTERM else 5.0)
            while self.alive() and time.monotonic() < deadline:
                time.sleep(0.2)
            if not self.alive():
                return
