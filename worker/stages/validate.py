"""Stage 'validate': the job's inputs exist on S3 and are what training needs.

Checked before anything heavy runs, so a wrong URI or an unsupported model fails in
seconds with a FailureReason naming the missing or bad file, not later inside training:

- the base model: config.json with a supported architecture, tokenizer files, and
  weights (model.safetensors, or model.safetensors.index.json with every shard present),
  each weight file's safetensors header read (a ranged GET) and checked against its size;
- files SageMaker lists but real models legitimately lack (special_tokens_map.json,
  generation_config.json, vocab.json next to tokenizer.json) only add a warning: to the
  job's events and to lineage.json (``source_model.warnings``);
- a model.tar.gz (ModelDataSource S3Object + Gzip) is downloaded and unpacked into the
  model cache first (refusing unsafe members), and the same checks run on its files;
- an ``eagle_model`` channel: a head that fits this target (downloaded and checked);
- OptimizationEnvironment's EAGLE_* knobs and the output location.
"""

from __future__ import annotations

import json
from pathlib import Path, PurePosixPath
from typing import Any, Protocol

from core.job_errors import JobFailedError
from core.model_source import ModelData, eagle_head_location, model_location
from core.s3 import S3Location
from core.s3_store import S3Store, s3_errors
from engine.capture import UnsupportedArchitectureError, check_supported
from engine.heads.head_format import InvalidHeadError, draft_variant
from engine.heads.validate import validate_head
from trainer.file_digest import sha256_of
from worker.artifacts import BaseModelInput, HeadInput
from worker.context import JobContext
from worker.s3_snapshot import S3Snapshot, SnapshotEntry, safe_relative_path
from worker.safetensors_check import SafetensorsError, check_safetensors
from worker.target_config import target_config_from_dict

MAX_CONFIG_BYTES = 1_000_000
CONFIG_FILE = "config.json"
TOKENIZER_CONFIG = "tokenizer_config.json"
# Any one of these holds the vocabulary (fast tokenizer, SentencePiece, or BPE vocab + merges).
TOKENIZER_VOCABULARIES = ("tokenizer.json", "tokenizer.model", "vocab.json")
WEIGHTS_FILE = "model.safetensors"
WEIGHTS_INDEX = "model.safetensors.index.json"
HEAD_REQUIRED_FILES = ("config.json", "model.safetensors")
# Files SageMaker's model checks list that a working model may lack: a warning, not a failure.
OPTIONAL_FILES = {
    "special_tokens_map.json": "recent tokenizers keep the special tokens in tokenizer_config.json",
    "generation_config.json": "generation falls back to the defaults in config.json",
}
VOCAB_FILE = "vocab.json"


class ModelFiles(Protocol):
    """A model directory's files: listed on S3, or unpacked from a model.tar.gz."""

    def paths(self) -> set[str]: ...

    def size(self, name: str) -> int: ...

    def describe(self, name: str) -> str:
        """How a FailureReason names the file (its S3 URI, or the archive and member)."""
        ...

    def read_bytes(self, name: str) -> bytes: ...

    def read_range(self, name: str, start: int, length: int) -> bytes: ...


class S3ModelFiles:
    def __init__(self, store: S3Store, location: S3Location, snapshot: S3Snapshot) -> None:
        self.store = store
        self.location = location
        self.snapshot = snapshot

    def _entry(self, name: str) -> SnapshotEntry:
        entry = self.snapshot.entry(name)
        if entry is None:
            raise JobFailedError(f"Model file not found: {self.describe(name)}")
        return entry

    def paths(self) -> set[str]:
        return self.snapshot.paths()

    def size(self, name: str) -> int:
        return self._entry(name).object.size

    def describe(self, name: str) -> str:
        return self.location.child(name).uri

    def read_bytes(self, name: str) -> bytes:
        return self.store.read_bytes(self._entry(name).object.location)

    def read_range(self, name: str, start: int, length: int) -> bytes:
        if length <= 0:
            return b""
        location = self._entry(name).object.location
        with s3_errors(action="reading", uri=location.uri):
            answer = self.store.client.get_object(
                Bucket=location.bucket, Key=location.key, Range=f"bytes={start}-{start + length - 1}"
            )
            body: bytes = answer["Body"].read()
        return body


class LocalModelFiles:
    """Files unpacked from ``archive_uri`` into ``directory``."""

    def __init__(self, directory: Path, archive_uri: str) -> None:
        self.directory = directory
        self.archive_uri = archive_uri

    def paths(self) -> set[str]:
        return {
            path.relative_to(self.directory).as_posix()
            for path in self.directory.rglob("*")
            if path.is_file() and not path.is_symlink()
        }

    def _path(self, name: str) -> Path:
        path = self.directory / safe_relative_path(name, uri=self.describe(name))
        if not path.is_file():
            raise JobFailedError(f"Model file not found: {self.describe(name)}")
        return path

    def size(self, name: str) -> int:
        return self._path(name).stat().st_size

    def describe(self, name: str) -> str:
        return f"{name} in {self.archive_uri}"

    def read_bytes(self, name: str) -> bytes:
        return self._path(name).read_bytes()

    def read_range(self, name: str, start: int, length: int) -> bytes:
        with self._path(name).open("rb") as handle:
            handle.seek(start)
            return handle.read(length)


def validate_artifacts(ctx: JobContext) -> None:
    ctx.knobs  # noqa: B018 - parse EAGLE_* now: a bad knob fails before any download
    layout = ctx.layout
    source = model_location(ctx.job.model_source, ctx.job.source_model_container)
    files: ModelFiles
    local_dir: Path | None = None
    if source.compressed:
        snapshot = _archive_snapshot(ctx, source, what="Model archive")
        megabytes = snapshot.total_bytes / 1e6
        ctx.report(
            f"Downloading and unpacking the model archive {source.uri} ({megabytes:.0f} MB)", fraction=0.05
        )
        local_dir = ctx.cache.fetch_archive(
            ctx.s3, snapshot, kind="models", max_unpacked_bytes=ctx.settings.max_model_archive_bytes
        )
        files = LocalModelFiles(local_dir, source.uri)
    else:
        location = source.location.as_directory
        ctx.report(f"Listing the base model under {location.uri}", fraction=0.05)
        snapshot = S3Snapshot.under_prefix(location.uri, location.prefix, ctx.s3.list_objects(location))
        files = S3ModelFiles(ctx.s3, location, snapshot)
    config = _read_model_config(files)
    architecture = _check_architecture(config, files.describe(CONFIG_FILE))
    _check_tokenizer(files)
    ctx.check()
    weights = _check_weights(files)
    for name in weights:
        ctx.check()
        _check_safetensors(files, name)
    warnings = optional_file_warnings(files)
    for warning in warnings:  # job events: the dashboard and DescribeOptimizationJob's history show them
        ctx.store.record_event(ctx.job.id, stage=ctx.stage, message=f"Warning: {warning}")
    base_location = source.location if source.compressed else source.location.as_directory
    ctx.artifacts.model = BaseModelInput(
        location=base_location,
        snapshot=snapshot,
        config=config,
        architecture=architecture,
        local_dir=local_dir,
        compressed=source.compressed,
        warnings=warnings,
    )
    ctx.report(f"Base model {source.uri} ({architecture}) is complete", fraction=0.5)

    head_source = eagle_head_location(ctx.job.source_model_container)
    if head_source is not None:
        ctx.check()
        ctx.artifacts.base_head = _validate_head(ctx, head_source, config)
        ctx.report(f"EAGLE head {head_source.uri} fits the base model", fraction=0.9)

    lineage = ctx.s3.head(layout.lineage)
    if lineage is not None:
        document = ctx.s3.read_json(layout.lineage)
        if isinstance(document, dict) and document.get("job", {}).get("arn") == ctx.job.arn:
            ctx.artifacts.published_lineage = document
            ctx.report(f"This job's outputs are already published at {layout.final.uri}", fraction=1.0)


def _archive_snapshot(ctx: JobContext, source: ModelData, *, what: str) -> S3Snapshot:
    """The one object of a model.tar.gz, pinned to its ETag (the key of its unpacked cache entry)."""
    obj = ctx.s3.head(source.location)
    if obj is None:
        raise JobFailedError(f"{what} not found: {source.uri}")
    name = PurePosixPath(source.location.key).name
    return S3Snapshot(source=source.uri, entries=(SnapshotEntry(safe_relative_path(name, uri=obj.uri), obj),))


def _read_json(files: ModelFiles, name: str) -> Any:
    try:
        return json.loads(files.read_bytes(name))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise JobFailedError(f"{files.describe(name)} is not valid JSON: {error}") from error


def _read_model_config(files: ModelFiles) -> dict[str, Any]:
    where = files.describe(CONFIG_FILE)
    if CONFIG_FILE not in files.paths():
        raise JobFailedError(f"Model file not found: {where}")
    size = files.size(CONFIG_FILE)
    if size > MAX_CONFIG_BYTES:
        raise JobFailedError(f"{where} is {size} bytes; a model config is far smaller")
    document = _read_json(files, CONFIG_FILE)
    if not isinstance(document, dict):
        raise JobFailedError(f"{where} must hold a JSON object")
    if "model_type" not in document and "architectures" not in document:
        raise JobFailedError(f"{where} is not a Hugging Face model config (no model_type or architectures)")
    return document


def _check_architecture(config: dict[str, Any], where: str) -> str:
    target_config = target_config_from_dict(config)
    try:
        architecture = check_supported(target_config)
    except UnsupportedArchitectureError as error:
        raise JobFailedError(f"{where}: {error}") from error
    return architecture


def _check_tokenizer(files: ModelFiles) -> None:
    present = files.paths()
    if TOKENIZER_CONFIG not in present:
        raise JobFailedError(f"Tokenizer file not found: {files.describe(TOKENIZER_CONFIG)}")
    if not any(name in present for name in TOKENIZER_VOCABULARIES):
        raise JobFailedError(
            f"Tokenizer file not found: {files.describe(TOKENIZER_VOCABULARIES[0])} "
            f"(the model directory needs one of {', '.join(TOKENIZER_VOCABULARIES)})"
        )


def optional_file_warnings(files: ModelFiles) -> list[str]:
    """One line per file SageMaker lists that this (otherwise complete) model lacks."""
    present = files.paths()
    warnings = [
        f"{files.describe(name)} is missing ({why})"
        for name, why in OPTIONAL_FILES.items()
        if name not in present
    ]
    if VOCAB_FILE not in present:
        holder = next((name for name in TOKENIZER_VOCABULARIES if name in present), None)
        warnings.append(f"{files.describe(VOCAB_FILE)} is missing (the vocabulary is in {holder})")
    return warnings


def _check_weights(files: ModelFiles) -> list[str]:
    """The weight files (one, or every shard the index names); each must be present."""
    present = files.paths()
    if WEIGHTS_FILE in present:
        return [WEIGHTS_FILE]
    if WEIGHTS_INDEX not in present:
        raise JobFailedError(
            f"Model weights not found: {files.describe(WEIGHTS_FILE)} "
            f"(nor a sharded {WEIGHTS_INDEX}); the base model must be in safetensors format"
        )
    index_where = files.describe(WEIGHTS_INDEX)
    index = _read_json(files, WEIGHTS_INDEX)
    weight_map = index.get("weight_map") if isinstance(index, dict) else None
    if not isinstance(weight_map, dict) or not weight_map:
        raise JobFailedError(f"{index_where} has no 'weight_map' naming the weight shards")
    shards = sorted({str(name) for name in weight_map.values()})
    for shard in shards:
        if shard not in present:
            raise JobFailedError(
                f"Model weight shard not found: {files.describe(shard)} (listed in {index_where})"
            )
    return shards


def _check_safetensors(files: ModelFiles, name: str) -> None:
    try:
        check_safetensors(lambda start, length: files.read_range(name, start, length), files.size(name))
    except SafetensorsError as error:
        raise JobFailedError(f"{files.describe(name)} is not a complete safetensors file: {error}") from error


def _validate_head(ctx: JobContext, source: ModelData, target_config: dict[str, Any]) -> HeadInput:
    if source.compressed:
        snapshot = _archive_snapshot(ctx, source, what="EAGLE head archive")
        ctx.report(f"Downloading and unpacking the EAGLE head {source.uri}", fraction=0.6)
        local_dir = ctx.cache.fetch_archive(
            ctx.s3, snapshot, kind="heads", max_unpacked_bytes=ctx.settings.max_model_archive_bytes
        )
        for name in HEAD_REQUIRED_FILES:
            if not (local_dir / name).is_file():
                raise JobFailedError(f"EAGLE head file not found: {name} in {source.uri}")
        shown = source.uri
        location = source.location
    else:
        location = source.location.as_directory
        snapshot = S3Snapshot.under_prefix(location.uri, location.prefix, ctx.s3.list_objects(location))
        for name in HEAD_REQUIRED_FILES:
            if snapshot.entry(name) is None:
                raise JobFailedError(f"EAGLE head file not found: {location.child(name).uri}")
        ctx.report(f"Downloading the EAGLE head from {location.uri}", fraction=0.6)
        local_dir = ctx.cache.fetch(ctx.s3, snapshot, kind="heads")
        shown = location.uri.rstrip("/")
    try:
        report = validate_head(local_dir, target_config_from_dict(target_config))
    except InvalidHeadError as error:
        # The message names the cached file; the user knows it by its S3 URI.
        message = str(error).replace(str(local_dir), shown)
        raise JobFailedError(f"The eagle_model channel is not a usable EAGLE-3 head: {message}") from error
    summary = {
        "num_parameters": report.num_parameters,
        "weight_dtype": report.weight_dtype,
        "draft_vocab_size": report.draft_vocab_size,
        "draft_variant": draft_variant(report.config),
        "aux_layer_ids": report.aux_layer_ids,
        "aux_layer_id_convention": report.aux_layer_id_convention,
        "warnings": report.warnings,
    }
    sha256 = {name: sha256_of(local_dir / name) for name in HEAD_REQUIRED_FILES}
    return HeadInput(
        location=location, snapshot=snapshot, local_dir=local_dir, summary=summary, sha256=sha256
    )
