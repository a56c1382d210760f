"""The issue-5 serving table: No EAGLE vs Trained EAGLE at concurrency 1/2/4/8, ours and vLLM's.

    nice -n 10 .venv/bin/python benchmarks/serving_table.py --head RUN/eagle_model \\
        [--prompts RUN/heldout.jsonl] [--requests-per-level 16] [--max-tokens 96] \\
        [--engines eaglenest vllm] [--out .cache/bench/serving-table]

Runs ``servebench.benchmark`` once per engine and prints each table: our server
without a head, with the head and adaptive K, and with the head at vLLM's fixed K (the row
whose acceptance is compared with vLLM's); vLLM-CPU without and with the head at K. Then the
goals: Trained EAGLE output throughput >= 2.0x No EAGLE at concurrency 1 and >= 1.3x at
8 on our engine; our No-EAGLE tokens/s at concurrency 1 at least vLLM's; the head's mean
acceptance length in vLLM within 10% of ours. Every number is guidellm's or the servers'
counters; nothing is timed here. Results go to OUT/<engine>/results.{json,csv}.
"""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path

from servebench import (
    BASELINE,
    BenchmarkConfiguration,
    ServingBenchmarkConfig,
    ServingReport,
    serving_benchmark,
)

REPO = Path(__file__).resolve().parents[1]
TRAINED = "Trained EAGLE"
FIXED_K = 3
GOAL_SPEEDUP_C1, GOAL_SPEEDUP_C8 = 2.0, 1.3
ACCEPTANCE_TOLERANCE = 0.10


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", type=Path, default=REPO / ".cache/models/smollm2-135m-instruct")
    parser.add_argument("--head", type=Path, required=True, help="trained EAGLE-3 head directory")
    parser.add_argument(
        "--prompts", type=Path, default=None, help="held-out data (default: heldout.jsonl beside the head)"
    )
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 2, 4, 8])
    parser.add_argument("--requests-per-level", type=int, default=16)
    parser.add_argument("--max-tokens", type=int, default=96)
    parser.add_argument("--stop-at-eos", action="store_true", help="replies end at end-of-sequence")
    parser.add_argument("--k", type=int, default=FIXED_K, help="vLLM's K and our fixed-K row's (3)")
    parser.add_argument("--engines", nargs="+", choices=("eaglenest", "vllm"), default=["eaglenest", "vllm"])
    parser.add_argument("--out", type=Path, default=REPO / ".cache/bench/serving-table")
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)
    prompts = args.prompts or args.head.parent / "heldout.jsonl"
    reports: dict[str, ServingReport] = {}
    for engine in args.engines:
        configurations = [BenchmarkConfiguration(name=BASELINE)]
        if engine == "eaglenest":
            configurations.append(BenchmarkConfiguration(name=TRAINED, head_dir=args.head))
        configurations.append(
            BenchmarkConfiguration(
                name=fixed_k_name(engine, args.k), head_dir=args.head, num_speculative_tokens=args.k
            )
        )
        config = ServingBenchmarkConfig(
            model_dir=args.model,
            prompt_paths=[prompts],
            configurations=configurations,
            engine=engine,
            concurrency=args.concurrency,
            requests_per_level=args.requests_per_level,
            max_tokens=args.max_tokens,
            stop_at_eos=args.stop_at_eos,
            work_dir=args.out / engine / "raw",
        )
        report = serving_benchmark(config)
        reports[engine] = report
        (args.out / engine / "results.json").write_text(json.dumps(report.model_dump(mode="json"), indent=2))
        (args.out / engine / "results.csv").write_text(report.to_csv())
    for engine, report in reports.items():
        print(
            f"\n### {engine}: {report.prompts} held-out prompts, {report.requests_per_level} requests per "
            f"level, {report.tokens_per_request()}, {report.load_generator}\n"
        )
        print(report.format_table())
        for line in report.request_shortfalls:
            print(line)
    print()
    for line in goals(reports, args.concurrency, args.k):
        print(line)


def fixed_k_name(engine: str, k: int) -> str:
    """vLLM's only head row is "Trained EAGLE"; ours has the adaptive one under that name."""
    return TRAINED if engine == "vllm" else f"{TRAINED} (K={k})"


def goals(reports: dict[str, ServingReport], levels: list[int], k: int) -> list[str]:
    lines = []
    ours, vllm = reports.get("eaglenest"), reports.get("vllm")
    if ours is not None:
        for level, goal in ((1, GOAL_SPEEDUP_C1), (8, GOAL_SPEEDUP_C8)):
            if level in levels:
                speedup = ours.row(TRAINED, level).speedup_vs_no_eagle or 0.0
                lines.append(
                    _verdict(
                        f"our engine, concurrency {level}: speedup {speedup:.2f}x",
                        speedup >= goal,
                        f">= {goal}x",
                    )
                )
    if ours is not None and vllm is not None and 1 in levels:
        mine, theirs = ours.row(BASELINE, 1).output_throughput, vllm.row(BASELINE, 1).output_throughput
        lines.append(
            _verdict(
                f"No EAGLE at concurrency 1: ours {mine:.1f} vs vLLM {theirs:.1f} tokens/s",
                mine >= theirs,
                ">= vLLM",
            )
        )
        for level in levels:
            a = ours.row(fixed_k_name("eaglenest", k), level).mean_acceptance_length
            b = vllm.row(fixed_k_name("vllm", k), level).mean_acceptance_length
            if a is not None and b is not None:
                close = abs(b - a) <= ACCEPTANCE_TOLERANCE * a
                lines.append(
                    _verdict(
                        f"K={k} acceptance length at concurrency {level}: ours {a:.2f} vs vLLM {b:.2f}",
                        close,
                        "within 10%",
                    )
                )
    return lines


def _verdict(measured: str, met: bool, goal: str) -> str:
    return f"{'MET    ' if met else 'NOT MET'} {measured} (goal {goal})"


if __name__ == "__main__":
    main()
