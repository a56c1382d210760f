"""What a fanned-out distillation keeps under the job's staging prefix, and the documents' shapes.

    distillation/plan.json                       the shards, the trainer config, the model, the deadline
    distillation/shards/shard-00003/input.jsonl  the shard's conversations, in plan order
    distillation/shards/shard-00003/heartbeat.json   who distils it now, and how far it got
    distillation/shards/shard-00003/records.jsonl    its distilled records (regenerated.jsonl lines)
    distillation/shards/shard-00003/result.json      written last: the shard is in
    distillation/merged.json                     written once every shard is in: training may start

Every file is written whole by one PUT; ``result.json`` after ``records.jsonl`` and
``merged.json`` after every ``result.json``, so a reader never sees half a shard.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from core.output_layout import OutputLayout
from core.s3 import S3Location
from trainer.config import TrainConfig
from worker.worker_identity import WorkerIdentity

ROOT = "distillation/"
PLAN = ROOT + "plan.json"
MERGED = ROOT + "merged.json"


def shard_name(index: int) -> str:
    return f"shard-{index:05d}"


class ShardLayout:
    def __init__(self, layout: OutputLayout, index: int) -> None:
        self.index = index
        self.prefix = layout.staged(f"{ROOT}shards/{shard_name(index)}/")

    def _child(self, name: str) -> S3Location:
        return self.prefix.child(name)

    @property
    def input(self) -> S3Location:
        return self._child("input.jsonl")

    @property
    def heartbeat(self) -> S3Location:
        return self._child("heartbeat.json")

    @property
    def records(self) -> S3Location:
        return self._child("records.jsonl")

    @property
    def result(self) -> S3Location:
        return self._child("result.json")


class ShardSpec(BaseModel):
    index: int
    first_chunk: int = Field(description="The shard's first chunk number in the plan (its seed).")
    conversations: int


class ModelObject(BaseModel):
    path: str
    uri: str
    etag: str
    size: int


class DistillationPlanDocument(BaseModel):
    train_config: dict[str, Any] = Field(
        description="The TrainConfig fields the job set (plan_train_config); model_dir is each worker's own."
    )
    model_uri: str
    model_objects: list[ModelObject]
    model_compressed: bool
    origins: dict[str, str] = Field(description="Data conversations' origins by source.")
    shards: list[ShardSpec]
    deadline_epoch: float | None = Field(description="Unix time when distilling must stop; None: no limit.")
    self_instruct: dict[str, Any] | None = None
    chunk_size: int | None = Field(
        default=None,
        description="Conversations per chunk, as the planner's device sized them; every shard chunks so. "
        "None in plans written before it was kept: eight batches of regenerate_batch_size.",
    )
    coordinator: WorkerIdentity | None = Field(default=None, description="The job's own worker.")


class ShardHeartbeat(BaseModel):
    worker: WorkerIdentity
    task_id: str | None
    done: int = Field(description="Replies written so far.")
    total: int
    at_epoch: float


class ShardResult(BaseModel):
    index: int
    worker: WorkerIdentity
    records: int
    generated_tokens: int
    seconds: float
    stopped: bool = Field(description="Ended by the job's deadline or a stop before its last chunk.")
    attempt_task_id: str | None = None


class MergedDistillation(BaseModel):
    shards: list[ShardResult]
    missing_shards: list[int] = Field(
        default_factory=list, description="Shards the deadline left undone (none started in time)."
    )
    records: int
    generated_tokens: int
    seconds: float = Field(description="Wall time from sending the shards until the last was in.")
    retried_shards: list[int] = Field(default_factory=list)
    coordinator: WorkerIdentity | None = Field(default=None, description="The job's own worker.")


def plan_train_config(config: TrainConfig) -> dict[str, Any]:
    """The job's config as a plan carries it to its shards: only the fields the job set, so a
    shard's worker fills the rest with its own defaults. A field written out would count as
    chosen: ``regenerate_batch_size`` would hold a GPU shard to the CPU's 48 rows rather
    than TrainConfig.generation_rows' 256."""
    return config.model_dump(mode="json", exclude_unset=True)


def shard_train_config(
    plan: DistillationPlanDocument, model_dir: Path, scratch: Path, *, device: str
) -> TrainConfig:
    """The config a shard's worker distils with: the plan's, on its own copy of the model and
    on its own device (its EAGLENEST_DEVICE). The plan carries the coordinator's device, and a
    queue may mix CPU and GPU workers: a GPU worker would distil its shards on its CPU, and a
    CPU worker would fail every shard of a GPU job's plan."""
    return TrainConfig.model_validate(
        {
            **plan.train_config,
            "model_dir": model_dir,
            "out_dir": scratch,
            "distilled_paths": [],
            "init_head_dir": None,
            "device": device,
        }
    )
