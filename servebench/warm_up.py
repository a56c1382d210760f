"""Requests a server answers before its measurement starts, so that the first level does not
pay for what happens only once.

Every server's first forward passes are slower than the rest: one short request covers that on
a CPU. On a GPU our engine captures a CUDA graph the first time each step shape comes (rows,
tokens a row, keys, all bucketed: engine/cuda_graphs.py), each capture a device sync and two
eager passes; after one short request nearly every capture fell inside the first measured
level (concurrency 1), and an adaptive-K head, whose widths vary, paid for the most of them,
so that level's TTFT and throughput and the K recommendation read the captures. There the
warm-up is the largest level's own traffic: as many requests at once, with the benchmark's
prompts and length, whose batch shrinks as they finish, so the rows, widths and key lengths
the levels run are captured before any is measured.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import httpx

from servebench.servers import RunningServer

SHORT_TOKENS = 8  # a CPU's warm-up request
TIMEOUT_SECONDS = 600.0  # generous: a GPU's first captures, or a slow CPU's first request


@dataclass(frozen=True)
class WarmUpRequest:
    prompt: str
    max_tokens: int


def warm_up_requests(
    prompts: Sequence[str], *, gpu: bool, concurrency: Sequence[int], max_tokens: int
) -> list[WarmUpRequest]:
    """One short request on a CPU; on a GPU the largest level's traffic (sent all at once)."""
    if not prompts:
        raise ValueError("a warm-up needs at least one prompt")
    if not gpu:
        return [WarmUpRequest(prompts[0], SHORT_TOKENS)]
    width = max(concurrency, default=1)
    return [WarmUpRequest(prompts[index % len(prompts)], max_tokens) for index in range(width)]


def warm_up(server: RunningServer, requests: Sequence[WarmUpRequest]) -> None:
    """Send ``requests`` to ``server`` at once and wait for every answer; any failure is an error
    (a server that cannot answer its warm-up would not be measured meaningfully)."""
    with ThreadPoolExecutor(max_workers=max(len(requests), 1)) as pool:
        for response in pool.map(lambda request: _complete(server, request), requests):
            if response.status_code != 200:
                raise RuntimeError(
                    f"warm-up request to {server.url} failed: {response.status_code} {response.text}"
                )


def _complete(server: RunningServer, request: WarmUpRequest) -> httpx.Response:
    body = {
        "model": server.served_model_name,
        "prompt": request.prompt,
        "max_tokens": request.max_tokens,
        "temperature": 0,
    }
    return httpx.post(f"{server.url}/v1/completions", json=body, timeout=TIMEOUT_SECONDS)
