"""Settings declared once: a dataclass field says its type, default, unit, range and one line of help.

Every knob of focus_ros is a field of a frozen settings dataclass, declared with :func:`setting`::

    @dataclass(frozen=True)
    class DepthSettings:
        planes: int = setting(100, "depth planes of the DSI (EMVS: 100)", minimum=2, maximum=1000)
        z_min_m: float = setting(0.3, "nearest depth searched", unit="m", minimum=0.01, option="--z-min")

From that one declaration come, without a second copy:

- the command line's options (:mod:`focus_ros.cli._settings`: ``--planes``, ``--z-min``, with the
  type, the range checked and the default in the help),
- the ROS parameters with their descriptors and ranges (:mod:`focus_ros.ros.parameters`),
- the parameter tables in ``docs/nodes.md`` and ``config/generic_template.yaml``
  (:mod:`focus_ros.settings.documents`; ``test/test_settings.py`` fails when they drift).

A setting's name is its field name, which is also its ROS parameter name (``parameter`` renames it,
e.g. ``calibration.fx``; None keeps it off ROS); its command-line option is ``--`` and the name with
dashes (``option`` renames it; None keeps it off the command line). A field declared with plain
``field()`` or a default is not a setting (internal, or a structure such as loss options).
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from dataclasses import MISSING, dataclass
from typing import Any, Callable, Mapping

__all__ = ["Declaration", "Setting", "check_value", "declared", "from_parameter_value", "setting", "settings_from_values",
           "to_parameter_value"]

#: the key of a field's metadata that holds its :class:`Declaration`
METADATA_KEY = "focus_ros.setting"


@dataclass(frozen=True)
class Declaration:
    """What :func:`setting` records on a field (see there for the meaning of each part)."""

    help: str
    unit: str = ""
    minimum: float | None = None
    maximum: float | None = None
    choices: tuple = ()
    option: str | None = ""
    parameter: str | None = ""
    read_only: bool = False
    negated_option: bool = False
    unset: Any = None


def setting(default: Any = MISSING, help: str = "", *, unit: str = "", minimum: float | None = None,
            maximum: float | None = None, choices: tuple = (), option: str | None = "", parameter: str | None = "",
            read_only: bool = False, negated_option: bool = False, unset: Any = None,
            default_factory: Any = MISSING) -> Any:
    """A dataclass field that is a user-facing setting.

    default: its value when nobody sets it (or ``default_factory`` for a list);
    help: one line, what it does (no default, unit or range: those are added where shown);
    unit: "m", "s", "px", "deg", "rad/s", "events", ...; minimum, maximum: the closed range
    accepted (None: unbounded); choices: the values accepted (strings); option: the command
    line's option ("" = ``--name-with-dashes``, None = none); parameter: the ROS parameter's
    name ("" = the field name, None = none); read_only: the ROS parameter cannot change while
    the node runs; negated_option: the option is a flag that sets a True default to False
    (``--fixed-depth-range`` for ``auto_depth_range``); unset: for an optional setting (type
    ``X | None``), the ROS parameter value that stands for None (ROS has no None), e.g. -1.0.
    """
    declaration = Declaration(help=" ".join(help.split()), unit=unit, minimum=minimum, maximum=maximum,
                              choices=tuple(choices), option=option, parameter=parameter, read_only=read_only,
                              negated_option=negated_option, unset=unset)
    if default_factory is not MISSING:
        return dataclasses.field(default_factory=default_factory, metadata={METADATA_KEY: declaration})
    return dataclasses.field(default=default, metadata={METADATA_KEY: declaration})


@dataclass(frozen=True)
class Setting:
    """One declared setting of a settings class, resolved: its field ``name``, its value
    ``kind`` (bool, int, float, str, or list for a list of floats), whether None is allowed
    (``optional``), its ``default`` and its :class:`Declaration`."""

    name: str
    kind: type
    optional: bool
    default: Any
    declaration: Declaration
    #: a list's member type: float, int for ``tuple[int, ...]`` (a ROS integer array) or str
    members: type = float

    @property
    def option(self) -> str | None:
        """The command line's option (``--z-min``), or None."""
        option = self.declaration.option
        return None if option is None else (option or "--" + self.name.replace("_", "-"))

    @property
    def parameter(self) -> str | None:
        """The ROS parameter's name, or None."""
        parameter = self.declaration.parameter
        return None if parameter is None else (parameter or self.name)

    @property
    def parameter_default(self) -> Any:
        """The default as a ROS parameter holds it (None as ``unset``, a tuple as a list)."""
        return to_parameter_value(self, self.default)

    def description(self, parameter: bool = True) -> str:
        """The help with the unit, range and choices: one line for ``ros2 param describe`` and
        the docs; ``parameter`` false: for ``--help``, where an optional setting is unset by not
        giving the option (the ROS parameter's ``unset`` value does not apply)."""
        parts = [self.declaration.help]
        facts = []
        if self.declaration.unit:
            facts.append(self.declaration.unit)
        range_text = self.range_text()
        if range_text:
            facts.append(range_text)
        if self.declaration.choices:
            facts.append("one of: " + ", ".join(map(str, self.declaration.choices)))
        if parameter and self.optional and self.declaration.unset is not None:
            facts.append(f"{self.declaration.unset!r} = unset")
        if facts:
            parts.append(f"[{'; '.join(facts)}]")
        return " ".join(parts)

    def range_text(self) -> str:
        """The accepted range as text ("0 to 60", ">= 1"), or "" when unbounded."""
        low, high = self.declaration.minimum, self.declaration.maximum
        if low is None and high is None:
            return ""
        if high is None:
            return f">= {_number_text(low)}"
        if low is None:
            return f"<= {_number_text(high)}"
        return f"{_number_text(low)} to {_number_text(high)}"


def _number_text(value: float) -> str:
    """A range bound as people write it: 100000000, not 1e+08; 0.5 as 0.5."""
    return str(int(value)) if float(value).is_integer() and abs(value) < 1e15 else f"{value:g}"


def _resolved_kind(annotation) -> tuple[type, bool, type]:
    """(value kind, optional, list member type) of a field's type annotation."""
    optional = False
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        members = [member for member in typing.get_args(annotation) if member is not type(None)]
        optional = len(members) < len(typing.get_args(annotation))
        if len(members) != 1:
            raise TypeError(f"a setting has one type (or that type | None), not {annotation!r}")
        annotation = members[0]
        origin = typing.get_origin(annotation)
    if annotation in (bool, int, float, str):
        return annotation, optional, float
    if origin in (list, tuple) or annotation in (list, tuple):
        member_types = [member for member in typing.get_args(annotation) if member is not Ellipsis]
        member = member_types[0] if member_types else float
        if member not in (float, int, str):
            raise TypeError(f"a list setting holds floats, ints or strings, not {annotation!r}")
        return list, optional, member
    raise TypeError(f"a setting is a bool, int, float, str or a list of them, not {annotation!r}")


def declared(settings) -> tuple[Setting, ...]:
    """The settings a class declares with :func:`setting`, in field order. Given an instance
    instead of the class, its values are the defaults: the node's or a command's own defaults
    (``real_time_settings()``) without a second declaration."""
    cls = settings if isinstance(settings, type) else type(settings)
    hints = typing.get_type_hints(cls)
    found = []
    for item in dataclasses.fields(cls):
        declaration = item.metadata.get(METADATA_KEY)
        if declaration is None:
            continue
        kind, optional, members = _resolved_kind(hints[item.name])
        if settings is not cls:
            default = getattr(settings, item.name)
        else:
            default = item.default if item.default is not MISSING else item.default_factory()
        found.append(Setting(item.name, kind, optional, default, declaration, members))
    return tuple(found)


def check_value(item: Setting, value: Any, name: str | None = None) -> str | None:
    """Why ``value`` is not acceptable for ``item`` (its range or its choices), or None; the
    setting called ``name`` in the text (default: its field name; the ROS parameter's or the
    option's name where the user wrote that)."""
    name = name or item.name
    if value is None:
        return None if item.optional else f"{name} must be set"
    if item.declaration.choices and value not in item.declaration.choices:
        return f"{name} '{value}' is not one of: {', '.join(map(str, item.declaration.choices))}"
    if item.kind in (int, float) and not isinstance(value, bool):
        low, high = item.declaration.minimum, item.declaration.maximum
        if isinstance(value, float) and not math.isfinite(value) or \
                (low is not None and value < low) or (high is not None and value > high):
            return f"{name} must be {item.range_text() or 'finite'}, got {value!r}"
    return None


def to_parameter_value(item: Setting, value: Any) -> Any:
    """A setting's value as a ROS parameter holds it."""
    if value is None:
        return item.declaration.unset
    if item.kind is list:
        return [item.members(member) for member in value]
    return value


def from_parameter_value(item: Setting, value: Any) -> Any:
    """A ROS parameter's value as the setting holds it (``unset`` as None, a list as a tuple)."""
    if item.optional and item.declaration.unset is not None and value == item.declaration.unset:
        return None
    if item.kind is list:
        return tuple(item.members(member) for member in value)
    if item.kind is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    return value


def settings_from_values(cls, values: Mapping[str, Any], base=None, *,
                         name_of: Callable[[Setting], str] = lambda item: item.name):
    """``base`` (default: ``cls()``) with the declared settings in ``values`` (by field name)
    replaced; ValueError naming (``name_of(setting)``) the first value out of its range or choices
    (then the class's own checks, in its ``__post_init__``)."""
    base = cls() if base is None else base
    changes = {}
    for item in declared(cls):
        if item.name in values:
            problem = check_value(item, values[item.name], name_of(item))
            if problem:
                raise ValueError(problem)
            changes[item.name] = values[item.name]
    return dataclasses.replace(base, **changes)
