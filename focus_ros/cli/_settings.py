"""Command-line options from declared settings (:mod:`focus_ros.settings`): one option per setting,
its type and range checked by argparse, its default and unit in ``--help``."""

from __future__ import annotations

import argparse
from typing import Iterable

from focus_ros.settings import Setting, check_value, declared, settings_from_values


def _typed(item: Setting):
    """argparse's ``type`` for ``item``: converts and checks the range (argparse's one-line error)."""
    convert = item.kind

    def parse(text: str):
        try:
            value = convert(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a{'n' if convert is int else ''} {convert.__name__}: {text!r}")
        problem = check_value(item, value, item.option)
        if problem:
            raise argparse.ArgumentTypeError(problem)
        return value

    parse.__name__ = convert.__name__  # argparse names the type in its messages
    return parse


def _default_text(item: Setting, default) -> str:
    if default is None:
        return "unset"
    if isinstance(default, float):
        return f"{default:g}"
    return str(default)


def add_setting_options(parser, cls, *, exclude: Iterable[str] = (), defaults: dict | None = None) -> None:
    """An option for every declared setting of ``cls`` that has one (not those named in
    ``exclude``), its value stored under the setting's name; ``defaults``: other defaults than
    the declaration's (by name)."""
    exclude, defaults = set(exclude), defaults or {}
    for item in declared(cls):
        if item.option is None or item.name in exclude:
            continue
        default = defaults.get(item.name, item.default)
        text = item.description(parameter=False).replace("%", "%%")
        if item.kind is bool:
            if item.declaration.negated_option:
                parser.add_argument(item.option, dest=item.name, action="store_false", default=default,
                                    help=f"turns off: {text}")
            elif not default:
                parser.add_argument(item.option, dest=item.name, action="store_true", default=default, help=text)
            else:
                parser.add_argument(item.option, dest=item.name, action=argparse.BooleanOptionalAction,
                                    default=default, help=text)
            continue
        if item.kind is list:
            parser.add_argument(item.option, dest=item.name, type=item.members, nargs="+", default=default,
                                help=f"{text} (default {' '.join(map(str, default)) or 'none'})")
            continue
        options = dict(dest=item.name, default=default, help=f"{text} (default {_default_text(item, default)})")
        if item.declaration.choices:
            options["choices"] = item.declaration.choices
        else:
            options["type"] = _typed(item)
            options["metavar"] = item.declaration.unit.upper().replace("/", "_") if item.declaration.unit and \
                item.kind is not str else None
        parser.add_argument(item.option, **{key: value for key, value in options.items() if value is not None})


def settings_from_options(cls, args, base=None, *, exclude: Iterable[str] = ()):
    """``base`` (default ``cls()``) with the values of the options :func:`add_setting_options`
    added; ValueError naming a value the class refuses."""
    exclude = set(exclude)
    values = {item.name: _as_held(item, getattr(args, item.name)) for item in declared(cls)
              if item.option is not None and item.name not in exclude and hasattr(args, item.name)}
    return settings_from_values(cls, values, base, name_of=lambda item: item.option)


def _as_held(item: Setting, value):
    """An option's value as the setting holds it: argparse gives a list where it holds a tuple."""
    return tuple(value) if item.kind is list and value is not None else value
