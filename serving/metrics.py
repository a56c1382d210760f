"""Prometheus counters of the serving engine, named like vLLM's (``vllm:spec_decode_*``)
so dashboards and the benchmark read both engines the same way."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest

PREFIX = "eaglenest"


class EngineMetrics:
    """One registry per engine, so several engines (tests) never collide."""

    def __init__(self, max_positions: int) -> None:
        self.registry = CollectorRegistry()
        registry = self.registry
        self.num_drafts = Counter(
            f"{PREFIX}:spec_decode_num_drafts", "Verifications that checked drafted tokens", registry=registry
        )
        self.num_draft_tokens = Counter(
            f"{PREFIX}:spec_decode_num_draft_tokens", "Drafted tokens sent to verification", registry=registry
        )
        self.num_accepted_tokens = Counter(
            f"{PREFIX}:spec_decode_num_accepted_tokens",
            "Drafted tokens the target accepted",
            registry=registry,
        )
        self.accepted_per_position = Counter(
            f"{PREFIX}:spec_decode_num_accepted_tokens_per_pos",
            "Accepted drafted tokens by position in the draft chain",
            ["position"],
            registry=registry,
        )
        self.num_steps = Counter(f"{PREFIX}:engine_steps", "Batched engine steps", registry=registry)
        self.speculative_tokens = Counter(
            f"{PREFIX}:spec_decode_num_speculative_tokens",
            "Sum over engine steps of the K chosen for the step (K used = this / engine_steps)",
            registry=registry,
        )
        self.mean_k = Gauge(
            f"{PREFIX}:spec_decode_mean_k", "Mean draft tokens K chosen per engine step", registry=registry
        )
        self.prompt_tokens = Counter(f"{PREFIX}:prompt_tokens", "Prefilled prompt tokens", registry=registry)
        self.generation_tokens = Counter(
            f"{PREFIX}:generation_tokens", "Generated tokens delivered to requests", registry=registry
        )
        self.requests_finished = Counter(
            f"{PREFIX}:request_success", "Finished requests by reason", ["finished_reason"], registry=registry
        )
        self.running = Gauge(f"{PREFIX}:num_requests_running", "Requests in the batch", registry=registry)
        self.waiting = Gauge(f"{PREFIX}:num_requests_waiting", "Requests queued", registry=registry)
        for position in range(max_positions):
            self.accepted_per_position.labels(position=str(position))
        self._steps = 0
        self._k_sum = 0

    def record_step(self, k: int) -> None:
        self._steps += 1
        self._k_sum += k
        self.num_steps.inc()
        self.speculative_tokens.inc(k)
        self.mean_k.set(self._k_sum / self._steps)

    def record_verification(self, proposed: int, accepted: int) -> None:
        self.num_drafts.inc()
        self.num_draft_tokens.inc(proposed)
        self.num_accepted_tokens.inc(accepted)
        for position in range(accepted):
            self.accepted_per_position.labels(position=str(position)).inc()

    @property
    def mean_speculative_tokens(self) -> float:
        return self._k_sum / self._steps if self._steps else 0.0

    def exposition(self) -> bytes:
        """The Prometheus text format."""
        return generate_latest(self.registry)
