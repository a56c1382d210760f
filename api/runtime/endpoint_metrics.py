"""Prometheus metrics per endpoint (label: its ARN), on the api's registry (its /metrics):

- from the api's own view of each invocation: invocations by outcome code, latency, prompt and
  generated tokens (their rate is the endpoint's tokens/s);
- from the instances serving now, read when /metrics is scraped (api/runtime/instance_stats.py):
  instances answering, requests running, and the acceptance length of speculative decoding.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from api.runtime.instance_stats import EndpointStats

LATENCY_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)


class InstanceGauges(Collector):
    """Gauges of the last instance scrape; an endpoint that stopped serving drops out."""

    def __init__(self) -> None:
        self.snapshot: dict[str, EndpointStats] = {}

    def collect(self) -> Iterator[GaugeMetricFamily]:
        families = {
            "instances": GaugeMetricFamily(
                "eaglenest_endpoint_instances_answering",
                "Instances that answered the last scrape.",
                labels=["endpoint"],
            ),
            "running": GaugeMetricFamily(
                "eaglenest_endpoint_requests_running",
                "Requests in the instances' batches.",
                labels=["endpoint"],
            ),
            "acceptance": GaugeMetricFamily(
                "eaglenest_endpoint_acceptance_length",
                "Tokens per target step with speculative decoding (1 + accepted drafts / verifications).",
                labels=["endpoint"],
            ),
        }
        for arn, stats in sorted(self.snapshot.items()):
            families["instances"].add_metric([arn], stats.answering)
            families["running"].add_metric([arn], stats.running)
            if stats.acceptance_length is not None:
                families["acceptance"].add_metric([arn], stats.acceptance_length)
        yield from families.values()


class EndpointMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.instance_gauges = InstanceGauges()
        registry.register(self.instance_gauges)
        self.invocations = Counter(
            "eaglenest_endpoint_invocations",
            "InvokeEndpoint calls by endpoint (ARN) and outcome code.",
            ["endpoint", "code"],
            registry=registry,
        )
        self.latency = Histogram(
            "eaglenest_endpoint_invocation_duration_seconds",
            "Time from request to the last byte of the answer, by endpoint.",
            ["endpoint"],
            buckets=LATENCY_BUCKETS,
            registry=registry,
        )
        self.prompt_tokens = Counter(
            "eaglenest_endpoint_prompt_tokens",
            "Prompt tokens read, by endpoint.",
            ["endpoint"],
            registry=registry,
        )
        self.output_tokens = Counter(
            "eaglenest_endpoint_output_tokens",
            "Tokens generated, by endpoint.",
            ["endpoint"],
            registry=registry,
        )

    def observe(
        self, *, endpoint: str, code: str, seconds: float, prompt_tokens: int = 0, output_tokens: int = 0
    ) -> None:
        self.invocations.labels(endpoint=endpoint, code=code).inc()
        self.latency.labels(endpoint=endpoint).observe(seconds)
        if prompt_tokens:
            self.prompt_tokens.labels(endpoint=endpoint).inc(prompt_tokens)
        if output_tokens:
            self.output_tokens.labels(endpoint=endpoint).inc(output_tokens)
