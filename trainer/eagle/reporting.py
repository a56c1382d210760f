"""What a training run tells its caller: progress while it runs, a result when it ends,
and one JSON line per step in ``metrics.jsonl``."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, SerializerFunctionWrapHandler, model_serializer, model_validator

Stage = Literal[
    "loading_model",
    "loading_data",
    "writing_prompts",
    "regenerating",
    "tokenizing",
    "training",
    "evaluating",
    "checkpointing",
    "exporting",
    "done",
]

StopReason = Literal["completed", "max_steps", "time_budget", "stop_requested"]


def acceptance_length_estimate(step_accuracy: Sequence[float]) -> float:
    """Mean accepted length per verify step (bonus token included) if step i's draft is
    accepted with probability ``step_accuracy[i]`` given the earlier ones were:
    1 + a0 + a0*a1 + a0*a1*a2 + ...  (TTT feeds step i the true earlier tokens, so its
    accuracy is the conditional acceptance of greedy verification)."""
    total, chain = 1.0, 1.0
    for accuracy in step_accuracy:
        chain *= accuracy
        total += chain
    return total


class TrainProgress(BaseModel):
    """Sent to the progress callback after every step and at every stage change."""

    stage: Stage
    step: int = Field(description="Optimizer steps done (or items done in a data stage).")
    total_steps: int = Field(
        description="Planned steps (or items in a data stage); re-planned under a time budget."
    )
    loss: float | None = None
    step_accuracy: list[float] = Field(
        default_factory=list, description="Per draft position, this step's batch."
    )
    lr: float | None = None
    tokens_per_s: float | None = None
    eta_seconds: float | None = None
    elapsed_seconds: float = 0.0


def describe_progress(progress: TrainProgress) -> str:
    """One line for a person: the stage, the step, and the loss and speed while training."""
    stage = progress.stage.replace("_", " ")
    if progress.stage == "training":
        text = f"training: step {progress.step}/{progress.total_steps}"
        if progress.loss is not None:
            text += f", loss {progress.loss:.4f}"
        if progress.step_accuracy:
            text += f", first-draft accuracy {progress.step_accuracy[0]:.2f}"
        if progress.tokens_per_s:
            text += f", {progress.tokens_per_s:.0f} tokens/s"
        return text
    if progress.stage in ("evaluating", "checkpointing", "exporting"):
        return f"{stage} at step {progress.step}/{progress.total_steps}"
    if progress.total_steps:
        return f"{stage}: {progress.step}/{progress.total_steps}"
    return stage


def progress_printer(say: Callable[[str], None]) -> Callable[[TrainProgress], None]:
    """A progress callback that says every stage change and every 50th training step."""
    last_stage: list[str] = []

    def report(progress: TrainProgress) -> None:
        if last_stage[-1:] != [progress.stage] or (progress.stage == "training" and progress.step % 50 == 0):
            last_stage.append(progress.stage)
            say(describe_progress(progress))

    return report


class EvalMetrics(BaseModel):
    loss: float
    step_accuracy: list[float]
    acceptance_length_estimate: float
    masked_tokens: int


class RunFiles(BaseModel):
    """Where the run wrote, as paths on the machine that trained."""

    out_dir: str
    head_dir: str | None = Field(description="The exported head; None when the run was stopped.")
    metrics_path: str
    checkpoint_dir: str
    best_checkpoint: str | None = None


class TrainingSummary(BaseModel):
    """How far the optimisation got, why it ended, and its last batch's loss and accuracy."""

    steps: int = 0
    total_steps: int = 0
    epochs_completed: float = 0.0
    stopped: bool
    stop_reason: StopReason
    resumed_from_step: int | None = None
    final_loss: float | None = None
    final_step_accuracy: list[float] = Field(default_factory=list)


class Evaluation(BaseModel):
    """The held-out metrics of the last checkpoint and of the best one; None without held-out samples."""

    final_eval: EvalMetrics | None = None
    best_eval: EvalMetrics | None = None


class DataSummary(BaseModel):
    """What the run trained on: records read, conversations held out, samples, regeneration."""

    records_read: int
    records_skipped: int
    conversations_used: int
    conversations_heldout: int
    train_samples: int
    eval_samples: int
    train_tokens: int
    regeneration_mode: str
    regeneration_seconds: float
    regenerated_conversations: int
    self_instruct: dict[str, Any] | None = Field(
        default=None, description="The target's own prompts in the mix: kept, dropped by reason, settings."
    )


class DraftHeadSummary(BaseModel):
    """The draft head's vocabulary and the target layers it reads; empty when no head was built."""

    draft_vocab_size: int = 0
    draft_vocab_coverage: float | None = None
    aux_layer_ids: list[int] = Field(default_factory=list)
    target_architecture: str
    draft_variant: str = Field(default="", description="eagle3, eagle2 or peagle; empty without a head.")


class Timing(BaseModel):
    """How long the run took on its budget clock (and on the wall and CPU clocks), and how fast it trained."""

    tokens_trained: int = 0
    train_tokens_per_s: float = 0.0
    stage_seconds: dict[str, float]  # on the budget clock
    seconds: float  # on the budget clock
    wall_seconds: float = 0.0
    cpu_seconds: float = 0.0  # this process's CPU time, all threads
    budget_clock: str = "wall"


class TrainResult(BaseModel):
    """What a run did, in groups; its JSON is flat (the groups' fields side by side), the shape
    the worker stages as train/result.json and lineage.json copies fields from by name."""

    files: RunFiles
    training: TrainingSummary
    evaluation: Evaluation
    data: DataSummary
    head: DraftHeadSummary
    timing: Timing
    hyperparameters: dict[str, Any]  # the TrainConfig
    data_stats: dict[str, Any]  # all of DataStats, of which ``data`` is the summary

    @model_serializer(mode="wrap")
    def _flatten(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        nested: dict[str, Any] = handler(self)
        flat: dict[str, Any] = {}
        for name, value in nested.items():
            flat.update(value if name in _GROUPS else {name: value})
        return flat

    @model_validator(mode="before")
    @classmethod
    def _nest(cls, value: Any) -> Any:
        """Read the flat JSON back (also that of results written before the groups)."""
        if not isinstance(value, dict) or any(name in value for name in _GROUPS):
            return value
        nested = {
            name: {key: value[key] for key in group.model_fields if key in value}
            for name, group in _GROUPS.items()
        }
        return {key: item for key, item in value.items() if key not in _GROUPED_KEYS} | nested


# TrainResult's groups by field name: their fields are its JSON's keys.
_GROUPS: dict[str, type[BaseModel]] = {
    name: field.annotation
    for name, field in TrainResult.model_fields.items()
    if isinstance(field.annotation, type) and issubclass(field.annotation, BaseModel)
}
_GROUPED_KEYS = {key for group in _GROUPS.values() for key in group.model_fields}


class MetricsLog:
    """Appends one JSON object per line; a resumed run drops lines past its checkpoint."""

    def __init__(self, path: Path, *, keep_through_step: int | None) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        if keep_through_step is None:
            path.write_text("")
        elif path.exists():
            kept = [line for line in path.read_text().splitlines() if _step_of(line) <= keep_through_step]
            path.write_text("".join(line + "\n" for line in kept))

    def write(self, record: dict[str, Any]) -> None:
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(record) + "\n")


def _step_of(line: str) -> int:
    try:
        return int(json.loads(line).get("step", 0))
    except (ValueError, AttributeError):
        return 0
