"""Live numbers of an endpoint, read from its instances' own Prometheus text (/metrics).

Each serving process counts what its engine did: tokens generated, verifications and the
drafted tokens the target accepted. Summed over an endpoint's instances they give its
acceptance length, 1 + accepted / verifications: the tokens each target step yields (1.0 is
plain decoding). Counters restart with an instance, so these are gauges of the instances
serving now, not lifetime totals.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

import httpx
from prometheus_client.parser import text_string_to_metric_families

SCRAPE_TIMEOUT = httpx.Timeout(2.0)
# The serving engine's metric names (serving/metrics.py); text exposition adds _total.
GENERATED = "eaglenest:generation_tokens_total"
DRAFTS = "eaglenest:spec_decode_num_drafts_total"
ACCEPTED = "eaglenest:spec_decode_num_accepted_tokens_total"
RUNNING = "eaglenest:num_requests_running"


@dataclass
class EndpointStats:
    instances: int = 0
    answering: int = 0
    generated_tokens: float = 0.0
    drafts: float = 0.0
    accepted_tokens: float = 0.0
    running: float = 0.0

    @property
    def acceptance_length(self) -> float | None:
        return None if self.drafts == 0 else 1.0 + self.accepted_tokens / self.drafts


def _parse(text: str) -> dict[str, float]:
    totals: dict[str, float] = defaultdict(float)
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            totals[sample.name] += sample.value
    return totals


async def _scrape(client: httpx.AsyncClient, url: str) -> dict[str, float] | None:
    try:
        response = await client.get(f"{url}/metrics", timeout=SCRAPE_TIMEOUT)
        response.raise_for_status()
    except httpx.HTTPError:
        return None
    return _parse(response.text)


async def endpoint_stats(
    client: httpx.AsyncClient, instances: Iterable[tuple[str, str]]
) -> dict[str, EndpointStats]:
    """Stats per endpoint (ARN) from (ARN, URL) pairs; unreachable instances count as not answering."""
    pairs = list(instances)
    scraped = await asyncio.gather(*(_scrape(client, url) for _, url in pairs))
    stats: dict[str, EndpointStats] = defaultdict(EndpointStats)
    for (arn, _), values in zip(pairs, scraped, strict=True):
        entry = stats[arn]
        entry.instances += 1
        if values is None:
            continue
        entry.answering += 1
        entry.generated_tokens += values.get(GENERATED, 0.0)
        entry.drafts += values.get(DRAFTS, 0.0)
        entry.accepted_tokens += values.get(ACCEPTED, 0.0)
        entry.running += values.get(RUNNING, 0.0)
    return dict(stats)
