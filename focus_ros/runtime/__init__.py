"""How an estimator runs beside a node: inline, in a thread, or in a process of its own.

One execution model for the angular velocity, optical flow and depth nodes. Which estimator
runs is a *kind* (:mod:`~focus_ros.runtime.kinds`, the one table :data:`KINDS`); an *engine*
runs it: :class:`EstimatorProcess` (:mod:`~focus_ros.runtime.process`: a worker process fed
through shared memory, optionally pinned to CPUs, :mod:`~focus_ros.runtime.cpus`) or
:class:`InlineEstimator` (:mod:`~focus_ros.runtime.inline`: the calling thread, same
interface, identical estimates). :class:`EstimatorRunner` (:mod:`~focus_ros.runtime.runner`)
is what the nodes use: a thread that keeps an engine configured and fed from a queue of
:class:`Job`, restarts a dead worker, counts what happened and gives the nodes their shared
``/diagnostics`` status.

Why a process: in a node the estimator shares the interpreter with the executor thread that
takes and decodes the event messages; the optimizer's Python steps then wait for the GIL.
In a process of its own it runs exactly the offline code whatever the executor does
(measurements: BENCHMARKS.md, "The node through ROS 2"). Nothing here imports rclpy.
"""

from focus_ros.runtime.cpus import format_cpu_list, parse_cpu_list
from focus_ros.runtime.inline import InlineEstimator
from focus_ros.runtime.kinds import KINDS, EstimatorKind, WorkerResult, kind_named
from focus_ros.runtime.process import EstimatorProcess, WorkerDied
from focus_ros.runtime.runner import EstimatorRunner, Job, PictureRate

__all__ = ["KINDS", "EstimatorKind", "EstimatorProcess", "EstimatorRunner", "InlineEstimator", "Job", "PictureRate",
           "WorkerDied", "WorkerResult", "format_cpu_list", "kind_named", "parse_cpu_list"]
