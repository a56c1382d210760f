"""Errors the data readers raise."""

from __future__ import annotations


class DataFormatError(ValueError):
    """A data file cannot be used. The message names the file, and the line when one is at fault."""


class RecordSkipped(Exception):  # noqa: N818 - a signal between readers and the loader, not a failure
    """One record is unusable; the loader counts it with this reason and carries on."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason
