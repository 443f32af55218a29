"""focus_ros's compiled kernels and numba's on-disk cache of them: compiled at install, not at a
robot's first launch.

Every numerical kernel of focus_ros is a ``numba.njit(cache=True)`` function. numba compiles a
kernel on its first call in a process for the argument types it gets (an angular velocity node
compiles for about 2 s, a depth node for about 10 s, on 2 cores) and writes the machine code to
its on-disk cache, from which later processes load it in milliseconds. This package makes that
first compilation happen when focus_ros is installed or updated (``make setup``, the colcon
install), and lets a node know beforehand when it will compile anyway:

- :func:`precompile` compiles every kernel for the types the nodes and ``focus-ros`` use, one
  group at a time (``python -m focus_ros.kernels`` or ``focus-ros compile``);
- :func:`missing_kernels` says, without compiling, which kernels a group (an estimator kind,
  the event input, ...) would compile now, and :func:`expected_compile_s` about how long
  that takes;
- :data:`GROUPS` is the one table of which modules each group's kernels live in.

Modules: :mod:`.groups` (the table; imports nothing of focus_ros), :mod:`.cache` (what numba's
cache holds, read with numba's own objects; where it lives and why), :mod:`.precompile`
(running the real code paths on small inputs, through :mod:`focus_ros.runtime.kinds`),
:mod:`.command` (the command line). The runtime asks ``focus_ros.kernels.cache`` and
``focus_ros.kernels.groups``, which import no runtime module (no import cycle).
"""

from focus_ros.kernels.cache import cache_folders, compile_counts, missing_kernels
from focus_ros.kernels.groups import GROUPS, KINDS, KernelGroup, expected_compile_s, group_named, modules_of
from focus_ros.kernels.precompile import precompile

__all__ = ["GROUPS", "KINDS", "KernelGroup", "cache_folders", "compile_counts", "expected_compile_s", "group_named",
           "missing_kernels", "modules_of", "precompile"]
