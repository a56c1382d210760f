"""Endpoints with and without a trained head, through InvokeEndpoint: output tokens/s at each concurrency.

    nice -n 19 .venv/bin/python benchmarks/endpoint_table.py --api-url http://127.0.0.1:8600 \\
        --endpoints "No EAGLE=smollm2-plain" "Trained EAGLE=smollm2-eagle" \\
        --prompts chitchat.jsonl [--concurrency 1 4] [--requests 16] [--max-tokens 64] [--rounds 2]

Each request is an OpenAI chat body (greedy, ``max_tokens``) sent with boto3's
sagemaker-runtime client, ``concurrency`` at a time, through the api to the endpoint's
instances: the whole deployed path. Tokens are the instances' own ``usage`` counts; time is
the wall clock from the first request to the last answer. Rounds alternate the endpoints
(A B A B ...) so a machine whose load drifts biases neither; each cell is the median of its
rounds. Acceptance length is the endpoint's gauge on the api's /metrics after all rounds.
The prompts are the first user turn of each record (ShareGPT ``conversations``, OpenAI
``messages`` or ``prompt``), the first ``--requests`` of at least 20 characters.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import boto3
import httpx
from botocore.config import Config


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--api-url", required=True)
    parser.add_argument("--region", default=os.environ.get("AWS_DEFAULT_REGION", "us-east-1"))
    parser.add_argument("--endpoints", nargs="+", required=True, help="LABEL=ENDPOINT_NAME pairs")
    parser.add_argument("--prompts", type=Path, required=True, help="JSONL of chat records")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 4])
    parser.add_argument("--requests", type=int, default=16, help="requests per endpoint, level and round")
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--out", type=Path, default=None, help="write the cells as JSON here")
    return parser.parse_args()


def first_user_turn(record: dict[str, Any]) -> str | None:
    if "conversations" in record:
        turns = [t["value"] for t in record["conversations"] if t.get("from") in ("human", "user")]
        return turns[0] if turns else None
    if "messages" in record:
        turns = [m["content"] for m in record["messages"] if m.get("role") == "user"]
        return turns[0] if turns else None
    prompt = record.get("prompt")
    return prompt if isinstance(prompt, str) else None


def load_prompts(path: Path, count: int) -> list[str]:
    prompts: list[str] = []
    with path.open(encoding="utf-8") as lines:
        for line in lines:
            text = first_user_turn(json.loads(line))
            if text and len(text) >= 20:
                prompts.append(text)
            if len(prompts) == count:
                break
    return prompts


def run_level(
    runtime: Any, endpoint: str, prompts: list[str], concurrency: int, max_tokens: int
) -> dict[str, float]:
    def one(prompt: str) -> tuple[int, float]:
        body = {"messages": [{"role": "user", "content": prompt}], "max_tokens": max_tokens, "temperature": 0}
        started = time.perf_counter()
        answer = runtime.invoke_endpoint(
            EndpointName=endpoint, ContentType="application/json", Body=json.dumps(body)
        )
        document = json.loads(answer["Body"].read())
        return int(document["usage"]["completion_tokens"]), time.perf_counter() - started

    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        results = list(pool.map(one, prompts))
    wall = time.perf_counter() - started
    tokens = sum(count for count, _ in results)
    return {
        "output_tokens": tokens,
        "seconds": wall,
        "output_tokens_per_second": tokens / wall,
        "mean_latency_seconds": statistics.fmean(latency for _, latency in results),
    }


def acceptance_lengths(api_url: str) -> dict[str, float]:
    found: dict[str, float] = {}
    for line in httpx.get(f"{api_url}/metrics", timeout=10).text.splitlines():
        if line.startswith("eaglenest_endpoint_acceptance_length{"):
            arn = line.split('endpoint="', 1)[1].split('"', 1)[0]
            found[arn.rsplit("/", 1)[1]] = float(line.rsplit(" ", 1)[1])
    return found


def main() -> None:
    args = parse_args()
    endpoints = [tuple(pair.split("=", 1)) for pair in args.endpoints]
    prompts = load_prompts(args.prompts, args.requests)
    runtime = boto3.client(
        "sagemaker-runtime",
        endpoint_url=args.api_url,
        region_name=args.region,
        config=Config(read_timeout=900, retries={"max_attempts": 1, "mode": "standard"}),
    )
    cells: dict[tuple[str, int], list[dict[str, float]]] = {}
    for round_index in range(args.rounds):
        order = endpoints if round_index % 2 == 0 else list(reversed(endpoints))
        for label, name in order:
            for level in args.concurrency:
                result = run_level(runtime, name, prompts, level, args.max_tokens)
                cells.setdefault((label, level), []).append(result)
                rate = result["output_tokens_per_second"]
                print(f"round {round_index + 1} {label} c={level}: {rate:.1f} tok/s", flush=True)
    acceptance = acceptance_lengths(args.api_url)
    baseline = endpoints[0][0]
    print(
        "\n| endpoint | concurrency | output tok/s (median) | mean latency s | acceptance length | vs "
        + baseline
        + " |"
    )
    print("|---|---|---|---|---|---|")
    summary = []
    for label, name in endpoints:
        for level in args.concurrency:
            runs = cells[(label, level)]
            rate = statistics.median(run["output_tokens_per_second"] for run in runs)
            base = statistics.median(run["output_tokens_per_second"] for run in cells[(baseline, level)])
            latency = statistics.median(run["mean_latency_seconds"] for run in runs)
            shown = acceptance.get(name.lower())
            accept = "—" if shown is None else f"{shown:.2f}"
            print(f"| {label} | {level} | {rate:.1f} | {latency:.2f} | {accept} | {rate / base:.2f}x |")
            summary.append(
                {"endpoint": label, "concurrency": level, "runs": runs, "acceptance_length": shown}
            )
    if args.out is not None:
        args.out.write_text(json.dumps(summary, indent=2) + "\n")


if __name__ == "__main__":
    main()
