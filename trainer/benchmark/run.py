"""``benchmark(config) -> BenchmarkReport``: every configuration on the same prompts, greedily.

The target is loaded once and shared; each configuration decodes each prompt in turn
(prompt-major order), so a change in machine load or an early stop hits every
configuration alike and all of them keep the same prompts. The first, shorter request of
every configuration is a warm-up and is not counted.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from trainer.benchmark.config import BenchmarkConfig, BenchmarkConfiguration
from trainer.benchmark.metrics import serving_metrics
from trainer.benchmark.report import BenchmarkReport, BenchmarkRow
from trainer.benchmark.timing import TimedDecoder, TimedGeneration
from trainer.data.loader import load_conversations
from trainer.eagle.export import load_head
from trainer.engine.evaluation import chat_prompts

logger = logging.getLogger(__name__)

ENGINE = "eaglenest batch-1 speculative decoder (trainer.engine), greedy, requests back to back"
BASELINE = "No EAGLE"
WARMUP_TOKENS = 8


def benchmark(
    config: BenchmarkConfig,
    should_stop: Callable[[], bool] | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> BenchmarkReport:
    """Run every configuration on the same prompts; ``progress(done, total)`` after each prompt,
    ``should_stop()`` checked before each (a stopped report says so in ``stopped``)."""
    started = time.monotonic()
    stop_requested = should_stop or (lambda: False)
    if config.num_threads is not None:
        torch.set_num_threads(config.num_threads)
    tokenizer = AutoTokenizer.from_pretrained(config.model_dir)
    conversations = load_conversations(config.prompt_paths).conversations
    offered = chat_prompts(tokenizer, conversations)
    prompts = offered[: config.max_prompts]
    if not prompts:
        raise ValueError(
            f"no prompts: none of the {len(conversations)} conversations in "
            f"{', '.join(str(p) for p in config.prompt_paths)} has a user turn"
        )
    target = AutoModelForCausalLM.from_pretrained(config.model_dir, dtype=getattr(torch, config.dtype))
    target.eval().requires_grad_(False)  # type: ignore[no-untyped-call]
    decoders = [
        _decoder(configuration, target, config.num_speculative_tokens)
        for configuration in config.configurations
    ]
    for configuration, decoder in zip(config.configurations, decoders, strict=True):
        decoder.timed(prompts[0], max_new_tokens=WARMUP_TOKENS, speculate=configuration.head_dir is not None)

    generations: list[list[TimedGeneration]] = [[] for _ in config.configurations]
    stopped = False
    for index, prompt in enumerate(prompts):
        if stop_requested():
            stopped = True
            break
        if index > 0 and _past(started, config.time_budget_seconds):
            logger.info("benchmark budget used up after %d of %d prompts", index, len(prompts))
            break
        for configuration, decoder, done in zip(config.configurations, decoders, generations, strict=True):
            done.append(
                decoder.timed(
                    prompt, max_new_tokens=config.max_new_tokens, speculate=configuration.head_dir is not None
                )
            )
        if progress is not None:
            progress(index + 1, len(prompts))
    return BenchmarkReport(
        engine=ENGINE,
        concurrency_levels=list(config.concurrency),
        num_speculative_tokens=config.num_speculative_tokens,
        max_new_tokens=config.max_new_tokens,
        prompts=len(generations[0]),
        prompts_offered=len(offered),
        dtype=config.dtype,
        threads=torch.get_num_threads(),
        seconds=time.monotonic() - started,
        stopped=stopped,
        rows=_rows(config.configurations, generations),
    )


def _decoder(configuration: BenchmarkConfiguration, target: torch.nn.Module, k: int) -> TimedDecoder:
    head = None if configuration.head_dir is None else load_head(configuration.head_dir, target)  # type: ignore[arg-type]
    k = configuration.num_speculative_tokens or k
    return TimedDecoder(target, head, num_speculative_tokens=k)  # type: ignore[arg-type]


def _past(started: float, budget: float | None) -> bool:
    return budget is not None and time.monotonic() - started >= budget


def _rows(
    configurations: Sequence[BenchmarkConfiguration], generations: Sequence[Sequence[TimedGeneration]]
) -> list[BenchmarkRow]:
    baseline = next(
        (
            done
            for configuration, done in zip(configurations, generations, strict=True)
            if configuration.head_dir is None
        ),
        None,
    )
    baseline_throughput = serving_metrics(baseline).output_throughput if baseline else None
    rows = []
    for configuration, done in zip(configurations, generations, strict=True):
        metrics = serving_metrics(done)
        identical = None
        speedup = None
        if baseline is not None and configuration.head_dir is not None:
            identical = sum(
                int(mine.result.token_ids == plain.result.token_ids)
                for mine, plain in zip(done, baseline, strict=True)
            )
        if baseline_throughput:
            speedup = metrics.output_throughput / baseline_throughput
        rows.append(
            BenchmarkRow(
                configuration=configuration.name,
                concurrency=1,
                head_dir=None if configuration.head_dir is None else str(configuration.head_dir),
                metrics=metrics.to_json(),
                speedup_vs_no_eagle=speedup,
                identical_outputs=identical,
            )
        )
    return rows
