"""The package's layout keeps the data flow readable: no import cycle (imports inside functions
count), no module over 800 lines, at most 10 modules loose at the package root, rclpy only in
focus_ros.ros, the core free of file formats and of everything built on it, no thread or process
machinery among the estimators, every package naming its public face (``__all__``), and no
reference to a file outside the repository.

Read from the source with ``ast``: nothing is imported, so a violation is found even in a module
no other test loads."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "focus_ros"
MAX_MODULE_LINES = 800
MAX_ROOT_MODULES = 10
#: top-level imports that mean "this module talks ROS through rclpy"
ROS_CLIENT_MODULES = {"rclpy", "rcl_interfaces", "rosidl_runtime_py", "builtin_interfaces", "std_msgs", "sensor_msgs",
                      "geometry_msgs", "diagnostic_msgs", "nav_msgs", "dvs_msgs", "event_camera_msgs"}
#: what runs an estimator beside a node (focus_ros.runtime), not what estimates
RUNTIME_MODULES = {"threading", "subprocess", "multiprocessing", "concurrent", "signal"}
#: the engine's core: events, camera and poses, warps, IWE, losses, objective, optimizer, windows, stream checks
CORE_MODULES = ("focus_ros.camera", "focus_ros.events", "focus_ros.poses", "focus_ros.warps", "focus_ros.iwe",
                "focus_ros.objective", "focus_ros.optimize", "focus_ros.windows", "focus_ros.stream",
                "focus_ros.losses")
#: what the core must not know: file formats and bags (readers build its objects), and the layers built on it
ABOVE_THE_CORE = ("focus_ros.sources", "focus_ros.cli", "focus_ros.evaluation", "focus_ros.ros")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def imported_modules(name: str) -> set[str]:
    """Every module ``name`` imports anywhere in its source (top level or inside functions),
    relative imports resolved; ``from package import module`` counts as the module."""
    path = MODULES[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[:len(package.split(".")) - node.level + 1]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            found.add(source)
            found.update(f"{source}.{alias.name}" for alias in node.names if f"{source}.{alias.name}" in MODULES)
    return found


def package_graph() -> dict[str, set[str]]:
    return {name: {other for other in imported_modules(name) if other in MODULES and other != name}
            for name in MODULES}


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), each sorted."""
    index, low, stack, on_stack, cycles = {}, {}, [], set(), []

    def visit(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in graph[node]:
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for node in graph:
        if node not in index:
            visit(node)
    return cycles


def test_cycle_finder_finds_a_cycle():
    """The check below would see a cycle (here a made-up one through a function-level import)."""
    assert import_cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert import_cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycle():
    assert import_cycles(package_graph()) == []


@pytest.mark.parametrize("name", sorted(MODULES))
def test_module_is_at_most_800_lines(name):
    lines = len(MODULES[name].read_text().splitlines())
    assert lines <= MAX_MODULE_LINES, f"{MODULES[name]} has {lines} lines: split it by concern"


def test_package_root_holds_few_loose_modules():
    loose = sorted(path.name for path in PACKAGE.glob("*.py") if path.name != "__init__.py")
    assert len(loose) <= MAX_ROOT_MODULES, f"{len(loose)} modules at the root: {loose}"


def test_only_the_ros_layer_talks_ros():
    offenders = {name: sorted(module.split(".")[0] for module in imported_modules(name)
                              if module.split(".")[0] in ROS_CLIENT_MODULES)
                 for name in MODULES if not name.startswith("focus_ros.ros")}
    assert {name: found for name, found in offenders.items() if found} == {}


def in_any(name: str, packages) -> bool:
    return any(name == package or name.startswith(package + ".") for package in packages)


def test_the_core_knows_no_file_format():
    """camera, events, poses, warps, iwe, objective, optimize, windows, stream and losses import
    nothing from sources, cli, evaluation or ros (a trajectory from a bag is a reader in sources)."""
    core = [name for name in MODULES if in_any(name, CORE_MODULES)]
    assert "focus_ros.poses" in core and "focus_ros.losses.histogram" in core
    offenders = {name: sorted(module for module in imported_modules(name) if in_any(module, ABOVE_THE_CORE))
                 for name in core}
    assert {name: found for name, found in offenders.items() if found} == {}


def test_estimators_hold_estimators_only():
    offenders = {name: sorted(module for module in imported_modules(name) if module.split(".")[0] in RUNTIME_MODULES)
                 for name in MODULES if name.startswith("focus_ros.estimators")}
    assert {name: found for name, found in offenders.items() if found} == {}


@pytest.mark.parametrize("name", sorted(name for name, path in MODULES.items() if path.name == "__init__.py"
                                        and name != "focus_ros"))
def test_every_package_names_its_public_face(name):
    tree = ast.parse(MODULES[name].read_text())
    names = [target.id for node in tree.body if isinstance(node, ast.Assign) for target in node.targets
             if isinstance(target, ast.Name)]
    assert "__all__" in names, f"{MODULES[name]} has no __all__"
    assert ast.get_docstring(tree), f"{MODULES[name]} has no docstring saying what the package is"


def test_no_reference_outside_the_repository():
    """Docstrings and comments cite files of the repository only (docs/design.md, BENCHMARKS.md, ...):
    a clone has no ../shared and no design notes beside it."""
    outside = re.compile(r"\.\./shared|/work/|(?<![\w/])design\.md")
    offenders = [f"{path.relative_to(PACKAGE.parent)}:{number}: {line.strip()}"
                 for path in MODULES.values() for number, line in enumerate(path.read_text().splitlines(), 1)
                 if outside.search(line)]
    assert offenders == []
