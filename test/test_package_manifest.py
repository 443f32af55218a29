"""package.xml declares what the package's code, launch files and tests import, with rosdep keys;
the nested interface packages are found the way the README's rosdep line says.

Static: every import (anywhere in a file, not only at the top) of focus_ros/, launch/ and test/
is read with `ast` and mapped to its rosdep key by ROSDEP_KEYS; an import missing from that
table fails, so a new dependency cannot slip in undeclared. The keys' names follow rosdistro
(rosdep/python.yaml: python3-numba, python3-rosbags-pip, ...) and ROS package names; whether a
key resolves on a given distro needs the rosdep database, which is not reachable here.
"""

from __future__ import annotations

import ast
import re
import shlex
import sys
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import pytest

from conftest import REPOSITORY_ROOT

#: imported top-level module -> rosdep key (None: comes with another key, named in the comment)
ROSDEP_KEYS = {
    "numpy": "python3-numpy", "scipy": "python3-scipy", "cv2": "python3-opencv", "yaml": "python3-yaml",
    "matplotlib": "python3-matplotlib", "tqdm": "python3-tqdm", "numba": "python3-numba",
    "rosbags": "python3-rosbags-pip", "pytest": "python3-pytest",
    "lz4": None,  # a dependency of rosbags (python3-rosbags-pip)
    "ray": None,  # the optional extra focus_ros[ray] (--ray): pip only, no rosdep key
    "catkin_pkg": "python3-catkin-pkg-modules",  # the rosdep-line test (what rosdep crawls with)
    "rclpy": "rclpy", "rcl_interfaces": "rcl_interfaces", "ament_index_python": "ament_index_python",
    "builtin_interfaces": "builtin_interfaces", "std_msgs": "std_msgs", "sensor_msgs": "sensor_msgs",
    "geometry_msgs": "geometry_msgs", "diagnostic_msgs": "diagnostic_msgs", "nav_msgs": "nav_msgs",
    "dvs_msgs": "dvs_msgs", "tf2_msgs": "tf2_msgs",
    "event_camera_msgs": "event_camera_msgs", "launch": "launch", "launch_ros": "launch_ros",
    "rosidl_adapter": "rosidl_adapter",  # test_bags: generates ROS 2 IDL as rosbag2 stores it
}
RUN_TAGS = ("depend", "exec_depend")
TEST_TAGS = RUN_TAGS + ("test_depend",)


def declared(tags) -> set[str]:
    root = ElementTree.parse(REPOSITORY_ROOT / "package.xml").getroot()
    return {element.text.strip() for tag in tags for element in root.iter(tag)}


def imported_modules(folder: Path) -> dict[str, set[str]]:
    """Third-party top-level modules imported by the .py files under folder -> files importing them."""
    local = {"focus_ros"} | {path.stem for path in (REPOSITORY_ROOT / "test").glob("*.py")}
    found: dict[str, set[str]] = {}
    for path in sorted(folder.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top not in sys.stdlib_module_names and top not in local:
                    found.setdefault(top, set()).add(str(path.relative_to(REPOSITORY_ROOT)))
    return found


@pytest.mark.parametrize("folder, tags", [("focus_ros", RUN_TAGS), ("launch", RUN_TAGS), ("test", TEST_TAGS)])
def test_every_import_is_a_declared_dependency(folder, tags):
    have = declared(tags)
    for module, files in imported_modules(REPOSITORY_ROOT / folder).items():
        assert module in ROSDEP_KEYS, f"{module} (imported by {sorted(files)}) has no rosdep key in ROSDEP_KEYS"
        key = ROSDEP_KEYS[module]
        assert key is None or key in have, \
            f"package.xml lacks <{tags[-1]}>{key}</{tags[-1]}> for `import {module}` in {sorted(files)}"


def test_packages_started_by_launch_files_are_run_dependencies():
    packages = set()
    for path in (REPOSITORY_ROOT / "launch").glob("*.py"):
        packages |= set(re.findall(r"package\s*=\s*[\"'](\w+)[\"']", path.read_text()))
    missing = packages - {"focus_ros"} - declared(RUN_TAGS)
    assert not missing, f"launch files start packages package.xml does not declare: {sorted(missing)}"


def readme_rosdep_paths() -> list[str]:
    readme = (REPOSITORY_ROOT / "README.md").read_text()
    lines = [line for line in readme.splitlines() if re.match(r"\s*(cd \S+ && )?rosdep install", line)]
    assert len(lines) == 1, f"README.md should show one `rosdep install` line, found {lines}"
    words = shlex.split(lines[0].split("rosdep install", 1)[1].split("#")[0])
    start = words.index("--from-paths") + 1
    paths = []
    for word in words[start:]:
        if word.startswith("-"):
            break
        paths.append(word)
    assert "--ignore-src" in words
    return paths


def test_readme_rosdep_line_finds_the_nested_interface_packages(tmp_path):
    """rosdep --ignore-src skips the keys of packages found under --from-paths; like rosdep, use
    catkin_pkg's crawler, which does not look inside a package (so interfaces/ must be named)."""
    catkin_packages = pytest.importorskip("catkin_pkg.packages")
    workspace = tmp_path / "ws"
    clone = workspace / "src" / "focus_ros"   # the clone's manifest and interfaces, as links
    clone.mkdir(parents=True)
    (clone / "package.xml").symlink_to(REPOSITORY_ROOT / "package.xml")
    (clone / "interfaces").symlink_to(REPOSITORY_ROOT / "interfaces")
    found = set()
    for path in readme_rosdep_paths():
        found |= {package.name for package in catkin_packages.find_packages(str(workspace / path)).values()}
    interfaces = {ElementTree.parse(p).getroot().findtext("name")
                  for p in (REPOSITORY_ROOT / "interfaces").glob("*/package.xml")}
    assert interfaces == {"dvs_msgs", "event_camera_msgs", "tf2_msgs"}
    # tf2_msgs is COLCON_IGNOREd: in a ROS install rosdep resolves it to the distribution's own
    assert {"focus_ros", "dvs_msgs", "event_camera_msgs"} <= found, f"the README's rosdep line finds only {sorted(found)}"
    assert "tf2_msgs" not in found
    assert interfaces <= declared(RUN_TAGS)
