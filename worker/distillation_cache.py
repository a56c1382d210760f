"""The distillation cache: conversations a target distilled, kept on S3 for every later job.

Distillation (the target writing replies) is nearly all of a job's cost, and its result
depends only on the target's weights, the source data and the generation settings. So the
records a job distils (``regenerated.jsonl``, see ``trainer.eagle.distilled``) are kept under
a key made of exactly those, and the next job with the same key trains on them and spends
its budget on conversations not distilled yet:

    <prefix>/<key>/manifest.json          what the key stands for: model, data, settings
    <prefix>/<key>/parts/<part>.jsonl     one per job that distilled anything, its new records

Safe under concurrent jobs without locks: a job only ever adds its own part (named after
the job, so a redelivered job rewrites its own and no other), and the manifest is written
once, when absent (two first jobs racing write the same description of the same key). A
reader takes the union of the parts; the trainer keeps each source conversation once.

The cache is the service's own, shared by every account's jobs: it is read and written with
the service's S3 identity, through the store its callers pass in, never a job's role.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from core.s3 import S3Location
from core.s3_store import S3Object, S3Store, s3_errors
from trainer.config import TrainConfig
from trainer.eagle.distilled import generation_settings
from worker.s3_snapshot import S3Snapshot

MANIFEST = "manifest.json"
PARTS = "parts/"
PART_SUFFIX = ".jsonl"
# S3 user metadata on each part: its record count, so a listing needs no part's body.
RECORDS_METADATA = "records"


def cache_key(model: S3Snapshot, data: S3Snapshot, config: TrainConfig) -> tuple[str, dict[str, Any]]:
    """The key and what it stands for.

    The model by each file's path and ETag (weights, config and tokenizer with its chat
    template); the data by its files' ETags alone (the same contents under another name or
    bucket are the same conversations); and the settings that change what is generated.
    """
    identity = {
        "model": sorted([entry.path, entry.object.etag] for entry in model.entries),
        "data": sorted(entry.object.etag for entry in data.entries),
        "generation": generation_settings(config),
    }
    digest = hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:32]
    return digest, identity


class JobIdentity(Protocol):
    """What names a job's part (a JobSpec has it)."""

    @property
    def name(self) -> str: ...
    @property
    def arn(self) -> str: ...
    @property
    def created_at(self) -> datetime: ...


def part_name(job: JobIdentity) -> str:
    """The job's own part: its name for people, plus an id unique to this job (names are reused)."""
    unique = uuid.uuid5(uuid.NAMESPACE_URL, f"{job.arn}@{job.created_at.isoformat()}")
    return f"{job.name}-{unique}{PART_SUFFIX}"


@dataclass(frozen=True)
class CachePart:
    object: S3Object
    records: int | None  # None: written without the metadata

    @property
    def name(self) -> str:
        return self.object.location.name


@dataclass(frozen=True)
class CacheEntry:
    key: str
    location: S3Location  # <prefix>/<key>/
    manifest: dict[str, Any] | None
    parts: list[CachePart]

    @property
    def records(self) -> int:
        """Records in all parts (a conversation two racing jobs both distilled counts twice)."""
        return sum(part.records or 0 for part in self.parts)

    @property
    def size(self) -> int:
        return sum(part.object.size for part in self.parts)


class DistillationCache:
    def __init__(self, store: S3Store, root: S3Location) -> None:
        self.store = store
        self.root = root.as_directory

    def location(self, key: str) -> S3Location:
        return self.root.child(key + "/")

    def part_location(self, key: str, name: str) -> S3Location:
        return self.location(key).child(PARTS + name)

    def parts(self, key: str) -> list[CachePart]:
        objects = self.store.list_objects(self.location(key).child(PARTS))
        return [CachePart(obj, self._records(obj.location)) for obj in objects]

    def download(self, parts: Sequence[CachePart], directory: Path) -> list[Path]:
        """The parts as local files named as on S3 (the trainer reports reuse by file name)."""
        shutil.rmtree(directory, ignore_errors=True)
        paths = []
        for part in parts:
            path = directory / part.name
            self.store.download(part.object.location, path)
            paths.append(path)
        return paths

    def add_part(
        self, key: str, path: Path, *, name: str, records: int, manifest: dict[str, Any]
    ) -> S3Location:
        """Upload a job's new records as its own part; the manifest too if the key has none."""
        manifest_location = self.location(key).child(MANIFEST)
        if self.store.head(manifest_location) is None:
            self.store.put_json(manifest, manifest_location)
        location = self.part_location(key, name)
        # One PUT (a part is a few MB): the object appears whole or not at all.
        with s3_errors(action="uploading", uri=location.uri):
            self.store.client.put_object(
                Bucket=location.bucket,
                Key=location.key,
                Body=path.read_bytes(),
                Metadata={RECORDS_METADATA: str(records)},
                ContentType="application/x-ndjson",
            )
        return location

    def entries(self) -> list[CacheEntry]:
        """Every key under the prefix, with its manifest and parts."""
        keys = sorted(
            {
                obj.location.key[len(self.root.key) :].split("/", 1)[0]
                for obj in self.store.list_objects(self.root)
                if "/" in obj.location.key[len(self.root.key) :]
            }
        )
        return [self.entry(key) for key in keys]

    def entry(self, key: str) -> CacheEntry:
        manifest_location = self.location(key).child(MANIFEST)
        manifest = self.store.read_json(manifest_location) if self.store.head(manifest_location) else None
        return CacheEntry(key, self.location(key), manifest, self.parts(key))

    def delete(self, key: str) -> int:
        """Delete an entry (manifest and parts); how many objects there were."""
        return self.store.delete_prefix(self.location(key))

    def _records(self, location: S3Location) -> int | None:
        with s3_errors(action="reading", uri=location.uri):
            metadata = self.store.client.head_object(Bucket=location.bucket, Key=location.key)["Metadata"]
        value = metadata.get(RECORDS_METADATA)
        return int(value) if isinstance(value, str) and value.isdigit() else None


@dataclass
class JobCacheUse:
    """One job's use of the cache: the parts it reads before training, the part it adds after."""

    cache: DistillationCache
    key: str
    manifest: dict[str, Any]
    part: str  # this job's own part name
    reused_parts: list[CachePart]

    @classmethod
    def open(
        cls,
        store: S3Store,
        root: S3Location,
        *,
        job: JobIdentity,
        model: S3Snapshot,
        model_uri: str,
        data: S3Snapshot,
        config: TrainConfig,
    ) -> JobCacheUse:
        cache = DistillationCache(store, root)
        key, identity = cache_key(model, data, config)
        manifest = {
            "key": key,
            **identity,
            "model_uri": model_uri,
            "data_uri": data.source,
            "created_by": job.arn,
            "created_at": datetime.now(UTC).isoformat(),
        }
        own = part_name(job)
        # A redelivered job's own part (uploaded before it was interrupted) is not reused data.
        parts = [part for part in cache.parts(key) if part.name != own]
        return cls(cache, key, manifest, own, parts)

    def download(self, directory: Path) -> list[Path]:
        return self.cache.download(self.reused_parts, directory)

    def publish(self, distilled: Path, data_stats: dict[str, Any]) -> dict[str, Any]:
        """Add what the job distilled as its part; what lineage.json says about the cache."""
        new = _count_lines(distilled) if distilled.is_file() else 0
        part = None
        if new:
            part = self.cache.add_part(
                self.key, distilled, name=self.part, records=new, manifest=self.manifest
            )
        by_file: dict[str, int] = data_stats.get("distilled_reused_by_file") or {}
        return {
            "uri": self.cache.location(self.key).uri,
            "key": self.key,
            "reused": int(data_stats.get("distilled_reused") or 0),
            "reused_from": [
                {"uri": self.cache.part_location(self.key, name).uri, "records": count}
                for name, count in sorted(by_file.items())
            ],
            # Records of the cache distilled from conversations this job holds out: never trained on.
            "reused_held_out": int(data_stats.get("distilled_reused_heldout") or 0),
            "new": new,
            "new_part": None if part is None else part.uri,
        }


def _count_lines(path: Path) -> int:
    with path.open(encoding="utf-8") as handle:
        return sum(1 for line in handle if line.strip())
