"""The base heads: one EAGLE-3 head per base model, trained on the built-in data, kept on S3.

SageMaker benchmarks every job against a "Base EAGLE": a head pre-trained on its own data.
Here the first job that needs one for a model trains it on the built-in datasets (or an
operator does, ahead of time, with ``eaglenest base-heads build``), and every later job on
the same model reuses it: as its Base EAGLE row, and as the head that jobs bringing their
own data fine-tune. The layout under the operator's prefix::

    <prefix>/<key>/manifest.json                     the commit marker: which build is the head
    <prefix>/<key>/builds/<build>/config.json        one directory per build
    <prefix>/<key>/builds/<build>/model.safetensors

The key is the model's content hash: its files' paths and ETags, as the distillation cache
keys a model. A build is uploaded whole before the manifest (one PUT) names it, with each
file's sha256; so two jobs building the same base head at once both succeed, the manifest
written last wins, and a reader never sees half a head. Like the distillation cache, the
store is the service's own, shared by every account's jobs, and is read and written with the
service's S3 identity through the store its callers pass in, never a job's role.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from core.head_files import HEAD_FILES
from core.job_errors import JobFailedError
from core.s3 import S3Location
from core.s3_store import S3Store
from trainer.eagle.reporting import TrainResult
from trainer.file_digest import sha256_of
from worker.artifacts import TrainingDataInput
from worker.s3_snapshot import S3Snapshot

MANIFEST = "manifest.json"
BUILDS = "builds/"
# Local paths of the machine that trained it: they mean nothing to the store's readers.
_LOCAL_FIELDS = ("model_dir", "data_paths", "out_dir", "distilled_paths", "init_head_dir")


def base_head_key(model: S3Snapshot) -> str:
    """The model's content hash: every file's path and ETag (weights, config, tokenizer)."""
    identity = sorted([entry.path, entry.object.etag] for entry in model.entries)
    return hashlib.sha256(json.dumps(identity).encode()).hexdigest()[:32]


@dataclass(frozen=True)
class BaseHead:
    """A committed base head: the build its manifest names, and each file's sha256."""

    key: str
    location: S3Location  # the build directory (<prefix>/<key>/builds/<build>/)
    sha256: dict[str, str]
    manifest: dict[str, Any]


class BaseHeadStore:
    def __init__(self, store: S3Store, root: S3Location) -> None:
        self.store = store
        self.root = root.as_directory

    def location(self, key: str) -> S3Location:
        return self.root.child(key + "/")

    def find(self, key: str) -> BaseHead | None:
        """The committed base head of ``key``; None when no build has been committed."""
        manifest_location = self.location(key).child(MANIFEST)
        if self.store.head(manifest_location) is None:
            return None
        return self._from_manifest(key, self.store.read_json(manifest_location))

    def snapshot(self, head: BaseHead) -> S3Snapshot:
        """The build's files as a snapshot (pinned to their ETags), for the local artifact cache."""
        objects = [obj for obj in self.store.list_objects(head.location) if obj.location.name in HEAD_FILES]
        found = {obj.location.name for obj in objects}
        if found != set(HEAD_FILES):
            missing = ", ".join(sorted(set(HEAD_FILES) - found))
            raise JobFailedError(f"Base head {head.location.uri} is incomplete: {missing} missing")
        return S3Snapshot.under_prefix(head.location.uri, head.location.prefix, objects)

    def verify(self, head: BaseHead, directory: Path) -> None:
        """Every file of a local copy has the sha256 the manifest committed."""
        for name, expected in head.sha256.items():
            if sha256_of(directory / name) != expected:
                raise JobFailedError(
                    f"Base head {head.location.child(name).uri} does not match the sha256 its manifest "
                    f"{self.location(head.key).child(MANIFEST).uri} committed"
                )

    def publish(self, key: str, head_dir: Path, *, build: str, manifest: dict[str, Any]) -> BaseHead:
        """Upload a build, then commit it as the key's base head (the manifest is written last)."""
        build_location = self.location(key).child(f"{BUILDS}{build}/")
        sha256 = {name: sha256_of(head_dir / name) for name in HEAD_FILES}
        for name in HEAD_FILES:
            self.store.upload_file(head_dir / name, build_location.child(name))
        document = {
            **manifest,
            "key": key,
            "build": build_location.uri,
            "sha256": sha256,
            "committed_at": datetime.now(UTC).isoformat(),
        }
        self.store.put_json(document, self.location(key).child(MANIFEST))
        return self._from_manifest(key, document)

    def entries(self) -> list[BaseHead | str]:
        """Every key under the prefix: its committed head, or the key alone when none is committed."""
        keys = sorted(
            {
                obj.location.key[len(self.root.key) :].split("/", 1)[0]
                for obj in self.store.list_objects(self.root)
                if "/" in obj.location.key[len(self.root.key) :]
            }
        )
        return [self.find(key) or key for key in keys]

    def delete(self, key: str) -> int:
        """Delete a key's manifest and builds: the next job on that model builds a new head."""
        return self.store.delete_prefix(self.location(key))

    def _from_manifest(self, key: str, document: Any) -> BaseHead:
        where = self.location(key).child(MANIFEST).uri
        if not isinstance(document, dict) or not isinstance(document.get("build"), str):
            raise JobFailedError(f"Base head manifest {where} names no build")
        sha256 = document.get("sha256")
        if not isinstance(sha256, dict) or set(sha256) != set(HEAD_FILES):
            raise JobFailedError(f"Base head manifest {where} has no sha256 for {', '.join(HEAD_FILES)}")
        location = S3Location.parse(document["build"], field=where).as_directory
        if not location.key.startswith(self.location(key).key):
            raise JobFailedError(f"Base head manifest {where} names a build outside its key: {location.uri}")
        return BaseHead(key=key, location=location, sha256=dict(sha256), manifest=document)


def base_head_manifest(
    *,
    model_uri: str,
    model: S3Snapshot,
    architecture: str,
    data: TrainingDataInput | None,
    result: TrainResult,
    built_by: str,
) -> dict[str, Any]:
    """What the store's manifest says about a build: the model, the data, the run."""
    return {
        "model_uri": model_uri,
        "model": model.to_lineage(),
        "architecture": architecture,
        "built_by": built_by,
        "builtin_datasets": [] if data is None else data.datasets,
        "data": None if data is None else data.snapshot.to_lineage(),
        "hyperparameters": {k: v for k, v in result.hyperparameters.items() if k not in _LOCAL_FIELDS},
        "training": {
            "steps": result.training.steps,
            "stop_reason": result.training.stop_reason,
            "self_instruct": result.data.self_instruct,
        },
    }
