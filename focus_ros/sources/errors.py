"""Errors raised by the dataset and bag readers (one line: which file, where, what)."""

from __future__ import annotations


class EventFileError(ValueError):
    """A text file of the Event Camera Dataset layout is malformed (names file and line)."""


class BagError(ValueError):
    """A bag is missing, corrupt, truncated, or lacks a requested topic (names the file)."""
