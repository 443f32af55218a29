"""The one table of kernel groups: which modules' compiled kernels each part of focus_ros runs.

A group is what one user of the kernels needs compiled: the three estimator kinds of
:mod:`focus_ros.runtime.kinds` (the nodes' estimators, with what their node does with the
result), the event input every node and ``focus-ros`` command decodes with, the Event Camera
Dataset text files, the simulator of ``make demo`` and ``focus-ros simulate``, and the
array helpers of tests and tools. The table names modules, not kernels: every kernel of a
listed module belongs to the group (a kernel added to a listed module needs no new row, a
new module with kernels needs one; ``test/test_kernels.py`` checks both that every kernel
of the package is in some group and that building and running each kind touches no kernel
outside its group).

Importing this module imports nothing else of focus_ros (safe from anywhere, the runtime
included).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class KernelGroup:
    """One row of :data:`GROUPS`.

    name: the group's key (an estimator kind's name for the three kinds);
    users: who runs these kernels, for progress lines and error messages;
    modules: the modules whose kernels the group runs;
    expected_compile_s: what compiling the group costs from an empty cache (s; see
    :func:`expected_compile_s`).
    """

    name: str
    users: str
    modules: tuple[str, ...]
    expected_compile_s: float


_ESTIMATOR_CORE = ("focus_ros.warps", "focus_ros.iwe", "focus_ros.objective", "focus_ros.losses.reductions",
                   "focus_ros.losses.support", "focus_ros.losses.histogram")

#: name -> KernelGroup, in the order :func:`focus_ros.kernels.precompile` compiles them
GROUPS = {group.name: group for group in (
    KernelGroup("angular_velocity", "angular_velocity_node, focus-ros estimate / evaluate / landscape",
                _ESTIMATOR_CORE, 1.7),
    KernelGroup("optical_flow", "optical_flow_node, focus-ros flow / evaluate-flow",
                ("focus_ros.flow.patches", "focus_ros.flow.patch_losses") + _ESTIMATOR_CORE, 2.7),
    KernelGroup("depth", "depth_node (its estimator and fused map), focus-ros depth / evaluate-depth",
                ("focus_ros.depth.dsi", "focus_ros.depth.focus", "focus_ros.depth.semidense", "focus_ros.depth.fusion",
                 "focus_ros.losses.reductions", "focus_ros.losses.support", "focus_ros.losses.histogram"), 10.6),
    KernelGroup("event_input", "every node's event subscription, bags, replay_node, focus-ros replay / info",
                ("focus_ros.codecs._payload", "focus_ros.codecs.dvs_msgs", "focus_ros.codecs.evt3",
                 "focus_ros.codecs.libcaer", "focus_ros.codecs.libcaer_cmp", "focus_ros.stream"), 10.8),
    KernelGroup("recordings", "Event Camera Dataset folders (events.txt) read and written",
                ("focus_ros.sources.ecd",), 1.1),
    KernelGroup("simulator", "make demo, focus-ros simulate",
                ("focus_ros.sources.simulator", "focus_ros.sources.scenes", "focus_ros.sources.trajectories"), 12.5),
    KernelGroup("tools", "focus_ros.iwe.accumulate and focus_ros.warps.warp_events (tests, tools)",
                ("focus_ros.iwe", "focus_ros.warps"), 2.6),
)}

#: the estimator kinds (:data:`focus_ros.runtime.kinds.KINDS`), each a group of its own
KINDS = ("angular_velocity", "optical_flow", "depth")


def group_named(name: str) -> KernelGroup:
    """The :data:`GROUPS` row called ``name``; ValueError listing the known ones otherwise."""
    try:
        return GROUPS[name]
    except KeyError:
        raise ValueError(f"kernel group '{name}' is not one of: {', '.join(GROUPS)}") from None


def modules_of(name: str | None = None) -> tuple[str, ...]:
    """The modules of group ``name`` (None: of every group, each once, in table order)."""
    groups = GROUPS.values() if name is None else (group_named(name),)
    return tuple(dict.fromkeys(module for group in groups for module in group.modules))


def expected_compile_s(kind: str) -> float:
    """About how long (s) compiling group ``kind`` takes from an empty cache: for an estimator
    kind, what its node compiles before its first result (the estimator built with the node's
    default settings on a DAVIS240C and one job run:
    :func:`focus_ros.kernels.precompile.run_like_a_node`); for the other groups, the group's
    share of :func:`focus_ros.kernels.precompile` (all of it: a node decoding one message type
    compiles less of "event_input"). Medians of 3 runs with ``benchmarks/bench_kernels.py`` on
    the 2-core machine of this project, load average about 2 (2026-11-27; BENCHMARKS.md,
    "Kernels compiled at install"): a busier machine takes proportionally longer (twice as long
    at load 4). ValueError for an unknown name."""
    return group_named(kind).expected_compile_s
