"""Stage 'validate': the job's inputs exist on S3 and are what training needs.

Checked before anything heavy runs, so a wrong URI or an unsupported model fails in
seconds with a FailureReason naming the missing or bad file, not later inside training:

- the base model: config.json with a supported architecture, tokenizer files, and
  weights (model.safetensors, or model.safetensors.index.json with every shard present);
- an ``eagle_model`` channel: a head that fits this target (downloaded and checked);
- OptimizationEnvironment's EAGLE_* knobs and the output location.
"""

from __future__ import annotations

from typing import Any

from core.job_errors import JobFailedError
from core.model_source import eagle_head_location, model_location
from core.s3 import S3Location
from trainer.eagle.capture import UnsupportedArchitectureError, check_supported
from trainer.eagle.head_format import InvalidHeadError
from trainer.eagle.validate import validate_head
from worker.artifacts import BaseModelInput, HeadInput
from worker.context import JobContext
from worker.s3_snapshot import S3Snapshot
from worker.target_config import target_config_from_dict

MAX_CONFIG_BYTES = 1_000_000
CONFIG_FILE = "config.json"
TOKENIZER_CONFIG = "tokenizer_config.json"
# Any one of these holds the vocabulary (fast tokenizer, SentencePiece, or BPE vocab + merges).
TOKENIZER_VOCABULARIES = ("tokenizer.json", "tokenizer.model", "vocab.json")
WEIGHTS_FILE = "model.safetensors"
WEIGHTS_INDEX = "model.safetensors.index.json"
HEAD_REQUIRED_FILES = ("config.json", "model.safetensors")


def validate_artifacts(ctx: JobContext) -> None:
    ctx.knobs  # noqa: B018 - parse EAGLE_* now: a bad knob fails before any download
    layout = ctx.layout
    location = model_location(ctx.job.model_source, ctx.job.source_model_container)
    ctx.report(f"Listing the base model under {location.as_directory.uri}", fraction=0.05)
    snapshot = S3Snapshot.under_prefix(
        location.as_directory.uri, location.prefix, ctx.s3.list_objects(location)
    )
    config = _read_model_config(ctx, location, snapshot)
    architecture = _check_architecture(config, location.child(CONFIG_FILE))
    _check_tokenizer(location, snapshot)
    ctx.check()
    _check_weights(ctx, location, snapshot)
    ctx.artifacts.model = BaseModelInput(
        location=location.as_directory, snapshot=snapshot, config=config, architecture=architecture
    )
    ctx.report(f"Base model {location.as_directory.uri} ({architecture}) is complete", fraction=0.5)

    head_location = eagle_head_location(ctx.job.source_model_container)
    if head_location is not None:
        ctx.check()
        ctx.artifacts.base_head = _validate_head(ctx, head_location, config)
        ctx.report(f"EAGLE head {head_location.as_directory.uri} fits the base model", fraction=0.9)

    lineage = ctx.s3.head(layout.lineage)
    if lineage is not None:
        document = ctx.s3.read_json(layout.lineage)
        if isinstance(document, dict) and document.get("job", {}).get("arn") == ctx.job.arn:
            ctx.artifacts.published_lineage = document
            ctx.report(f"This job's outputs are already published at {layout.final.uri}", fraction=1.0)


def _read_model_config(ctx: JobContext, location: S3Location, snapshot: S3Snapshot) -> dict[str, Any]:
    config_location = location.child(CONFIG_FILE)
    entry = snapshot.entry(CONFIG_FILE)
    if entry is None:
        raise JobFailedError(f"Model file not found: {config_location.uri}")
    if entry.object.size > MAX_CONFIG_BYTES:
        raise JobFailedError(
            f"{config_location.uri} is {entry.object.size} bytes; a model config is far smaller"
        )
    document = ctx.s3.read_json(config_location)
    if not isinstance(document, dict):
        raise JobFailedError(f"{config_location.uri} must hold a JSON object")
    if "model_type" not in document and "architectures" not in document:
        raise JobFailedError(
            f"{config_location.uri} is not a Hugging Face model config (no model_type or architectures)"
        )
    return document


def _check_architecture(config: dict[str, Any], config_location: S3Location) -> str:
    try:
        return check_supported(target_config_from_dict(config))
    except UnsupportedArchitectureError as error:
        raise JobFailedError(f"{config_location.uri}: {error}") from error


def _check_tokenizer(location: S3Location, snapshot: S3Snapshot) -> None:
    present = snapshot.paths()
    if TOKENIZER_CONFIG not in present:
        raise JobFailedError(f"Tokenizer file not found: {location.child(TOKENIZER_CONFIG).uri}")
    if not any(name in present for name in TOKENIZER_VOCABULARIES):
        raise JobFailedError(
            f"Tokenizer file not found: {location.child(TOKENIZER_VOCABULARIES[0]).uri} "
            f"(the model directory needs one of {', '.join(TOKENIZER_VOCABULARIES)})"
        )


def _check_weights(ctx: JobContext, location: S3Location, snapshot: S3Snapshot) -> None:
    present = snapshot.paths()
    if WEIGHTS_FILE in present:
        return
    if WEIGHTS_INDEX not in present:
        raise JobFailedError(
            f"Model weights not found: {location.child(WEIGHTS_FILE).uri} "
            f"(nor a sharded {WEIGHTS_INDEX}); the base model must be in safetensors format"
        )
    index_location = location.child(WEIGHTS_INDEX)
    index = ctx.s3.read_json(index_location)
    weight_map = index.get("weight_map") if isinstance(index, dict) else None
    if not isinstance(weight_map, dict) or not weight_map:
        raise JobFailedError(f"{index_location.uri} has no 'weight_map' naming the weight shards")
    for shard in sorted({str(name) for name in weight_map.values()}):
        if shard not in present:
            raise JobFailedError(
                f"Model weight shard not found: {location.child(shard).uri} (listed in {index_location.uri})"
            )


def _validate_head(ctx: JobContext, location: S3Location, target_config: dict[str, Any]) -> HeadInput:
    snapshot = S3Snapshot.under_prefix(
        location.as_directory.uri, location.prefix, ctx.s3.list_objects(location)
    )
    for name in HEAD_REQUIRED_FILES:
        if snapshot.entry(name) is None:
            raise JobFailedError(f"EAGLE head file not found: {location.child(name).uri}")
    ctx.report(f"Downloading the EAGLE head from {location.as_directory.uri}", fraction=0.6)
    local_dir = ctx.cache.fetch(ctx.s3, snapshot, kind="heads")
    try:
        report = validate_head(local_dir, target_config_from_dict(target_config))
    except InvalidHeadError as error:
        # The message names the cached file; the user knows it by its S3 URI.
        message = str(error).replace(str(local_dir), location.as_directory.uri.rstrip("/"))
        raise JobFailedError(f"The eagle_model channel is not a usable EAGLE-3 head: {message}") from error
    summary = {
        "num_parameters": report.num_parameters,
        "weight_dtype": report.weight_dtype,
        "draft_vocab_size": report.draft_vocab_size,
        "aux_layer_ids": report.aux_layer_ids,
        "aux_layer_id_convention": report.aux_layer_id_convention,
        "warnings": report.warnings,
    }
    return HeadInput(location=location.as_directory, snapshot=snapshot, local_dir=local_dir, summary=summary)
