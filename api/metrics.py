"""Prometheus metrics: request counts and latency by operation and outcome code."""

from __future__ import annotations

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest

# Sub-millisecond to seconds: the api's own work is milliseconds, the tail is what matters.
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)


class ApiMetrics:
    """One registry per app, so several apps in one process (tests) never collide."""

    content_type = CONTENT_TYPE_LATEST

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "eaglenest_api_requests",
            "Requests handled, by operation (AWS operation or route) and outcome code.",
            ["operation", "code"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "eaglenest_api_request_duration_seconds",
            "Time from request received to response sent, by operation.",
            ["operation"],
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )

    def observe(self, *, operation: str, code: str, seconds: float) -> None:
        self.requests.labels(operation=operation, code=code).inc()
        self.latency.labels(operation=operation).observe(seconds)

    def render(self) -> bytes:
        return generate_latest(self.registry)
