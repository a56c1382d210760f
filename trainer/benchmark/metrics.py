"""Serving metrics from per-chunk timestamps, defined as vLLM's benchmark defines them.

Per request: TTFT is the time to the first token; TPOT is (latency - TTFT) / (tokens - 1);
ITL is the gap between consecutive chunks (speculative decoding emits several tokens at
once, so its ITL is longer than its TPOT); OTPS is tokens / latency. Requests at
concurrency 1 run back to back, so the run's duration is the sum of their latencies;
request and output throughput are divided by it.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from trainer.benchmark.timing import TimedGeneration
from trainer.engine.result import acceptance_by_position


@dataclass(frozen=True)
class Distribution:
    mean: float
    median: float
    p99: float

    @classmethod
    def of(cls, values: Sequence[float]) -> Distribution | None:
        if not values:
            return None
        return cls(mean=sum(values) / len(values), median=percentile(values, 50), p99=percentile(values, 99))

    def to_json(self) -> dict[str, float]:
        return {"mean": self.mean, "median": self.median, "p99": self.p99}


def percentile(values: Sequence[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default)."""
    ordered = sorted(values)
    if not ordered:
        raise ValueError("percentile of no values")
    position = (len(ordered) - 1) * q / 100.0
    low, high = math.floor(position), math.ceil(position)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


@dataclass(frozen=True)
class ServingMetrics:
    requests: int
    output_tokens: int
    prompt_tokens_mean: float
    duration_seconds: float
    ttft_ms: Distribution | None
    tpot_ms: Distribution | None
    itl_ms: Distribution | None
    e2e_latency_ms: Distribution | None
    request_throughput: float  # requests/s
    output_throughput: float  # tokens/s
    otps_per_request: float  # mean over requests of tokens / latency
    acceptance_length: float | None  # tau, bonus token included; None without speculation
    acceptance_by_position: list[float]
    verify_steps: int

    def to_json(self) -> dict[str, Any]:
        def dist(value: Distribution | None) -> dict[str, float] | None:
            return None if value is None else value.to_json()

        return {
            "requests": self.requests,
            "output_tokens": self.output_tokens,
            "prompt_tokens_mean": self.prompt_tokens_mean,
            "duration_seconds": self.duration_seconds,
            "ttft_ms": dist(self.ttft_ms),
            "tpot_ms": dist(self.tpot_ms),
            "itl_ms": dist(self.itl_ms),
            "e2e_latency_ms": dist(self.e2e_latency_ms),
            "request_throughput": self.request_throughput,
            "output_throughput": self.output_throughput,
            "otps_per_request": self.otps_per_request,
            "acceptance_length": self.acceptance_length,
            "acceptance_by_position": self.acceptance_by_position,
            "verify_steps": self.verify_steps,
        }


def serving_metrics(generations: Sequence[TimedGeneration]) -> ServingMetrics:
    timed = [g for g in generations if g.chunks]
    ttft = [1e3 * g.chunks[0].seconds for g in timed]
    tpot = [
        1e3 * (g.seconds - g.chunks[0].seconds) / (g.output_tokens - 1) for g in timed if g.output_tokens > 1
    ]
    itl = [
        1e3 * (later.seconds - earlier.seconds)
        for g in timed
        for earlier, later in itertools.pairwise(g.chunks)
    ]
    duration = sum(g.seconds for g in timed)
    tokens = sum(g.output_tokens for g in timed)
    accepted = [count for g in timed for count in g.result.accepted_per_step]
    proposed = [count for g in timed for count in g.result.proposed_per_step]
    steps = len(accepted)
    return ServingMetrics(
        requests=len(timed),
        output_tokens=tokens,
        prompt_tokens_mean=sum(g.prompt_tokens for g in timed) / len(timed) if timed else 0.0,
        duration_seconds=duration,
        ttft_ms=Distribution.of(ttft),
        tpot_ms=Distribution.of(tpot),
        itl_ms=Distribution.of(itl),
        e2e_latency_ms=Distribution.of([1e3 * g.seconds for g in timed]),
        request_throughput=len(timed) / duration if duration > 0 else 0.0,
        output_throughput=tokens / duration if duration > 0 else 0.0,
        otps_per_request=sum(g.output_tokens / g.seconds for g in timed if g.seconds > 0) / len(timed)
        if timed
        else 0.0,
        acceptance_length=(sum(accepted) + steps) / steps if steps else None,
        acceptance_by_position=acceptance_by_position(accepted, proposed),
        verify_steps=steps,
    )
