"""``serving_benchmark(config) -> ServingReport``: each configuration on its own server, under guidellm.

For each configuration (No EAGLE, Base EAGLE, Trained EAGLE) a server starts with that
head, answers its warm-up (servebench/warm_up.py), then one guidellm run measures every concurrency level
while a poller reads the server's speculative-decoding counters; the server stops before
the next configuration starts, so the two never share the CPU. Every configuration gets
the same prompt file.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable
from pathlib import Path

from transformers import AutoTokenizer

from servebench.guidellm_process import GuidellmClient, ResidentGuidellm
from servebench.guidellm_run import (
    GUIDELLM_VERSION,
    LevelResult,
    guidellm_arguments,
    guidellm_environment,
    load_guidellm_report,
    run_guidellm,
)
from servebench.prompts import chat_prompt_texts, write_guidellm_data
from servebench.recommendation import no_eagle_reference, recommend
from servebench.servers import VLLM_MAX_MODEL_LEN, ServerSpec, serve, serve_in_process
from servebench.serving_config import BenchmarkConfiguration, ServingBenchmarkConfig
from servebench.serving_report import ServingReport, ServingRow
from servebench.spec_metrics import PREFIXES, CounterPoller, SpecCounters
from servebench.vllm_cpu.venv import VllmVenv, ensure_vllm_venv
from servebench.warm_up import warm_up, warm_up_requests
from trainer.data.loader import load_conversations
from trainer.device import device_type

logger = logging.getLogger(__name__)


def serving_benchmark(
    config: ServingBenchmarkConfig,
    should_stop: Callable[[], bool] | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> ServingReport:
    """Measure every configuration; ``progress(done, total)`` after each, ``should_stop()``
    checked before each (a stopped report says so and keeps the rows measured so far)."""
    started = time.monotonic()
    work = config.work_dir
    work.mkdir(parents=True, exist_ok=True)
    texts = _prompts(config)
    data_path = work / "prompts.jsonl"
    distinct = write_guidellm_data(
        texts, data_path, requests=config.requests_per_level, output_tokens=config.max_tokens
    )
    venv = ensure_vllm_venv(config.vllm_venv) if config.engine == "vllm" else None
    rows: list[ServingRow] = []
    artifacts: dict[str, str] = {"prompts": str(data_path)}
    stopped = False
    done: list[BenchmarkConfiguration] = []
    configurations = config.measured_configurations()
    # One guidellm process for every configuration: its imports are paid once.
    process_log = work / "guidellm-process.log"
    artifacts["guidellm process log"] = str(process_log)
    with ResidentGuidellm(process_log, guidellm_environment()) as client:
        for index, configuration in enumerate(configurations):
            if should_stop is not None and should_stop():
                stopped = True
                break
            rows += _measure(
                config,
                configuration=configuration,
                data_path=data_path,
                prompts=texts,
                venv=venv,
                artifacts=artifacts,
                client=client,
            )
            done.append(configuration)
            if progress is not None:
                progress(index + 1, len(configurations))
    _add_speedups(rows)
    measured = {(row.configuration, row.concurrency) for row in rows}
    unmeasured = [
        f"{configuration.name} at concurrency {level}"
        for configuration in done
        for level in config.concurrency
        if (configuration.name, level) not in measured
    ]
    baseline = next((c.name for c in config.configurations if c.head_dir is None), None)
    return ServingReport(
        engine=config.engine,
        model_dir=str(config.model_dir),
        load_generator=f"guidellm {GUIDELLM_VERSION}",
        concurrency_levels=list(config.concurrency),
        requests_per_level=config.requests_per_level,
        max_tokens=config.max_tokens,
        stop_at_eos=config.stop_at_eos,
        prompts=distinct,
        prompt_source=[str(path) for path in config.prompt_paths],
        seconds=time.monotonic() - started,
        stopped=stopped,
        artifacts=artifacts,
        rows=rows,
        unmeasured=unmeasured,
        recommendation=None
        if baseline is None
        else recommend(rows, baseline, min_speedup=config.min_speedup),
    )


def _prompts(config: ServingBenchmarkConfig) -> list[str]:
    tokenizer = AutoTokenizer.from_pretrained(config.model_dir)
    conversations = load_conversations(config.prompt_paths).conversations
    texts = chat_prompt_texts(
        tokenizer, conversations, max_prompt_tokens=VLLM_MAX_MODEL_LEN - config.max_tokens
    )[: config.max_prompts]
    if not texts:
        raise ValueError(
            f"no prompts: none of the {len(conversations)} conversations in "
            f"{', '.join(str(p) for p in config.prompt_paths)} has a user turn that fits "
            f"{VLLM_MAX_MODEL_LEN - config.max_tokens} tokens"
        )
    return texts


def _measure(
    config: ServingBenchmarkConfig,
    *,
    configuration: BenchmarkConfiguration,
    data_path: Path,
    prompts: list[str],
    venv: VllmVenv | None,
    artifacts: dict[str, str],
    client: GuidellmClient,
) -> list[ServingRow]:
    k = config.speculative_tokens(configuration)
    spec = ServerSpec(
        model_dir=config.model_dir,
        served_model_name=config.model_dir.name,
        head_dir=configuration.head_dir,
        num_speculative_tokens=k,
        max_batch_size=config.max_batch_size,
        num_threads=config.num_threads,
        device=config.device,
    )
    slug = file_slug(configuration.name)
    output_path = config.work_dir / f"guidellm-{slug}.json"
    server_context = (
        serve_in_process(spec, log_dir=config.work_dir / "logs")
        if config.in_process and config.engine == "eaglenest"
        else serve(
            config.engine,
            spec,
            log_dir=config.work_dir / "logs",
            vllm_venv=venv,
            startup_timeout=config.startup_timeout_seconds,
        )
    )
    with server_context as server:
        artifacts[f"{slug} server log"] = str(server.log_path)
        gpu = device_type(config.device) == "cuda"
        warm_up(
            server,
            warm_up_requests(prompts, gpu=gpu, concurrency=config.concurrency, max_tokens=config.max_tokens),
        )
        arguments = guidellm_arguments(
            target=server.url,
            model_name=server.served_model_name,
            tokenizer_dir=config.model_dir,
            data_path=data_path,
            output_path=output_path,
            concurrency=config.concurrency,
            requests_per_level=config.requests_per_level,
            max_seconds_per_level=config.max_seconds_per_level,
            stop_at_eos=config.stop_at_eos,
        )
        with CounterPoller(server.url, PREFIXES[config.engine]) as poller:
            run_guidellm(arguments, config.work_dir / f"guidellm-{slug}.log", client=client)
    artifacts[f"{slug} guidellm"] = str(output_path)
    levels = load_guidellm_report(output_path)
    rows = []
    for level in levels:
        counters = None
        if configuration.head_dir is not None:
            counters = poller.window(level.first_request_start, level.last_request_end)
        rows.append(_row(configuration, level, counters, k))
    return rows


def file_slug(name: str) -> str:
    """A configuration name as part of a file name: "Trained EAGLE (K=3)" -> "trained-eagle-k-3";
    a name may hold anything (a head's path, say), a file name must not hold a slash."""
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "configuration"


def _row(
    configuration: BenchmarkConfiguration, level: LevelResult, counters: SpecCounters | None, k: int | None
) -> ServingRow:
    return ServingRow(
        configuration=configuration.name,
        concurrency=level.concurrency,
        head_dir=None if configuration.head_dir is None else str(configuration.head_dir),
        ttft_ms=level.ttft_ms,
        tpot_ms=level.tpot_ms,
        itl_ms=level.itl_ms,
        request_throughput=level.request_throughput,
        output_throughput=level.output_throughput,
        otps_per_request=level.otps_per_request,
        successful_requests=level.successful_requests,
        errored_requests=level.errored_requests,
        incomplete_requests=level.incomplete_requests,
        output_tokens_mean=level.output_tokens_mean,
        prompt_tokens_mean=level.prompt_tokens_mean,
        mean_acceptance_length=None if counters is None else counters.mean_acceptance_length,
        acceptance_by_position=[] if counters is None else counters.acceptance_by_position,
        num_speculative_tokens=k,
        adaptive=configuration.head_dir is not None and k is None,
        mean_draft_tokens=None if counters is None else counters.mean_draft_tokens,
    )


def _add_speedups(rows: list[ServingRow]) -> None:
    """Against the configuration without a head (No EAGLE), level by level: its faster run
    where it was measured twice."""
    baseline = no_eagle_reference(rows)
    for row in rows:
        if row.concurrency in baseline and baseline[row.concurrency] > 0:
            row.speedup_vs_no_eagle = row.output_throughput / baseline[row.concurrency]
