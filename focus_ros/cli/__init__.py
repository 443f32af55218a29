"""The ``focus-ros`` command line: one subcommand per module of this package.

Each subcommand module (``info``, ``estimate``, ``simulate``, ``replay``, ``evaluate``,
``landscape``, ``depth``, ``evaluate_depth``, ``flow``, ``evaluate_flow``, ``compile``) defines
``add_arguments(parser)`` and ``run(args) -> int``, and its module docstring's first line is
the subcommand's help. Helpers shared by several subcommands live in ``_options`` (the
estimator options), ``_sources`` (sequences and ground truth for the evaluations) and
``_output`` (output files written whole or not at all).
A new subcommand is one module here and one row in :data:`SUBCOMMANDS`.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

__all__ = ["SUBCOMMANDS", "UserError", "build_parser", "main"]

#: subcommand name -> module in focus_ros.cli
SUBCOMMANDS = {
    "info": "info",
    "estimate": "estimate",
    "simulate": "simulate",
    "replay": "replay",
    "evaluate": "evaluate",
    "landscape": "landscape",
    "evaluate-depth": "evaluate_depth",
    "depth": "depth",
    "flow": "flow",
    "evaluate-flow": "evaluate_flow",
    "compile": "compile",
}


class UserError(Exception):
    """An error caused by the user's input: printed as one line, without a traceback."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="focus-ros", description="Motion compensation for event cameras with focus losses.")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, module_name in SUBCOMMANDS.items():
        module = importlib.import_module(f"focus_ros.cli.{module_name}")
        summary = (module.__doc__ or "").strip().splitlines()[0] if module.__doc__ else ""
        sub = subparsers.add_parser(name, help=summary, description=module.__doc__)
        module.add_arguments(sub)
        sub.set_defaults(run=module.run)
    return parser


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "run", None):
        parser.print_help()
        return 2
    try:
        return int(args.run(args) or 0)
    except (UserError, FileNotFoundError, ValueError) as error:
        if os.environ.get("FOCUS_ROS_DEBUG"):
            raise
        print(f"focus-ros {args.command}: error: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"focus-ros {args.command}: interrupted", file=sys.stderr)
        return 130
