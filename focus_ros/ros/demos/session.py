"""What both demos share: a ROS domain of their own on loopback, a node started as ``ros2 run``
starts it, and, in this process, a collector node and a bag replayer on one executor."""

from __future__ import annotations

import contextlib
import os
import subprocess
from pathlib import Path

#: the repository's parameter files (config/), as a source checkout holds them
CONFIG_FOLDER = Path(__file__).resolve().parents[3] / "config"


def ros_environment() -> dict:
    """This process's environment for ROS 2 on loopback, in a domain of the demo's own
    (the nodes it starts get the same)."""
    environment = dict(os.environ)
    environment.setdefault("ROS_DOMAIN_ID", str(60 + os.getpid() % 40))
    environment.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    os.environ.update({key: environment[key] for key in ("ROS_DOMAIN_ID", "ROS_AUTOMATIC_DISCOVERY_RANGE")})
    return environment


@contextlib.contextmanager
def node_and_replayer(command: list[str], log_path: Path, bag: Path, rate: float):
    """Start a node as ``ros2 run`` would (``command``, output to ``log_path``) and, in this
    process, a collector node and a bag replayer (``rate``: 0 = at the estimator's pace) on
    one executor; yields (collector, replayer, executor); stops the node and ROS after."""
    import rclpy
    from rclpy.executors import SingleThreadedExecutor

    from focus_ros.ros.replay_node import BagReplayer

    environment = ros_environment()
    with open(log_path, "wb") as log:
        process = subprocess.Popen(command, env=environment, stdout=log, stderr=subprocess.STDOUT)
        rclpy.init()
        try:
            collector = rclpy.create_node("focus_ros_demo")
            replayer = BagReplayer(bag=str(bag), rate=rate)
            executor = SingleThreadedExecutor()
            executor.add_node(collector)
            executor.add_node(replayer)
            yield collector, replayer, executor
        finally:
            process.terminate()
            process.wait(timeout=10)
            rclpy.try_shutdown()
