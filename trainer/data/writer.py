"""Write JSONL files atomically: ShareGPT conversations (the form we store prepared and
regenerated data in) and any other rows a run keeps on disk."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from trainer.data.formats.sharegpt import to_record
from trainer.data.schema import Conversation


def write_conversations_jsonl(conversations: Iterable[Conversation], path: Path) -> str:
    """Write one ShareGPT record per line (with the source as ``id``); return the file's sha256."""
    return write_jsonl(path, ({"id": c.source, **to_record(c)} for c in conversations))


def write_jsonl(path: Path, rows: Iterable[dict[str, Any]]) -> str:
    """Write one JSON object per line; return the file's sha256.

    The file appears complete or not at all: it is written next to its final name and
    renamed into place, so a crash never leaves a half-written file a later run would read.
    """
    digest = hashlib.sha256()
    partial = path.with_name(f".{path.name}.partial")
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        with partial.open("w", encoding="utf-8", newline="\n") as handle:
            for row in rows:
                line = json.dumps(row, ensure_ascii=False) + "\n"
                handle.write(line)
                digest.update(line.encode("utf-8"))
        partial.replace(path)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    return digest.hexdigest()
