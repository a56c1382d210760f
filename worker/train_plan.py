"""The trainer's config for a job: EAGLE_* knobs, operator defaults, and a time budget.

The budget is EAGLE_TRAIN_MAX_MINUTES (less what earlier runs of this job already trained),
capped so that MaxRuntimeInSeconds still leaves time to benchmark and publish.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import ValidationError

from core.eagle_knobs import EagleKnobs
from core.job_errors import JobFailedError
from trainer.config import TrainConfig, self_instruct_for_budget

# Kept back from MaxRuntimeInSeconds for benchmark and publish: a fifth of what is left,
# and never less than this.
MIN_POST_TRAIN_SECONDS = 60.0
POST_TRAIN_SHARE = 0.2
# Below this there is no point in starting: the trainer itself keeps 15 s for its export.
MIN_TRAIN_SECONDS = 10.0

# Which knob sets which TrainConfig field; named in errors by the knob the user wrote.
KNOB_FIELDS = {
    "draft_vocab_size": ("EAGLE_DRAFT_VOCAB_SIZE", "draft_vocab_size"),
    "ttt_steps": ("EAGLE_TTT_STEPS", "ttt_steps"),
    "variant": ("EAGLE_VARIANT", "variant"),
    "learning_rate": ("EAGLE_LEARNING_RATE", "lr"),
    "regenerate": ("EAGLE_REGENERATE", "regenerate"),
    "self_instruct_conversations": ("EAGLE_SELF_INSTRUCT_CONVERSATIONS", "self_instruct_conversations"),
    "self_instruct_openings": ("EAGLE_SELF_INSTRUCT_OPENINGS", "self_instruct_openings"),
}


def post_train_reserve(seconds_left: float) -> float:
    return max(MIN_POST_TRAIN_SECONDS, POST_TRAIN_SHARE * seconds_left)


def training_budget_minutes(
    knobs: EagleKnobs, *, seconds_left: float | None, trained_seconds: float
) -> float | None:
    """Minutes this run may train; None means the trainer's own epochs decide."""
    budgets: list[float] = []
    if knobs.train_max_minutes is not None:
        budgets.append(knobs.train_max_minutes * 60.0 - trained_seconds)
    if seconds_left is not None:
        budgets.append(seconds_left - post_train_reserve(seconds_left))
    if not budgets:
        return None
    budget = min(budgets)
    if budget < MIN_TRAIN_SECONDS:
        if knobs.train_max_minutes is not None and budget == budgets[0]:
            # EAGLE_TRAIN_MAX_MINUTES already spent by earlier runs: train one last step.
            return MIN_TRAIN_SECONDS / 60.0
        raise JobFailedError(
            f"MaxRuntimeInSeconds leaves {max(0.0, budget):.0f} s to train after keeping "
            f"{post_train_reserve(seconds_left or 0.0):.0f} s for benchmark and publish; "
            "raise StoppingCondition.MaxRuntimeInSeconds"
        )
    return budget / 60.0


def build_train_config(
    knobs: EagleKnobs,
    *,
    overrides: dict[str, Any],
    model_dir: Path,
    data_files: list[Path],
    run_dir: Path,
    init_head_dir: Path | None,
    budget_minutes: float | None,
    builtin_data: bool = False,
    nproc: int = 1,
    device: str = "cpu",
) -> TrainConfig:
    """The knobs over the operator's overrides; ``nproc`` and ``device`` are the worker's
    (EAGLENEST_TRAIN_NPROC, EAGLENEST_DEVICE).

    A job on the built-in data (no TrainingDataSource) gets the default recipe's self-instruct
    prompts for its budget, mixed with the built-in datasets, unless a knob or override says
    how many (or turns regeneration off)."""
    fields: dict[str, Any] = dict(overrides)
    if knobs.self_instruct_conversations and knobs.regenerate is False:
        raise JobFailedError(
            "EAGLE_SELF_INSTRUCT_CONVERSATIONS needs EAGLE_REGENERATE=true (or unset): the target's "
            "own prompts have no reply until the target writes one"
        )
    if knobs.self_instruct_conversations and knobs.regenerate is None:
        # The target's own prompts have no reply until it writes one.
        fields["regenerate"] = True
    for attribute, (_, field) in KNOB_FIELDS.items():
        value = getattr(knobs, attribute)
        if value is not None:
            fields[field] = value
    if builtin_data and "self_instruct_conversations" not in fields and fields.get("regenerate", True):
        fields["self_instruct_conversations"] = self_instruct_for_budget(budget_minutes)
    fields.update(
        model_dir=model_dir,
        data_paths=data_files,
        out_dir=run_dir,
        init_head_dir=init_head_dir,
        resume=True,
        time_budget_minutes=budget_minutes,
        nproc=nproc,
        device=device,
    )
    if init_head_dir is not None and knobs.draft_vocab_size is None:
        # An operator default must not clash with an existing head's own vocabulary.
        fields.pop("draft_vocab_size", None)
    try:
        return TrainConfig.model_validate(fields)
    except ValidationError as error:
        raise JobFailedError(_describe(error, init_head_dir is not None)) from None


def _describe(error: ValidationError, has_head: bool) -> str:
    problems = []
    knob_of = {field: knob for knob, field in KNOB_FIELDS.values()}
    for detail in error.errors():
        location = ".".join(str(part) for part in detail["loc"])
        message = str(detail["msg"]).removeprefix("Value error, ")
        if "draft_vocab_size cannot be set with init_head_dir" in message and has_head:
            return (
                "EAGLE_DRAFT_VOCAB_SIZE cannot be used with an existing head (the eagle_model channel): "
                "fine-tuning keeps the head's own draft vocabulary"
            )
        name = knob_of.get(location, f"train_overrides.{location}" if location else "training config")
        problems.append(f"{name}: {message}")
    return "Invalid training configuration: " + "; ".join(problems)
