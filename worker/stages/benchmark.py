"""Stage 'benchmark': No EAGLE vs Base EAGLE (the job's base head, if any) vs Trained EAGLE.

Each configuration is served by our continuous-batching engine (``python -m trainer
serve``) and driven by guidellm at fixed concurrency levels (1, 2, 4, 8 unless the worker's
``benchmark_overrides`` say otherwise) on the held-out conversations training never saw:
``servebench.serving_benchmark``. The stage stages ``benchmark/results.json`` (the
SageMaker table's columns per configuration and level, plus acceptance length and
acceptance by position) and ``results.csv``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from core.job_errors import JobFailedError
from core.output_layout import BENCHMARK_CSV, BENCHMARK_JSON
from servebench import BASELINE, BenchmarkConfiguration
from servebench.guidellm_run import GuidellmError
from servebench.serving_config import ServingBenchmarkConfig
from servebench.serving_report import ServingReport, ServingRow
from servebench.serving_run import serving_benchmark
from trainer.data.files import read_text
from worker.artifacts import BenchmarkOutput, required
from worker.context import JobContext

BASE_HEAD = "Base EAGLE"
TRAINED_HEAD = "Trained EAGLE"
# Kept back from MaxRuntimeInSeconds for publishing; the benchmark gets most of the rest.
PUBLISH_RESERVE_SECONDS = 30.0
BENCHMARK_SHARE = 0.8
# Per configuration, before its levels run: starting a server (model load) and guidellm.
SERVER_START_SECONDS = 20.0
MIN_SECONDS_PER_LEVEL = 5.0
# Fixed K measured beside adaptive K for every head, so that the job can recommend the best
# K at each concurrency level, or no speculative decoding where no K pays off.
JOB_K_SWEEP = (1, 2, 3, 4, 5)


def benchmark_head(ctx: JobContext) -> None:
    work = ctx.work_dir / "benchmark"
    json_path, csv_path = work / "results.json", work / "results.csv"
    if ctx.s3.head(ctx.layout.staged(BENCHMARK_JSON)) is not None:
        ctx.s3.download(ctx.layout.staged(BENCHMARK_JSON), json_path)
        ctx.s3.download(ctx.layout.staged(BENCHMARK_CSV), csv_path)
        document = json.loads(json_path.read_text())
        ctx.artifacts.benchmark = BenchmarkOutput(report=document, json_path=json_path, csv_path=csv_path)
        ctx.report("Benchmark finished in an earlier run of this job; reusing its results", fraction=1.0)
        return
    config, prompt_source = _config(ctx, work / "serving")
    names = ", ".join(c.name for c in config.measured_configurations())
    levels = ", ".join(str(level) for level in config.concurrency)
    ctx.report(f"Benchmarking {names} at concurrency {levels} on {prompt_source}", fraction=0.05)
    try:
        report = serving_benchmark(
            config,
            ctx.should_stop,
            lambda done, total: ctx.report(
                f"Benchmark: {done} of {total} configurations measured", fraction=done / total
            ),
        )
    except (ValueError, GuidellmError, RuntimeError) as error:
        raise JobFailedError(f"Benchmark failed: {error}") from error
    if report.stopped:
        ctx.check()
    document = _document(ctx, config, report, prompt_source)
    work.mkdir(parents=True, exist_ok=True)
    json_path.write_text(json.dumps(document, indent=2) + "\n")
    csv_path.write_text(report.to_csv())
    ctx.s3.upload_file(csv_path, ctx.layout.staged(BENCHMARK_CSV))
    ctx.s3.upload_file(json_path, ctx.layout.staged(BENCHMARK_JSON))  # last: the stage's marker
    ctx.artifacts.benchmark = BenchmarkOutput(report=document, json_path=json_path, csv_path=csv_path)
    ctx.report(_summary(report), fraction=1.0)


def _summary(report: ServingReport) -> str:
    """One line for the job's events: the trained head at its first measured level, the advice,
    the levels a deadline left unmeasured and the rows that measured fewer requests than sent."""
    trained = next((row for row in report.rows if row.configuration == TRAINED_HEAD), None)
    advice = report.recommendation
    parts = [_trained_summary(trained)]
    if advice is not None:
        parts.append(f"Recommended: {advice.summary}")
    if report.unmeasured:
        parts.append(f"Not measured (time limit): {', '.join(report.unmeasured)}")
    parts.extend(report.request_shortfalls)
    return ". ".join(parts)


def _trained_summary(trained: ServingRow | None) -> str:
    if trained is None:
        return "Trained EAGLE: no level measured"
    # Adaptive K decodes plainly where it measures drafting as a loss, and then has no acceptance.
    acceptance = (
        "drafted on no step (adaptive K measured drafting as a loss)"
        if trained.mean_acceptance_length is None
        else f"acceptance length {trained.mean_acceptance_length:.2f}"
    )
    return (
        f"Trained EAGLE (adaptive K) at concurrency {trained.concurrency}: {acceptance}, "
        f"{trained.output_throughput:.1f} tokens/s ({trained.speedup_vs_no_eagle or 0:.2f}x No EAGLE)"
    )


def _config(ctx: JobContext, work_dir: Path) -> tuple[ServingBenchmarkConfig, str]:
    model = required(ctx.artifacts.model, "the base model")
    trained = required(ctx.artifacts.train, "the trained head")
    # Each head is served with adaptive K (the engine's default) and at the job's
    # EAGLE_NUM_SPECULATIVE_TOKENS; the trained head, whose K the published config carries, also
    # at every K of the sweep (sweeping the Base EAGLE too would nearly double the benchmark).
    overrides = ctx.settings.benchmark_overrides
    job_k = [] if ctx.knobs.num_speculative_tokens is None else [ctx.knobs.num_speculative_tokens]
    k_sweep = [*overrides.get("k_sweep", JOB_K_SWEEP), *job_k]
    configurations = [BenchmarkConfiguration(name=BASELINE)]
    if ctx.artifacts.base_head is not None:
        configurations.append(
            BenchmarkConfiguration(name=BASE_HEAD, head_dir=ctx.artifacts.base_head.local_dir, k_sweep=job_k)
        )
    configurations.append(BenchmarkConfiguration(name=TRAINED_HEAD, head_dir=trained.head_dir))
    prompt_paths, prompt_source = _prompts(ctx, trained.heldout_path)
    fields: dict[str, Any] = {
        **overrides,
        "k_sweep": k_sweep,
        "engine": "eaglenest",
        # On the worker's device (EAGLENEST_DEVICE), as the job trained: a GPU job measured on
        # the CPU would publish CPU speeds and a K chosen for them.
        "device": ctx.settings.device,
        # The worker has torch and transformers loaded: a thread serves without a process start.
        "in_process": True,
        "model_dir": required(model.local_dir, "the cached base model"),
        "prompt_paths": prompt_paths,
        "configurations": configurations,
        "work_dir": work_dir,
    }
    try:
        config = ServingBenchmarkConfig.model_validate(fields)
    except ValidationError as error:
        raise JobFailedError(f"Invalid benchmark configuration (benchmark_overrides): {error}") from None
    return _within_deadline(ctx, config), prompt_source


def _within_deadline(ctx: JobContext, config: ServingBenchmarkConfig) -> ServingBenchmarkConfig:
    """Cap every concurrency level's duration so the whole benchmark ends before the job's
    MaxRuntimeInSeconds leaves too little to publish: fewer requests, not a killed job."""
    seconds_left = ctx.seconds_left()
    if seconds_left is None:
        return config
    budget = (seconds_left - PUBLISH_RESERVE_SECONDS) * BENCHMARK_SHARE
    runs = len(config.measured_configurations())
    per_level = (budget - runs * SERVER_START_SECONDS) / (runs * len(config.concurrency))
    per_level = max(MIN_SECONDS_PER_LEVEL, per_level)
    if config.max_seconds_per_level is not None:
        per_level = min(per_level, config.max_seconds_per_level)
    return config.model_copy(update={"max_seconds_per_level": per_level})


def _prompts(ctx: JobContext, heldout: Path) -> tuple[list[Path], str]:
    """Held-out conversations when training kept any; with very little data it keeps none,
    and the benchmark then says that it ran on training prompts."""
    if heldout.is_file() and read_text(heldout).strip():
        return [heldout], "held-out conversations (never trained on)"
    data = required(ctx.artifacts.data, "the training data")
    return list(data.files), "training conversations (too little data to hold any out)"


def _document(
    ctx: JobContext, config: ServingBenchmarkConfig, report: ServingReport, prompt_source: str
) -> dict[str, Any]:
    trained = required(ctx.artifacts.train, "the trained head")
    head_uris: dict[str | None, str] = {str(trained.head_dir): ctx.layout.head_uri}
    if ctx.artifacts.base_head is not None:
        head_uris[str(ctx.artifacts.base_head.local_dir)] = ctx.artifacts.base_head.location.uri
    # Local paths of the worker (model cache, logs) mean nothing to the job's user.
    document = report.model_dump(mode="json", exclude={"artifacts", "model_dir"})
    for row in document["rows"]:
        row["head_dir"] = head_uris.get(row["head_dir"])
    model = required(ctx.artifacts.model, "the base model")
    k = ctx.knobs.num_speculative_tokens
    return {
        **document,
        "model": model.location.uri,
        "prompt_source": prompt_source,
        "num_speculative_tokens": "adaptive" if k is None else k,
        "max_seconds_per_level": config.max_seconds_per_level,
        "note": (
            "Served by eaglenest's continuous-batching engine, one server per configuration; guidellm "
            f"kept each concurrency level's requests in flight (greedy; {report.tokens_per_request()}) "
            "and measured TTFT, TPOT, ITL and throughput; acceptance comes from the server's "
            "speculative-decoding counters over the same level."
        ),
    }
