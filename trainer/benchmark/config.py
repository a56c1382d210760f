"""What a benchmark run measures: which heads, on which prompts, how long the answers are."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

# The batch-1 engine serves one request at a time; a serving engine with continuous
# batching (and load generation at several concurrency levels) replaces it later.
SUPPORTED_CONCURRENCY = (1,)


class BenchmarkConfiguration(BaseModel):
    """One row group of the table: plain decoding (no head) or speculative decoding with a head."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(description='Row label, e.g. "No EAGLE", "Base EAGLE", "Trained EAGLE".')
    head_dir: Path | None = Field(
        default=None, description="EAGLE-3 head directory; None decodes without speculation."
    )
    num_speculative_tokens: int | None = Field(
        default=None,
        ge=1,
        le=16,
        description="K for this configuration alone (e.g. a fixed-K row beside an adaptive one); "
        "None: the benchmark's.",
    )


class BenchmarkConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    model_dir: Path = Field(description="Target model directory (Hugging Face format).")
    prompt_paths: list[Path] = Field(
        min_length=1,
        description="Conversation files; each prompt is a conversation up to its last assistant turn.",
    )
    configurations: list[BenchmarkConfiguration] = Field(min_length=1, description="What to compare.")
    num_speculative_tokens: int = Field(default=3, ge=1, le=16, description="Draft tokens per step (K).")
    max_prompts: int = Field(default=16, ge=1, description="Use at most this many prompts.")
    max_new_tokens: int = Field(default=64, ge=2, description="Tokens generated per request.")
    concurrency: list[int] = Field(
        default_factory=lambda: list(SUPPORTED_CONCURRENCY),
        min_length=1,
        description="Concurrency levels to measure; this engine supports 1.",
    )
    time_budget_seconds: float | None = Field(
        default=None,
        gt=0,
        description="Start no new prompt after this long (every configuration keeps the same prompts).",
    )
    dtype: Literal["float32", "bfloat16"] = Field(default="float32", description="Dtype of target and heads.")
    num_threads: int | None = Field(default=None, ge=1, description="torch CPU threads; default torch's.")

    @model_validator(mode="after")
    def _check(self) -> BenchmarkConfig:
        unsupported = sorted(set(self.concurrency) - set(SUPPORTED_CONCURRENCY))
        if unsupported:
            raise ValueError(
                f"concurrency {unsupported} is not supported: the batch-1 speculative decoder serves "
                "one request at a time (concurrency 1)"
            )
        names = [configuration.name for configuration in self.configurations]
        if len(set(names)) != len(names):
            raise ValueError(f"configuration names must be unique, got {names}")
        return self
