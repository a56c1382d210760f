"""The EAGLE_* keys of OptimizationEnvironment: eaglenest's training knobs, defined once.

CreateOptimizationJob validates them (an unknown or malformed EAGLE_* key is a
ValidationException naming it); the worker reads them back with ``EagleKnobs.from_environment``.
Every other key is stored and echoed untouched, as SageMaker does.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

EAGLE_PREFIX = "EAGLE_"


def _parse_int(text: Any) -> Any:
    if isinstance(text, str):
        stripped = text.strip()
        if not stripped.lstrip("+-").isdigit():
            raise ValueError("must be a whole number")
        return int(stripped)
    return text


def _parse_float(text: Any) -> Any:
    if isinstance(text, str):
        try:
            number = float(text.strip())
        except ValueError:
            raise ValueError("must be a number") from None
        if not math.isfinite(number):
            raise ValueError("must be a finite number")
        return number
    return text


def _parse_bool(text: Any) -> Any:
    if isinstance(text, str):
        lowered = text.strip().lower()
        if lowered not in ("true", "false"):
            raise ValueError("must be true or false")
        return lowered == "true"
    return text


class EagleKnobs(BaseModel):
    """Training knobs a job may set through ``OptimizationEnvironment``; None means the default."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    train_max_minutes: float | None = Field(
        default=None, gt=0, alias="EAGLE_TRAIN_MAX_MINUTES", description="Wall-clock budget for training."
    )
    num_speculative_tokens: int | None = Field(
        default=None,
        ge=1,
        le=16,
        alias="EAGLE_NUM_SPECULATIVE_TOKENS",
        description="Draft tokens proposed per step when benchmarking and in the exported config.",
    )
    draft_vocab_size: int | None = Field(
        default=None,
        ge=256,
        le=262144,
        alias="EAGLE_DRAFT_VOCAB_SIZE",
        description="Size of the head's reduced output vocabulary (d2t/t2d mapping).",
    )
    regenerate: bool | None = Field(
        default=None,
        alias="EAGLE_REGENERATE",
        description="Regenerate assistant turns with the target model before training.",
    )
    self_instruct_conversations: int | None = Field(
        default=None,
        ge=0,
        le=100000,
        alias="EAGLE_SELF_INSTRUCT_CONVERSATIONS",
        description="Prompts the target writes itself (Magpie) and answers, mixed with the training "
        "data; turns EAGLE_REGENERATE on unless it is set.",
    )
    self_instruct_openings: Literal["tasks", "tasks_and_chat", "chat", "none"] | None = Field(
        default=None,
        alias="EAGLE_SELF_INSTRUCT_OPENINGS",
        description="tasks: self-instruct prompts start with the first words of a kind of task (code, "
        "maths, writing, ...) and the target writes the rest; tasks_and_chat: those, and a third opening "
        "like casual conversation; chat: every prompt opens like casual conversation; none: the target "
        "writes whole prompts.",
    )
    variant: Literal["eagle3", "eagle2", "peagle"] | None = Field(
        default=None,
        alias="EAGLE_VARIANT",
        description="Draft architecture: eagle3 (a chain over three fused target layers), eagle2 (the "
        "target's last hidden state; the default for Qwen3NextForCausalLM, eagle3 for every other "
        "architecture) or peagle (P-EAGLE, all drafts from one head forward). Recorded in lineage.json "
        "as draft_variant.",
    )
    ttt_steps: int | None = Field(
        default=None, ge=1, le=10, alias="EAGLE_TTT_STEPS", description="Training-time-test unroll steps."
    )
    learning_rate: float | None = Field(
        default=None, gt=0, alias="EAGLE_LEARNING_RATE", description="Peak learning rate."
    )

    # Environment values are strings; parse them strictly ("2.5" is not an integer, "yes"
    # is not a boolean) instead of relying on pydantic's lenient coercions.
    @field_validator(
        "num_speculative_tokens",
        "draft_vocab_size",
        "ttt_steps",
        "self_instruct_conversations",
        mode="before",
    )
    @classmethod
    def _integers(cls, value: Any) -> Any:
        return _parse_int(value)

    @field_validator("train_max_minutes", "learning_rate", mode="before")
    @classmethod
    def _numbers(cls, value: Any) -> Any:
        return _parse_float(value)

    @field_validator("regenerate", mode="before")
    @classmethod
    def _booleans(cls, value: Any) -> Any:
        return _parse_bool(value)

    @classmethod
    def supported_keys(cls) -> list[str]:
        return sorted(str(field.alias) for field in cls.model_fields.values())

    @classmethod
    def from_environment(cls, environment: Mapping[str, str] | None) -> EagleKnobs:
        """The EAGLE_* entries of an OptimizationEnvironment; raises EagleKnobError listing the bad keys."""
        eagle_entries = {k: v for k, v in (environment or {}).items() if k.startswith(EAGLE_PREFIX)}
        try:
            return cls.model_validate(eagle_entries)
        except ValidationError as error:
            raise EagleKnobError(_describe(error, eagle_entries)) from None


class EagleKnobError(ValueError):
    """One or more EAGLE_* keys are unknown or malformed; ``problems`` holds (key, value, why)."""

    def __init__(self, problems: list[tuple[str, str, str]]) -> None:
        super().__init__("; ".join(f"{key}={value!r}: {why}" for key, value, why in problems))
        self.problems = problems


def _describe(error: ValidationError, entries: Mapping[str, str]) -> list[tuple[str, str, str]]:
    problems = []
    for detail in error.errors():
        key = str(detail["loc"][0]) if detail["loc"] else "?"
        if detail["type"] == "extra_forbidden":
            why = f"Unknown EAGLE_ key; supported keys: {', '.join(EagleKnobs.supported_keys())}"
        else:
            why = _FIELD_RULES.get(key, str(detail["msg"]))
        problems.append((key, entries.get(key, ""), why))
    return problems


_FIELD_RULES = {
    "EAGLE_TRAIN_MAX_MINUTES": "Member must be a positive number of minutes",
    "EAGLE_NUM_SPECULATIVE_TOKENS": "Member must be an integer between 1 and 16",
    "EAGLE_DRAFT_VOCAB_SIZE": "Member must be an integer between 256 and 262144",
    "EAGLE_REGENERATE": "Member must be true or false",
    "EAGLE_SELF_INSTRUCT_CONVERSATIONS": "Member must be an integer between 0 and 100000",
    "EAGLE_SELF_INSTRUCT_OPENINGS": "Member must satisfy enum value set: [tasks, tasks_and_chat, chat, none]",
    "EAGLE_VARIANT": "Member must satisfy enum value set: [eagle3, eagle2, peagle]",
    "EAGLE_TTT_STEPS": "Member must be an integer between 1 and 10",
    "EAGLE_LEARNING_RATE": "Member must be a positive number",
}
