"""A set of S3 objects pinned to their ETags: what a job read, and the key of its local cache."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from core.job_errors import JobFailedError
from core.s3_store import S3Object


@dataclass(frozen=True)
class SnapshotEntry:
    """One object and the relative path it gets in a local copy of the snapshot."""

    path: str
    object: S3Object


@dataclass(frozen=True)
class S3Snapshot:
    """Objects as they were when the job looked (key, ETag, size); ``source`` is the URI asked for."""

    source: str
    entries: tuple[SnapshotEntry, ...]

    @classmethod
    def under_prefix(cls, source: str, prefix_key: str, objects: list[S3Object]) -> S3Snapshot:
        """Objects below one prefix, each at its key relative to that prefix."""
        entries = []
        for obj in objects:
            relative = obj.location.key[len(prefix_key) :] if prefix_key else obj.location.key
            entries.append(SnapshotEntry(safe_relative_path(relative, uri=obj.uri), obj))
        return cls(source=source, entries=tuple(entries))

    @property
    def total_bytes(self) -> int:
        return sum(entry.object.size for entry in self.entries)

    @property
    def digest(self) -> str:
        """Changes whenever any object's content (ETag) or the set of objects changes."""
        listing = [
            [e.path, e.object.location.bucket, e.object.location.key, e.object.etag] for e in self.entries
        ]
        return hashlib.sha256(json.dumps(listing, sort_keys=True).encode()).hexdigest()[:32]

    def entry(self, path: str) -> SnapshotEntry | None:
        return next((e for e in self.entries if e.path == path), None)

    def paths(self) -> set[str]:
        return {e.path for e in self.entries}

    def to_lineage(self) -> dict[str, Any]:
        return {
            "uri": self.source,
            "objects": [
                {"uri": e.object.uri, "etag": e.object.etag, "size": e.object.size} for e in self.entries
            ],
        }


def safe_relative_path(relative: str, *, uri: str) -> str:
    """A key suffix usable as a path inside a cache directory: no '..', '.', empty or absolute
    segments (two such keys could also land on one file)."""
    path = PurePosixPath(relative)
    if not relative or path.is_absolute() or any(part in {"..", ".", ""} for part in relative.split("/")):
        raise JobFailedError(f"S3 object {uri} has a key that cannot be stored as a file: {relative!r}")
    return str(path)
