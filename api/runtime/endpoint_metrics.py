"""Prometheus metrics per endpoint, on the api's registry (its /metrics): invocations by outcome,
latency, and the tokens read and generated. Acceptance length is the instances' own metric
(``eaglenest:*`` on each serving process's /metrics); the dashboard reads it from there."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram

LATENCY_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)


class EndpointMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
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
