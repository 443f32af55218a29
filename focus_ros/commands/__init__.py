"""Subcommands of the ``focus-ros`` command line, one module each.

Each module defines ``add_arguments(parser)`` and ``run(args) -> int`` and a one-line
module docstring used as the subcommand's help.
"""
