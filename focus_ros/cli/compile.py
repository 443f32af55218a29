"""Compile every kernel into numba's cache now, not at a node's first launch (as make setup does).

The same as ``python -m focus_ros.kernels``: one line per group of kernels with its time. Run it
after installing or updating focus_ros where the cache is not filled by the install (see the
docs/install.md, "Compiled kernels"), e.g. as the robot's user when the install space is read-only.
"""

from __future__ import annotations

from focus_ros.kernels.command import add_arguments, run

__all__ = ["add_arguments", "run"]
