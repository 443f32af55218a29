"""Logging helpers shared by the nodes."""

from __future__ import annotations


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
