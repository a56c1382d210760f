"""lineage.json: where a published head came from and what exactly was published.

It is written after every other output file is in place and lists each of them with its
sha256, so it doubles as the commit marker of the output location: no lineage.json (or
one naming another job) means the location holds no complete result of this job.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from core.job_spec import JobSpec
from worker.artifacts import HeadInput, JobArtifacts, required
from worker.code_version import code_version
from worker.output_model import OutputModel

LINEAGE_VERSION = 1
COMMIT_RULE = (
    "lineage.json is written last, after every file listed in 'outputs'; treat the output location "
    "as complete only when lineage.json exists and its job.arn is the job you expect"
)
# TrainResult fields worth keeping: what the run did, not where its local files were.
TRAINING_FIELDS = (
    "steps",
    "total_steps",
    "epochs_completed",
    "stop_reason",
    "resumed_from_step",
    "final_loss",
    "final_step_accuracy",
    "final_eval",
    "best_eval",
    "records_read",
    "records_skipped",
    "conversations_used",
    "conversations_heldout",
    "train_samples",
    "eval_samples",
    "train_tokens",
    "regeneration_mode",
    "regenerated_conversations",
    "self_instruct",
    "draft_vocab_size",
    "draft_vocab_coverage",
    "aux_layer_ids",
    "target_architecture",
    "tokens_trained",
    "train_tokens_per_s",
    "seconds",
)

DEFAULT_DRAFT_VARIANT = "eagle3"


@dataclass(frozen=True)
class PublishedFile:
    path: str  # relative to S3OutputLocation
    uri: str
    sha256: str
    size: int


def build_lineage(
    job: JobSpec,
    artifacts: JobArtifacts,
    *,
    outputs: list[PublishedFile],
    output_model: OutputModel | None,
) -> dict[str, Any]:
    model = required(artifacts.model, "the base model")
    data = required(artifacts.data, "the training data")
    train = required(artifacts.train, "the training result")
    benchmark = required(artifacts.benchmark, "the benchmark report")
    head = artifacts.base_head
    return {
        "lineage_version": LINEAGE_VERSION,
        "committed_at": datetime.now(UTC).isoformat(),
        "commit_rule": COMMIT_RULE,
        "job": {
            "arn": job.arn,
            "name": job.name,
            "region": job.region,
            "created_at": job.created_at.isoformat(),
            "started_at": None if job.started_at is None else job.started_at.isoformat(),
        },
        "source_model": {
            **model.snapshot.to_lineage(),
            "architecture": model.architecture,
            "warnings": model.warnings,
        },
        "base_head": None if head is None else base_head_lineage(head, train.result),
        "training_data": {
            "source": data.kind,
            **data.snapshot.to_lineage(),
            "listed_by": None
            if data.listing is None
            else {"uri": data.listing.uri, "etag": data.listing.etag, "size": data.listing.size},
            "builtin_datasets": data.datasets,
            "records": data.summary,
        },
        "optimization_environment": job.optimization_environment or {},
        # What was trained: EAGLE_VARIANT, or the trainer's default for the architecture.
        "draft_variant": job.knobs.variant or train.result.get("draft_variant") or DEFAULT_DRAFT_VARIANT,
        "hyperparameters": _hyperparameters(train.result.get("hyperparameters", {}), artifacts),
        "training": {name: train.result.get(name) for name in TRAINING_FIELDS},
        # The shared distillation cache (worker.distillation_cache): its key, the records reused
        # (by part) and the part this job added; None when the operator runs no cache.
        "distillation_cache": train.result.get("distillation_cache"),
        # Stage 'distil' with a fan-out: each shard's worker, records, tokens and time; None without.
        "distillation_fanout": train.result.get("distillation_fanout"),
        "benchmark": {
            key: benchmark.report.get(key)
            for key in (
                "engine",
                "load_generator",
                "concurrency_levels",
                "requests_per_level",
                "max_tokens",
                "num_speculative_tokens",
                "prompts",
            )
        }
        | {"prompt_source": benchmark.report.get("prompt_source")},
        "code_version": code_version(),
        "output_model": None
        if output_model is None
        else {"name": output_model.name, "arn": output_model.arn},
        "outputs": [
            {"path": item.path, "uri": item.uri, "sha256": item.sha256, "size": item.size} for item in outputs
        ],
    }


def base_head_lineage(head: HeadInput, train_result: dict[str, Any]) -> dict[str, Any]:
    """The Base EAGLE head: where it came from, what exactly it was, and whether training started from it."""
    return {
        "origin": head.origin,  # eagle_model: the model's channel; base_heads: the base-head store
        **head.snapshot.to_lineage(),
        "sha256": head.sha256,
        "store_key": head.store_key,
        "built_by_this_job": head.built_by_this_job,
        "shipped_head": head.shipped,  # name, manifest and file sha256 of a head shipped with eaglenest
        "trained_from": train_result.get("hyperparameters", {}).get("init_head_dir") is not None,
        "validation": head.summary,
    }


def _hyperparameters(raw: dict[str, Any], artifacts: JobArtifacts) -> dict[str, Any]:
    """The trainer's config with local cache paths replaced by the S3 URIs they were copied from."""
    # distilled_paths are local copies of the distillation cache's parts, named in "distillation_cache".
    values = {key: value for key, value in raw.items() if key not in {"out_dir", "distilled_paths"}}
    if artifacts.model is not None:
        values["model_dir"] = artifacts.model.location.uri
    if artifacts.data is not None:
        values["data_paths"] = [entry.object.uri for entry in artifacts.data.snapshot.entries]
    if values.get("init_head_dir") is not None and artifacts.base_head is not None:
        values["init_head_dir"] = artifacts.base_head.location.uri
    return values
