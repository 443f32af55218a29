"""Logging helpers shared by the nodes."""

from __future__ import annotations

import re

#: a number in a fault's text: decimal, or hexadecimal with at least one digit (byte dumps, ids)
_NUMBER = re.compile(r"\b(?:0x)?[0-9a-fA-F]*[0-9][0-9a-fA-F]*\b")


def fault_kind(error: BaseException) -> str:
    """The kind of fault an exception stands for, for "report once per kind": its ``kind``
    attribute when it has one (:class:`focus_ros.codecs.EventDecodeError`), else its class
    and its text with every number (decimal or hex) replaced by ``#``, so that the same
    fault at another offset or with other bytes is the same kind."""
    kind = getattr(error, "kind", None)
    if kind:
        return f"{type(error).__name__}:{kind}"
    return f"{type(error).__name__}:{_NUMBER.sub('#', str(error))}"


class WarnOnce:
    """Logs a warning once per kind of fault (``kind``: a short stable key).

    logger: anything with ``warning(text)`` (an rclpy node's ``get_logger()``).
    """

    def __init__(self, logger):
        self._logger = logger
        self._warned: set[str] = set()

    def __call__(self, kind: str, text: str) -> None:
        if kind not in self._warned:
            self._warned.add(kind)
            self._logger.warning(text + " (reported once)")
