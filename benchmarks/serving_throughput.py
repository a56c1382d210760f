"""Throughput of the batched serving engine on SmolLM2-135M-Instruct at concurrency 1/2/4/8.

    .venv/bin/python benchmarks/serving_throughput.py [--head DIR] [--k 3] \\
        [--concurrency 1 2 4 8] [--requests 8] [--max-new-tokens 64] [--rounds 1] [--step-costs] \\
        [--temperature 0 --top-p 1] [--json out.json]

Drives ``ServingEngine`` in-process (no HTTP), closed loop: ``c`` requests in flight,
a new one submitted as soon as one finishes, until ``--requests`` per level have run.
Greedy unless ``--temperature`` is above 0 (then request i samples with seed i, so the
configurations draw alike), ``ignore_eos`` (every request makes exactly ``--max-new-tokens`` tokens), chat
prompts (at most 256 tokens) from the head run's ``heldout.jsonl`` when there is one, else from ``--data``.
Configurations: plain decoding, then with ``--head`` fixed K and adaptive K, each on a
freshly loaded engine. Prints one row per (configuration, concurrency): output tokens/s,
per-request tokens/s, mean TTFT and inter-token latency, tau, mean K. Not a guidellm run:
part B's benchmark measures over HTTP; this isolates the engine.
"""

from __future__ import annotations

import argparse
import json
import queue
import statistics
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
from transformers import AutoTokenizer

from engine.sampling import SamplingParams
from serving import GenerationRequest, RequestHandle, ServingEngine, TokenEvent, load_engine
from serving.speculation import SpeculationPolicy
from speculative.evaluation import chat_prompts
from trainer.data import load_conversations

MODEL_DIR = Path(".cache/models/smollm2-135m-instruct")
DEFAULT_DATA = Path(".cache/data/chitchat.jsonl")
MAX_PROMPT_TOKENS = 256
# name, head directory, fixed K (None: adaptive or plain), adaptive
Configuration = tuple[str, Path | None, int | None, bool]


@dataclass
class Row:
    configuration: str
    concurrency: int
    requests: int
    output_tokens_per_second: float
    tokens_per_second_per_request: float
    ttft_ms: float
    itl_ms: float
    tau: float
    mean_k: float
    # Mean wall ms of a decoding step, by the K it drafted (the engine's own timing).
    step_ms_by_k: dict[int, float] = field(default_factory=dict)


class StepLog:
    """The engine's speculation policy, passed through, keeping each timed step's (K, seconds)."""

    def __init__(self, inner: SpeculationPolicy) -> None:
        self.inner, self.max_tokens = inner, inner.max_tokens
        self.steps: list[tuple[int, float]] = []

    def num_tokens(self, batch_size: int) -> int:
        return self.inner.num_tokens(batch_size)

    def observe(self, proposed: int, accepted: int) -> None:
        self.inner.observe(proposed, accepted)

    def observe_step(self, batch_size: int, num_tokens: int, seconds: float) -> None:
        self.steps.append((num_tokens, seconds))
        self.inner.observe_step(batch_size, num_tokens, seconds)

    def mean_ms_by_k(self, since: int) -> dict[int, float]:
        by_k: dict[int, list[float]] = {}
        for k, seconds in self.steps[since:]:
            by_k.setdefault(k, []).append(seconds)
        return {k: 1000 * statistics.mean(times) for k, times in sorted(by_k.items())}


class _Timing:
    def __init__(self) -> None:
        self.submitted = time.perf_counter()
        self.first: float | None = None
        self.finished = 0.0


def run_level(  # noqa: PLR0917 - a level's settings, as _measure passes them
    engine: ServingEngine,
    prompts: list[list[int]],
    concurrency: int,
    count: int,
    new: int,
    sampling: SamplingParams = SamplingParams(),  # noqa: B008 - frozen, never mutated
) -> Row:
    done: queue.Queue[RequestHandle] = queue.Queue()
    timings: dict[int, _Timing] = {}
    handles: list[RequestHandle] = []

    def submit(index: int) -> None:
        timing = _Timing()
        holder: list[RequestHandle] = []

        def on_event(event: TokenEvent) -> None:
            now = time.perf_counter()
            if timing.first is None and event.token_ids:
                timing.first = now
            if event.finish_reason is not None:
                timing.finished = now
                done.put(holder[0])

        request = GenerationRequest(
            prompts[index % len(prompts)], new, ignore_eos=True, sampling=sampling, seed=index
        )
        handle = engine.submit(request, on_event)
        holder.append(handle)
        timings[handle.id] = timing
        handles.append(handle)

    log = engine.speculation if isinstance(engine.speculation, StepLog) else None
    logged_before = len(log.steps) if log is not None else 0
    steps_before = engine.metrics.num_steps._value.get()
    k_before = engine.metrics.speculative_tokens._value.get()
    started = time.perf_counter()
    submitted = 0
    for _ in range(min(concurrency, count)):
        submit(submitted)
        submitted += 1
    for _ in range(count):
        done.get().wait()
        if submitted < count:
            submit(submitted)
            submitted += 1
    wall = time.perf_counter() - started
    tokens = sum(len(h.token_ids) for h in handles)
    per_request = [len(h.token_ids) / (timings[h.id].finished - timings[h.id].submitted) for h in handles]
    ttft = [(timings[h.id].first or 0.0) - timings[h.id].submitted for h in handles]
    itl = [(timings[h.id].finished - (timings[h.id].first or 0.0)) / (len(h.token_ids) - 1) for h in handles]
    accepted = [a for h in handles for a in h.stats.accepted_per_step]
    steps = engine.metrics.num_steps._value.get() - steps_before
    k_sum = engine.metrics.speculative_tokens._value.get() - k_before
    return Row(
        configuration="",
        concurrency=concurrency,
        requests=count,
        output_tokens_per_second=tokens / wall,
        tokens_per_second_per_request=statistics.mean(per_request),
        ttft_ms=1000 * statistics.mean(ttft),
        itl_ms=1000 * statistics.mean(itl),
        tau=(sum(accepted) + len(accepted)) / len(accepted) if accepted else 0.0,
        mean_k=k_sum / steps if steps else 0.0,
        step_ms_by_k=log.mean_ms_by_k(logged_before) if log is not None else {},
    )


def load_prompts(head: Path | None, data: Path, limit: int) -> list[list[int]]:
    heldout = head.parent / "heldout.jsonl" if head is not None else None
    source = heldout if heldout is not None and heldout.is_file() else data
    tokenizer = AutoTokenizer.from_pretrained(MODEL_DIR)
    # Long multi-turn histories would measure prefill, not decoding: keep prompts a chat
    # request typically has.
    every = chat_prompts(tokenizer, load_conversations([source]).conversations)
    prompts = [prompt for prompt in every if len(prompt) <= MAX_PROMPT_TOKENS][:limit]
    print(f"prompts: {len(prompts)} from {source}")
    return prompts


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--head", type=Path, default=None, help="EAGLE-3 head directory")
    parser.add_argument(
        "--data", type=Path, default=DEFAULT_DATA, help="prompts when the head has no heldout"
    )
    parser.add_argument("--k", type=int, default=3, help="K of the fixed-K configuration")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 2, 4, 8])
    parser.add_argument("--requests", type=int, default=8, help="requests per concurrency level")
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="run the configurations this many times in turn (a drifting machine shows in each "
        "round alike, and the ratios are read within a round)",
    )
    parser.add_argument(
        "--step-costs", action="store_true", help="also print each level's mean decoding-step ms by K"
    )
    parser.add_argument("--temperature", type=float, default=0.0, help="0: greedy")
    parser.add_argument("--top-p", type=float, default=1.0)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error(f"--rounds must be at least 1, got {args.rounds}")

    prompts = load_prompts(args.head, args.data, limit=64)
    configurations: list[Configuration] = [("plain", None, None, False)]
    if args.head is not None:
        configurations += [
            (f"eagle K={args.k}", args.head, args.k, False),
            ("eagle adaptive", args.head, None, True),
        ]
    rows: list[Row] = []
    print(f"torch threads: {torch.get_num_threads()}")
    for round_index in range(args.rounds):
        for configuration in configurations:
            label = configuration[0] if args.rounds == 1 else f"{configuration[0]} r{round_index + 1}"
            rows += _measure(label, configuration, prompts, args)
    print()
    print(_header())
    for row in rows:
        print(_format(row))
    if args.json is not None:
        args.json.write_text(json.dumps([asdict(row) for row in rows], indent=2) + "\n")


def _measure(
    label: str, configuration: Configuration, prompts: list[list[int]], args: argparse.Namespace
) -> list[Row]:
    """Every concurrency level of one configuration on a freshly loaded engine."""
    _, head, k, adaptive = configuration
    rows: list[Row] = []
    engine = load_engine(
        MODEL_DIR, head, num_speculative_tokens=k, adaptive=adaptive, max_batch_size=max(args.concurrency)
    )
    engine.speculation = StepLog(engine.speculation)
    with engine:
        engine.generate(GenerationRequest(prompts[0], 8, ignore_eos=True))  # warm-up
        for concurrency in args.concurrency:
            count = max(args.requests, concurrency)
            sampling = SamplingParams(args.temperature, args.top_p)
            row = run_level(engine, prompts, concurrency, count, args.max_new_tokens, sampling)
            row.configuration = label
            rows.append(row)
            print(_format(row), flush=True)
            if args.step_costs:
                print(_format_step_costs(row), flush=True)
    return rows


def _format_step_costs(row: Row) -> str:
    costs = ", ".join(f"K={k} {ms:.1f}" for k, ms in row.step_ms_by_k.items())
    return f"    step ms by K: {costs or 'no decoding step timed'}"


def _header() -> str:
    return (
        f"{'configuration':<19} {'conc':>4} {'out tok/s':>10} {'tok/s/req':>10} "
        f"{'TTFT ms':>8} {'ITL ms':>7} {'tau':>5} {'mean K':>6}"
    )


def _format(row: Row) -> str:
    return (
        f"{row.configuration:<19} {row.concurrency:>4} {row.output_tokens_per_second:>10.1f} "
        f"{row.tokens_per_second_per_request:>10.1f} {row.ttft_ms:>8.0f} {row.itl_ms:>7.1f} "
        f"{row.tau:>5.2f} {row.mean_k:>6.2f}"
    )


if __name__ == "__main__":
    main()
