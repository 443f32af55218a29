"""Documents made from declared settings: a Markdown table per node, a parameters file's YAML block.

The text is generated, never written by hand, so it cannot drift from the code:
``python -m focus_ros.ros.parameter_reference --write`` (it needs the nodes, hence rclpy) writes
``config/generic_template.yaml`` and the tables of ``docs/nodes.md`` with these functions, and
``test/test_settings.py`` fails when the files in the repository differ from what they make.
"""

from __future__ import annotations

import re
import textwrap
from typing import Iterable

from focus_ros.settings import Setting

__all__ = ["markdown_table", "replace_marked_block", "yaml_block"]

#: the width YAML comments are wrapped to (characters)
YAML_WIDTH = 118


def _value_text(value) -> str:
    """A parameter value as YAML writes it (also in the Markdown tables)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return '""' if value == "" else value
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_value_text(member) for member in value) + "]"
    if isinstance(value, float):
        return _yaml_float(value)
    return str(value)


def _yaml_float(value: float) -> str:
    """A float as YAML 1.1 (PyYAML, rclpy's parameter files) reads it back as a float: 1e-05 would
    be a string there, 1.0e-05 is a float; inf and nan are .inf and .nan."""
    if value != value:
        return ".nan"
    if value in (float("inf"), float("-inf")):
        return ".inf" if value > 0 else "-.inf"
    text = repr(value)
    mantissa, separator, exponent = text.partition("e")
    if separator and "." not in mantissa:
        text = f"{mantissa}.0e{exponent}"
    return text


def markdown_table(items: Iterable[Setting]) -> str:
    """| parameter | default | unit | range | description | — one row per setting with a ROS
    parameter, in declaration order."""
    rows = ["| parameter | default | unit | range or choices | what it does |", "|---|---|---|---|---|"]
    for item in items:
        if item.parameter is None:
            continue
        accepted = item.range_text() or ", ".join(f"`{choice}`" for choice in item.declaration.choices)
        notes = item.declaration.help.replace("|", "\\|")
        if item.optional and item.declaration.unset is not None:
            notes += f" ({_value_text(item.declaration.unset)} = unset)"
        if item.declaration.read_only:
            notes += " (read-only: set at start)"
        rows.append(f"| `{item.parameter}` | `{_value_text(item.parameter_default)}` | {item.declaration.unit} | "
                    f"{accepted} | {notes} |")
    return "\n".join(rows)


def yaml_block(items: Iterable[Setting], indent: int = 4) -> list[str]:
    """The lines of a ``ros__parameters`` block: every setting with a ROS parameter at its
    default, after a comment with its description; a dotted name (``calibration.fx``) nested
    under its prefix, the prefixes in order of first appearance."""
    lines: list[str] = []
    open_prefix = ""
    for item in items:
        if item.parameter is None:
            continue
        prefix, _, key = item.parameter.rpartition(".")
        if prefix != open_prefix:
            if prefix:
                lines.append(" " * indent + f"{prefix}:")
            open_prefix = prefix
        depth = indent + (2 if prefix else 0)
        comment = textwrap.wrap(item.description(), YAML_WIDTH - depth - 2)
        lines.extend(" " * depth + "# " + line for line in comment)
        lines.append(" " * depth + f"{key}: {_value_text(item.parameter_default)}")
    return lines


def replace_marked_block(text: str, name: str, content: str) -> str:
    """``text`` with the block after the marker ``<!-- parameters: NAME -->`` replaced by
    ``content``, up to the end marker ``<!-- /parameters -->`` (added when missing). ValueError
    when the marker is not there."""
    start = f"<!-- parameters: {name} -->"
    end = "<!-- /parameters -->"
    # the block ends at the first end marker, unless another block's start marker comes first
    block = r"(?:(?!<!-- parameters: ).)*?" + re.escape(end)
    match = re.search(re.escape(start) + r"(?:" + block + r")?", text, flags=re.S)
    if match is None:
        raise ValueError(f"no '{start}' marker")
    return text[:match.start()] + f"{start}\n{content}\n{end}" + text[match.end():]
