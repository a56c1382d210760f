"""What the stages hand each other during one run of a job's pipeline.

Rebuilt from scratch on every delivery of the job: each stage finds its inputs on S3 or
in the local cache (cheap when already there), which is what makes a redelivered job
safe to run again from the first stage.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar

from core.s3 import S3Location
from core.s3_store import S3Object
from worker.s3_snapshot import S3Snapshot

DataSourceKind = Literal["S3Prefix", "ManifestFile", "BuiltIn"]
# Where a job's base head came from: its eagle_model channel, or the base-head store
# (worker.base_heads), which keeps one head per base model trained on the built-in data.
HeadOrigin = Literal["eagle_model", "base_heads"]

T = TypeVar("T")


@dataclass
class BaseModelInput:
    location: S3Location
    snapshot: S3Snapshot
    config: dict[str, Any]
    architecture: str
    local_dir: Path | None = None  # set by 'prepare' (by 'validate' for a model.tar.gz)
    compressed: bool = False  # location is a model.tar.gz, not a directory
    # Files SageMaker lists that this model lacks but does not need (see the 'validate' stage).
    warnings: list[str] = field(default_factory=list)


@dataclass
class HeadInput:
    """An existing EAGLE head, already validated for the target: the job's Base EAGLE."""

    location: S3Location
    snapshot: S3Snapshot
    local_dir: Path
    summary: dict[str, Any]
    origin: HeadOrigin = "eagle_model"
    sha256: dict[str, str] = field(default_factory=dict)  # of each file, as used
    store_key: str | None = None  # the base-head store's key (the model's content hash)
    built_by_this_job: bool = False
    shipped: dict[str, Any] | None = None  # the shipped head it is (worker.shipped_heads), if any


@dataclass
class TrainingDataInput:
    kind: DataSourceKind
    uri: str
    snapshot: S3Snapshot
    local_dir: Path
    files: list[Path]
    # SageMaker manifest file or built-in catalog the objects were listed from.
    listing: S3Object | None = None
    datasets: list[str] = field(default_factory=list)  # built-in dataset names
    summary: dict[str, Any] = field(default_factory=dict)  # records read/skipped per file


@dataclass
class TrainOutput:
    result: dict[str, Any]  # trainer's TrainResult, as JSON
    run_dir: Path
    head_dir: Path
    metrics_path: Path
    heldout_path: Path


@dataclass
class BenchmarkOutput:
    report: dict[str, Any]
    json_path: Path
    csv_path: Path


@dataclass
class FannedOutDistillation:
    """The records the job's shards distilled (one local file per shard) and how they went."""

    shard_files: list[Path]
    summary: dict[str, Any]  # worker.fanout.layout.MergedDistillation, as JSON


@dataclass
class JobArtifacts:
    model: BaseModelInput | None = None
    base_head: HeadInput | None = None
    data: TrainingDataInput | None = None
    # Stage 'distil' with a fan-out: the shards' records, which training takes as distilled_paths.
    distilled: FannedOutDistillation | None = None
    train: TrainOutput | None = None
    benchmark: BenchmarkOutput | None = None
    # lineage.json at the output location naming this job: it was published by an earlier run.
    published_lineage: dict[str, Any] | None = None


def required(value: T | None, what: str) -> T:
    """A stage's input from an earlier stage; missing means the stage list is in the wrong order."""
    if value is None:
        raise RuntimeError(f"{what} is not available: the stage that provides it has not run")
    return value
