"""Stage 'benchmark': No EAGLE vs Base EAGLE (the eagle_model head, if any) vs Trained EAGLE.

Calls ``trainer.benchmark.benchmark`` on the held-out conversations training never saw
and stages ``benchmark/results.json`` and ``results.csv``. Which engine and concurrency
produced the numbers is written into results.json.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from trainer.benchmark import BASELINE, BenchmarkConfig, BenchmarkConfiguration, BenchmarkReport, benchmark
from trainer.data.files import read_text
from worker.artifacts import BenchmarkOutput, required
from worker.context import JobContext
from worker.errors import JobFailedError
from worker.output_layout import BENCHMARK_CSV, BENCHMARK_JSON

DEFAULT_NUM_SPECULATIVE_TOKENS = 3
BASE_HEAD = "Base EAGLE"
TRAINED_HEAD = "Trained EAGLE"
# Kept back from MaxRuntimeInSeconds for publishing; the benchmark gets most of the rest.
PUBLISH_RESERVE_SECONDS = 30.0
BENCHMARK_SHARE = 0.8


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
    config, prompt_source = _config(ctx)
    names = ", ".join(c.name for c in config.configurations)
    ctx.report(f"Benchmarking {names} on {prompt_source} (concurrency 1)", fraction=0.05)
    try:
        report = benchmark(
            config,
            ctx.should_stop,
            lambda done, total: ctx.report(
                f"Benchmark: {done} of {total} prompts decoded", fraction=done / total
            ),
        )
    except ValueError as error:
        raise JobFailedError(f"Benchmark failed: {error}") from error
    if report.stopped:
        ctx.check()
    document = _document(ctx, report, prompt_source)
    work.mkdir(parents=True, exist_ok=True)
    json_path.write_text(json.dumps(document, indent=2) + "\n")
    csv_path.write_text(report.to_csv())
    ctx.s3.upload_file(csv_path, ctx.layout.staged(BENCHMARK_CSV))
    ctx.s3.upload_file(json_path, ctx.layout.staged(BENCHMARK_JSON))  # last: the stage's marker
    ctx.artifacts.benchmark = BenchmarkOutput(report=document, json_path=json_path, csv_path=csv_path)
    trained = report.row(TRAINED_HEAD).metrics
    ctx.report(
        f"Trained EAGLE: acceptance length {trained['acceptance_length'] or 0:.2f}, "
        f"{trained['output_throughput']:.1f} tokens/s over {report.prompts} prompts",
        fraction=1.0,
    )


def _config(ctx: JobContext) -> tuple[BenchmarkConfig, str]:
    model = required(ctx.artifacts.model, "the base model")
    trained = required(ctx.artifacts.train, "the trained head")
    configurations = [BenchmarkConfiguration(name=BASELINE)]
    if ctx.artifacts.base_head is not None:
        configurations.append(
            BenchmarkConfiguration(name=BASE_HEAD, head_dir=ctx.artifacts.base_head.local_dir)
        )
    configurations.append(BenchmarkConfiguration(name=TRAINED_HEAD, head_dir=trained.head_dir))
    prompt_paths, prompt_source = _prompts(ctx, trained.heldout_path)
    fields: dict[str, Any] = {
        "num_speculative_tokens": ctx.knobs.num_speculative_tokens or DEFAULT_NUM_SPECULATIVE_TOKENS,
        **ctx.settings.benchmark_overrides,
        "model_dir": required(model.local_dir, "the cached base model"),
        "prompt_paths": prompt_paths,
        "configurations": configurations,
    }
    seconds_left = ctx.seconds_left()
    if seconds_left is not None:
        budget = max(1.0, (seconds_left - PUBLISH_RESERVE_SECONDS) * BENCHMARK_SHARE)
        fields["time_budget_seconds"] = min(budget, fields.get("time_budget_seconds") or budget)
    try:
        return BenchmarkConfig.model_validate(fields), prompt_source
    except ValidationError as error:
        raise JobFailedError(f"Invalid benchmark configuration (benchmark_overrides): {error}") from None


def _prompts(ctx: JobContext, heldout: Path) -> tuple[list[Path], str]:
    """Held-out conversations when training kept any; with very little data it keeps none,
    and the benchmark then says that it ran on training prompts."""
    if heldout.is_file() and read_text(heldout).strip():
        return [heldout], "held-out conversations (never trained on)"
    data = required(ctx.artifacts.data, "the training data")
    return list(data.files), "training conversations (too little data to hold any out)"


def _document(ctx: JobContext, report: BenchmarkReport, prompt_source: str) -> dict[str, Any]:
    head_uris = {BASELINE: None, TRAINED_HEAD: ctx.layout.head_uri}
    if ctx.artifacts.base_head is not None:
        head_uris[BASE_HEAD] = ctx.artifacts.base_head.location.uri
    document = report.model_dump(mode="json")
    for row in document["rows"]:
        row["head_dir"] = head_uris.get(row["configuration"])
    document["prompt_source"] = prompt_source
    document["note"] = (
        "Measured with the batch-1 engine at concurrency 1 (one request at a time, greedy); "
        "metrics come from per-token-chunk timestamps. Higher concurrency needs a serving engine "
        "with continuous batching."
    )
    return document
