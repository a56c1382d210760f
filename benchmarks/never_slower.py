"""Adaptive K is never slower than plain decoding: No EAGLE vs heads with adaptive K, per level.

    nice -n 10 .venv/bin/python benchmarks/never_slower.py --prompts PROMPTS.jsonl \\
        [--head RUN/eagle_model ...] [--requests-per-level 16] [--max-tokens 96] \\
        [--out .cache/bench/never-slower]

Serves SmolLM2-135M-Instruct on our engine without a head, with an untrained (random) head --
the worst head there is -- and with each ``--head``, all with the engine's adaptive K, under
guidellm at concurrency 1, 2, 4 and 8, and prints each head's output throughput over No
EAGLE's at every level with the goal: at least 0.97x. Every number is guidellm's or the
server's counters; nothing is timed here. Results go to OUT/results.{json,csv}.
"""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path

from servebench import BASELINE, BenchmarkConfiguration, ServingBenchmarkConfig, serving_benchmark
from trainer.eagle.random_head import write_random_head

REPO = Path(__file__).resolve().parents[1]
GOAL = 0.97
RANDOM_HEAD = "Random head"
# SmolLM2's trained heads keep 16,384 draft tokens; the random head's choice hardly matters.
DRAFT_VOCAB_SIZE = 16384


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", type=Path, default=REPO / ".cache/models/smollm2-135m-instruct")
    parser.add_argument("--prompts", type=Path, required=True, help="conversations, any trainer format")
    parser.add_argument("--head", type=Path, nargs="*", default=[], help="trained heads to check too")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 2, 4, 8])
    parser.add_argument("--requests-per-level", type=int, default=16)
    parser.add_argument("--max-tokens", type=int, default=96)
    parser.add_argument("--max-prompts", type=int, default=16)
    parser.add_argument("--out", type=Path, default=REPO / ".cache/bench/never-slower")
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)
    random_head = write_random_head(args.model, args.out / "random-head", draft_vocab_size=DRAFT_VOCAB_SIZE)
    configurations = [
        BenchmarkConfiguration(name=BASELINE),
        BenchmarkConfiguration(name=RANDOM_HEAD, head_dir=random_head),
    ]
    configurations += [
        BenchmarkConfiguration(name=f"Head {index}", head_dir=head)
        for index, head in enumerate(args.head, start=1)
    ]
    config = ServingBenchmarkConfig(
        model_dir=args.model,
        prompt_paths=[args.prompts],
        configurations=configurations,
        concurrency=args.concurrency,
        requests_per_level=args.requests_per_level,
        max_tokens=args.max_tokens,
        max_prompts=args.max_prompts,
        work_dir=args.out / "raw",
    )
    for index, head in enumerate(args.head, start=1):
        print(f"Head {index}: {head}")
    report = serving_benchmark(config)
    (args.out / "results.json").write_text(json.dumps(report.model_dump(mode="json"), indent=2))
    (args.out / "results.csv").write_text(report.to_csv())
    print(
        f"\n{report.prompts} prompts, {report.requests_per_level} requests per level, "
        f"{report.tokens_per_request()}, {report.load_generator}\n"
    )
    print(report.format_table())
    print()
    for row in report.rows:
        if row.head_dir is None:
            continue
        speedup = row.speedup_vs_no_eagle or 0.0
        verdict = "met" if speedup >= GOAL else "MISSED"
        print(
            f"{row.configuration}, concurrency {row.concurrency}: {speedup:.3f}x No EAGLE "
            f"(mean draft tokens per step {row.mean_draft_tokens or 0:.2f}) -- goal >= {GOAL}x {verdict}"
        )


if __name__ == "__main__":
    main()
