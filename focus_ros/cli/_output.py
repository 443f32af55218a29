"""Output files of the subcommands: written whole or not at all."""

from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def replaced_on_success(output: Path):
    """A temporary path beside ``output`` to write to (``.NAME.partial``); renamed to ``output``
    when the block succeeds, removed when it fails: a failed run leaves neither a header-only
    CSV nor a clobbered earlier one."""
    output = Path(output)
    partial = output.with_name(f".{output.name}.partial")
    try:
        yield partial
        os.replace(partial, output)
    finally:
        partial.unlink(missing_ok=True)
