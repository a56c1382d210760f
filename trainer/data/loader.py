"""Load conversations from data files in any supported format, reporting what was skipped."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from trainer.data.errors import DataFormatError, RecordSkipped
from trainer.data.files import RawRecord, expand_data_paths, iter_records
from trainer.data.formats import SIGNATURES, RecordFormat, format_of
from trainer.data.formats.common import json_type
from trainer.data.schema import Conversation
from trainer.data.summary import FileSummary, LoadResult, LoadSummary


def load_conversations(paths: Sequence[Path], *, max_skip_fraction: float = 1.0) -> LoadResult:
    """Read every record of every file (directories expand to their data files).

    The format is detected per file from its first usable record; later records of
    another format are skipped with a reason. Raises DataFormatError when a file has
    no usable record, or when more than ``max_skip_fraction`` of all records were skipped.
    """
    if not 0.0 <= max_skip_fraction <= 1.0:
        raise ValueError(f"max_skip_fraction must be between 0 and 1, got {max_skip_fraction}")
    summary = LoadSummary()
    conversations: list[Conversation] = []
    for path in expand_data_paths(paths):
        file_summary, file_conversations = _load_file(path)
        summary.files.append(file_summary)
        conversations.extend(file_conversations)
    _check_skip_fraction(summary, max_skip_fraction)
    return LoadResult(conversations=conversations, summary=summary)


def _load_file(path: Path) -> tuple[FileSummary, list[Conversation]]:
    summary = FileSummary(path=str(path))
    conversations: list[Conversation] = []
    file_format: RecordFormat | None = None
    detected_at = 0
    for record in iter_records(path):
        summary.records_read += 1
        try:
            record_format = _format_of(record, file_format, detected_at)
            messages = record_format.parse(record.value)
        except RecordSkipped as skip:
            summary.skip(record.line, skip.reason)
            continue
        if file_format is None:
            file_format, detected_at = record_format, record.line
            summary.format = record_format.name
        conversations.append(Conversation(messages=messages, source=f"{path}:{record.line}"))
    if not conversations:
        raise DataFormatError(_no_usable_record_message(summary))
    return summary, conversations


def _format_of(record: RawRecord, file_format: RecordFormat | None, detected_at: int) -> RecordFormat:
    if record.error is not None:
        raise RecordSkipped(record.error)
    if not isinstance(record.value, Mapping):
        raise RecordSkipped(f"record is a JSON {json_type(record.value)}, expected an object")
    record_format = format_of(record.value)
    if record_format is None:
        keys = ", ".join(sorted(record.value)) or "none"
        raise RecordSkipped(f"unknown record format: expected {SIGNATURES} (keys found: {keys})")
    if file_format is not None and record_format is not file_format:
        raise RecordSkipped(
            f"record is {record_format.name} but this file is {file_format.name} "
            f"(detected at line {detected_at})"
        )
    return record_format


def _no_usable_record_message(summary: FileSummary) -> str:
    if summary.records_read == 0:
        return f"{summary.path}: no records (the file is empty)"
    first = summary.skipped[0]
    return (
        f"{summary.path}: no usable record ({summary.records_read} read, all skipped); "
        f"first at line {first.line}: {first.reason}"
    )


def _check_skip_fraction(summary: LoadSummary, max_skip_fraction: float) -> None:
    if summary.records_read == 0 or summary.records_skipped == 0:
        return
    fraction = summary.records_skipped / summary.records_read
    if fraction > max_skip_fraction:
        first = summary.skipped[0]
        raise DataFormatError(
            f"{summary.records_skipped} of {summary.records_read} records skipped "
            f"({fraction:.1%} > max_skip_fraction {max_skip_fraction:.1%}); "
            f"first: {first.path}:{first.line}: {first.reason}"
        )
