"""Adaptive K on simulated step times: how close it gets to the best fixed K, per batch size.

    .venv/bin/python benchmarks/adaptive_k_sim.py [--runs 300] [--policy-kwargs '{"prior_weight": 2}']

A benchmark level is short: the demo's concurrency-4 level is one batch of 4 requests, about 30
decoding steps, after a concurrency-1 level of about 116. Within it ``AdaptiveSpeculation``
(serving/speculation.py, the engine's own policy) must learn step costs at a batch size it has
not run, from step times that are noisy. This drives the policy through those two levels with
step times from a cost model (a plain step's time, plus a share of it per draft, times
log-normal noise; optionally 3 % of steps and every level's first step 3-10x slow, as seen on
this project's 2-core VMs) and draft acceptance drawn from per-position rates, and prints each
scenario's throughput over plain decoding, against the best fixed K's.

Scenarios: ``cpu`` is the shipped head on the 2-core CPU (acceptance and costs from the demo
of session 51: a draft costs 3 % of a plain step at batch 1, 29 % at batch 4); ``gpu`` a
weight-bound device where a draft costs 6-7 % at both; ``bad`` a head that is rarely right
on the CPU's costs. Throughput is counted on the cost model's noise-free step times: noise
decides what the policy learns, not what a step costs.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
from dataclasses import dataclass

from serving.speculation import AdaptiveSpeculation


@dataclass(frozen=True)
class Scenario:
    rates: tuple[float, ...]  # P(draft j accepted | drafts before it accepted)
    costs: dict[int, tuple[float, float]]  # batch size -> (plain step ms, share per draft)


SCENARIOS = {
    "cpu": Scenario((0.53, 0.45, 0.54, 0.46, 0.4, 0.4), {1: (59.0, 0.03), 4: (64.0, 0.29)}),
    "gpu": Scenario((0.75, 0.7, 0.65, 0.6, 0.55, 0.5), {1: (5.0, 0.06), 4: (5.2, 0.07)}),
    "bad": Scenario((0.1,) * 6, {1: (59.0, 0.03), 4: (64.0, 0.29)}),
}
LEVELS = ((1, 116), (4, 30))  # (batch size, decoding steps): the demo's two levels
NOISE = ((0.05, True), (0.1, True), (0.2, False))  # (log-normal sigma, slow outliers)


def fixed_speedup(scenario: Scenario, batch_size: int, k: int) -> float:
    """Fixed K's throughput over plain decoding: the policy's own expected tokens, at the
    scenario's true acceptance, over the step's true relative cost."""
    _, share = scenario.costs[batch_size]
    truth = AdaptiveSpeculation(max_tokens=len(scenario.rates), rates=list(scenario.rates))
    return truth.expected_tokens(k) / (1.0 + share * k)


def simulate(
    policy: AdaptiveSpeculation, scenario: Scenario, seed: int, sigma: float, outliers: bool
) -> dict[int, tuple[float, float]]:
    """Per batch size: (throughput over plain decoding, mean K) of the policy's steps."""
    draws = random.Random(seed)
    result = {}
    for batch_size, steps in LEVELS:
        plain_ms, share = scenario.costs[batch_size]
        tokens = ms = 0.0
        ks = []
        for step in range(steps):
            k = policy.num_tokens(batch_size)
            cost = plain_ms * (1.0 + share * k)
            seen = cost * draws.lognormvariate(0.0, sigma)
            if outliers and (step == 0 or draws.random() < 0.03):
                seen *= draws.uniform(3.0, 10.0)
            policy.observe_step(batch_size, k, seen / 1000.0)
            for _ in range(batch_size):
                accepted = 0
                while accepted < k and draws.random() < scenario.rates[accepted]:
                    accepted += 1
                policy.observe(k, accepted)
                tokens += 1 + accepted
            ms += cost
            ks.append(k)
        result[batch_size] = (tokens / ms * plain_ms / batch_size, statistics.mean(ks))
    return result


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=300, help="seeds per scenario")
    parser.add_argument("--policy-kwargs", type=json.loads, default={}, help="AdaptiveSpeculation fields")
    args = parser.parse_args()
    print("scenario  noise         batch  best fixed K  adaptive: mean  p10   mean K")
    for name, scenario in SCENARIOS.items():
        for sigma, outliers in NOISE:
            runs = [
                simulate(AdaptiveSpeculation(**args.policy_kwargs), scenario, seed, sigma, outliers)
                for seed in range(args.runs)
            ]
            for batch_size, _ in LEVELS:
                best = max(range(7), key=lambda k: fixed_speedup(scenario, batch_size, k))
                speedups = sorted(run[batch_size][0] for run in runs)
                noise = f"s={sigma}" + (" +slow" if outliers else "")
                print(
                    f"{name:8s}  {noise:12s}  {batch_size:5d}  "
                    f"K={best} {fixed_speedup(scenario, batch_size, best):.2f}x    "
                    f"{statistics.mean(speedups):.2f}x  {speedups[len(speedups) // 10]:.2f}x  "
                    f"{statistics.mean(run[batch_size][1] for run in runs):.2f}"
                )


if __name__ == "__main__":
    main()
