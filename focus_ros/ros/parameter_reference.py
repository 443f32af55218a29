"""The nodes' parameter reference, made from their declared settings (:mod:`focus_ros.settings`):
``config/generic_template.yaml`` and the parameter tables of ``docs/nodes.md``.

    python -m focus_ros.ros.parameter_reference          # says which file differs from the code
    python -m focus_ros.ros.parameter_reference --write  # rewrites them

``test/test_settings.py`` fails when the files in the repository differ from what this makes.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path

from focus_ros.ros.estimating_node import RunnerSettings
from focus_ros.ros.event_input import EventInputSettings
from focus_ros.settings import declared
from focus_ros.settings.documents import markdown_table, replace_marked_block, yaml_block

#: the settings every estimating node declares, in the template's ``/**`` block
SHARED_SETTINGS = (("the event input (every node)", EventInputSettings),
                   ("the estimator's process (every node)", RunnerSettings))
#: node name -> module holding its ``SETTINGS_CLASSES`` (the settings it declares beyond the shared ones)
NODES = {"angular_velocity_node": "focus_ros.ros.angular_velocity_node",
         "optical_flow_node": "focus_ros.ros.optical_flow_node",
         "depth_node": "focus_ros.ros.depth_node"}
#: nodes with a parameter table in docs/nodes.md but not in the template (not an estimating node)
REFERENCE_ONLY_NODES = {"replay_node": "focus_ros.ros.replay_node"}
REPOSITORY = Path(__file__).resolve().parents[2]
TEMPLATE_PATH = Path("config") / "generic_template.yaml"
REFERENCE_PATH = Path("docs") / "nodes.md"
TEMPLATE_HEADER = """\
# Template for any event camera: copy, fill in the calibration, and pass with
#   ros2 run focus_ros angular_velocity_node --ros-args --params-file my_camera.yaml
# (optical_flow_node and depth_node take the same file: each reads the /** block and its own).
# Every parameter the three nodes declare, at its default, with its description, unit and range.
# Generated from the code by `python -m focus_ros.ros.parameter_reference --write`: edit the
# settings' declarations, not this file. `ros2 param describe /NODE NAME` says the same.
"""


def node_settings_classes(node: str) -> tuple:
    """The settings ``node`` declares beyond the shared ones (its module's ``SETTINGS_CLASSES``:
    classes, or instances whose values are the node's defaults)."""
    return tuple(importlib.import_module({**NODES, **REFERENCE_ONLY_NODES}[node]).SETTINGS_CLASSES)


def _items(classes) -> list:
    return [item for cls in classes for item in declared(cls) if item.parameter is not None]


def generic_template() -> str:
    """The text of ``config/generic_template.yaml``."""
    lines = [TEMPLATE_HEADER.rstrip("\n"), "/**:", "  ros__parameters:"]
    for title, cls in SHARED_SETTINGS:
        lines.append(f"    # {title}")
        lines.extend(yaml_block(declared(cls)))
    for node in NODES:
        lines.extend([f"{node}:", "  ros__parameters:"])
        lines.extend(yaml_block(_items(node_settings_classes(node))))
    return "\n".join(lines) + "\n"


def nodes_reference(text: str) -> str:
    """``docs/nodes.md``'s ``text`` with its generated parameter tables brought up to date: the
    blocks after ``<!-- parameters: event_input -->``, ``... runner -->`` and one per node."""
    text = replace_marked_block(text, "event_input", markdown_table(declared(EventInputSettings)))
    text = replace_marked_block(text, "runner", markdown_table(declared(RunnerSettings)))
    for node in (*NODES, *REFERENCE_ONLY_NODES):
        text = replace_marked_block(text, node, markdown_table(_items(node_settings_classes(node))))
    return text


def generated_files(repository: Path = REPOSITORY) -> dict[Path, str]:
    """Path -> the text the code makes for it."""
    return {repository / TEMPLATE_PATH: generic_template(),
            repository / REFERENCE_PATH: nodes_reference((repository / REFERENCE_PATH).read_text())}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m focus_ros.ros.parameter_reference", description=__doc__.split("\n")[0])
    parser.add_argument("--write", action="store_true", help="rewrite the files that differ")
    args = parser.parse_args(argv)
    stale = [path for path, text in generated_files().items() if path.read_text() != text]
    for path in stale:
        if args.write:
            path.write_text(generated_files()[path])
            print(f"wrote {path.relative_to(REPOSITORY)}")
        else:
            print(f"{path.relative_to(REPOSITORY)} differs from the code: run with --write")
    return 0 if args.write or not stale else 1


if __name__ == "__main__":
    sys.exit(main())
