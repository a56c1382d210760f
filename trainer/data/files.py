"""Finding data files and reading their records, with the line each record starts on.

A file is JSONL (one object per line), a JSON array of objects, or a single JSON
object; any of them may be gzip-compressed. Compression is detected from the gzip
magic bytes rather than the name, so a mis-named file still reads.
"""

from __future__ import annotations

import gzip
import json
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainer.data.errors import DataFormatError

DATA_FILE_SUFFIXES = (".jsonl", ".json", ".jsonl.gz", ".json.gz")
_GZIP_MAGIC = b"\x1f\x8b"
# Metadata that sits next to data (prepare-data writes a catalog.json beside its JSONL files).
NOT_DATA_FILE_NAMES = frozenset({"catalog.json"})


@dataclass(frozen=True, slots=True)
class RawRecord:
    """One record as read: the parsed JSON value, or why it could not be parsed."""

    line: int
    value: Any = None
    error: str | None = None


def is_data_file(path: Path) -> bool:
    name = path.name.lower()
    return name.endswith(DATA_FILE_SUFFIXES) and not name.startswith(".") and name not in NOT_DATA_FILE_NAMES


def expand_data_paths(paths: Sequence[Path]) -> list[Path]:
    """Files stay as given; a directory becomes its data files (recursively, sorted).

    Recursion matters for SageMaker data capture, which stores lines under
    ``<endpoint>/<variant>/yyyy/mm/dd/hh/``.
    """
    if not paths:
        raise DataFormatError("no data paths given")
    expanded: list[Path] = []
    for given in paths:
        path = Path(given)
        if path.is_dir():
            found = sorted(p for p in path.rglob("*") if p.is_file() and is_data_file(p))
            if not found:
                suffixes = ", ".join(DATA_FILE_SUFFIXES)
                raise DataFormatError(f"{path}: directory holds no data files ({suffixes})")
            expanded.extend(found)
        elif path.is_file():
            expanded.append(path)
        else:
            raise DataFormatError(f"{path}: no such file or directory")
    return expanded


def read_text(path: Path) -> str:
    raw = path.read_bytes()
    if raw.startswith(_GZIP_MAGIC):
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError, zlib.error) as exc:
            raise DataFormatError(f"{path}: corrupt gzip data ({exc})") from exc
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise DataFormatError(f"{path}:{line}: not UTF-8 text ({exc.reason} at byte {exc.start})") from exc


def iter_records(path: Path) -> Iterator[RawRecord]:
    """Every record of the file in order. Bad JSONL lines come back with an error, not raised."""
    text = read_text(path)
    stripped = text.lstrip()
    if stripped.startswith("["):
        yield from _iter_json_array(path, text)
        return
    if stripped.startswith("{") and "\n" in stripped.rstrip():
        # A pretty-printed single object spans many lines; JSONL never does.
        try:
            value = json.loads(text)
        except json.JSONDecodeError:
            pass
        else:
            yield RawRecord(line=_line_of(text, len(text) - len(stripped)), value=value)
            return
    yield from _iter_jsonl(text)


def _iter_jsonl(text: str) -> Iterator[RawRecord]:
    # split("\n"), not splitlines(): JSON strings may legally hold U+2028 and friends,
    # which splitlines() would treat as line breaks and so corrupt the record.
    for number, raw_line in enumerate(text.split("\n"), start=1):
        line = raw_line.strip()
        if not line:
            continue
        try:
            yield RawRecord(line=number, value=json.loads(line))
        except json.JSONDecodeError as exc:
            yield RawRecord(line=number, error=f"invalid JSON: {exc.msg} (column {exc.colno})")


def _iter_json_array(path: Path, text: str) -> Iterator[RawRecord]:
    """Decode the array element by element so each record knows the line it starts on."""
    decoder = json.JSONDecoder()
    position = _skip_space(text, text.index("[") + 1)
    if position < len(text) and text[position] == "]":
        return
    while True:
        try:
            value, end = decoder.raw_decode(text, position)
        except json.JSONDecodeError as exc:
            raise DataFormatError(f"{path}:{exc.lineno}: invalid JSON array: {exc.msg}") from exc
        yield RawRecord(line=_line_of(text, position), value=value)
        position = _skip_space(text, end)
        if position < len(text) and text[position] == ",":
            position = _skip_space(text, position + 1)
            continue
        if position < len(text) and text[position] == "]":
            trailing = _skip_space(text, position + 1)
            if trailing != len(text):
                line = _line_of(text, trailing)
                raise DataFormatError(f"{path}:{line}: unexpected text after the end of the JSON array")
            return
        line = _line_of(text, min(position, len(text) - 1))
        raise DataFormatError(f"{path}:{line}: invalid JSON array: expected ',' or ']' after an element")


def _skip_space(text: str, position: int) -> int:
    while position < len(text) and text[position] in " \t\r\n":
        position += 1
    return position


def _line_of(text: str, position: int) -> int:
    return text.count("\n", 0, position) + 1
