"""What loading data found: per-file counts and the reason for every skipped record."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from trainer.data.schema import Conversation

# Lineage records stay readable: a file with a million bad lines lists the first few.
SKIPPED_LISTED_PER_FILE = 50


@dataclass(frozen=True, slots=True)
class SkippedRecord:
    path: str
    line: int
    reason: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.reason}"


@dataclass(slots=True)
class FileSummary:
    path: str
    format: str | None = None
    records_read: int = 0
    records_skipped: int = 0
    skipped: list[SkippedRecord] = field(default_factory=list)

    @property
    def conversations(self) -> int:
        return self.records_read - self.records_skipped

    def skip(self, line: int, reason: str) -> None:
        self.records_skipped += 1
        self.skipped.append(SkippedRecord(self.path, line, reason))

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "format": self.format,
            "records_read": self.records_read,
            "records_skipped": self.records_skipped,
            "conversations": self.conversations,
            "skipped": [{"line": s.line, "reason": s.reason} for s in self.skipped[:SKIPPED_LISTED_PER_FILE]],
            "skipped_not_listed": max(0, len(self.skipped) - SKIPPED_LISTED_PER_FILE),
        }


@dataclass(slots=True)
class LoadSummary:
    files: list[FileSummary] = field(default_factory=list)

    @property
    def records_read(self) -> int:
        return sum(f.records_read for f in self.files)

    @property
    def records_skipped(self) -> int:
        return sum(f.records_skipped for f in self.files)

    @property
    def conversations(self) -> int:
        return self.records_read - self.records_skipped

    @property
    def skipped(self) -> list[SkippedRecord]:
        return [s for f in self.files for s in f.skipped]

    def to_dict(self) -> dict[str, Any]:
        return {
            "records_read": self.records_read,
            "records_skipped": self.records_skipped,
            "conversations": self.conversations,
            "files": [f.to_dict() for f in self.files],
        }


@dataclass(slots=True)
class LoadResult:
    conversations: list[Conversation]
    summary: LoadSummary
