"""How many tokens to draft per step: fixed, or adapted to measured acceptance and batch size.

A draft at position j pays off when the chance that it is accepted (every draft before
it accepted too) outweighs what it costs: one more head forward per sequence and one
more row in the target's verification. At batch 1 the target forward is bound by
streaming its weights, so extra rows are nearly free and deep chains win; as the batch
grows, the forward gets compute-bound, every row costs, and only confident drafts are
worth proposing. ``AdaptiveSpeculation`` therefore drafts while the expected acceptance
of the next position stays above a threshold that rises with the batch size, and drafts
nothing at all when even the first position falls below it: a head that is rarely right
must not make serving slower than plain decoding (it then probes with one draft every
``probe_every`` steps, so that a head which becomes useful on other prompts is noticed).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol


class SpeculationPolicy(Protocol):
    max_tokens: int

    def num_tokens(self, batch_size: int) -> int:
        """Draft tokens per sequence for a step of ``batch_size`` sequences."""
        ...

    def observe(self, proposed: int, accepted: int) -> None:
        """One verification's outcome."""
        ...


@dataclass(slots=True)
class FixedSpeculation:
    """Always K drafts (0 = plain decoding)."""

    max_tokens: int

    def __post_init__(self) -> None:
        if self.max_tokens < 0:
            raise ValueError(f"num_speculative_tokens must be >= 0, got {self.max_tokens}")

    def num_tokens(self, batch_size: int) -> int:
        return self.max_tokens

    def observe(self, proposed: int, accepted: int) -> None:
        return None


@dataclass(slots=True)
class AdaptiveSpeculation:
    """K from an EWMA of the acceptance rate at each draft position.

    ``rates[j]`` estimates P(draft j accepted | drafts 0..j-1 accepted); the expected
    acceptance of position j is their running product. Drafting stops before the first
    position whose expected acceptance is below ``threshold(batch_size)``, which goes
    linearly from ``threshold_low`` at batch 1 to ``threshold_high`` at ``full_batch``.
    When even position 0 is below it, K is 0 (plain decoding) except for one draft every
    ``probe_every`` steps, which keeps acceptance being measured.
    """

    max_tokens: int = 6
    full_batch: int = 8
    threshold_low: float = 0.25
    threshold_high: float = 0.6
    decay: float = 0.05  # EWMA weight of each new observation
    prior: float = 0.7  # optimistic start: deep chains get tried before being judged
    # 1 in 16 steps verifying one extra token costs about 1% of plain decoding's speed here.
    probe_every: int = 16
    rates: list[float] = field(default_factory=list)
    _steps_without_drafts: int = field(default=0, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.max_tokens < 1:
            raise ValueError(f"adaptive speculation needs max_tokens >= 1, got {self.max_tokens}")
        if not 0.0 <= self.threshold_low <= self.threshold_high <= 1.0:
            raise ValueError("thresholds must satisfy 0 <= threshold_low <= threshold_high <= 1")
        if self.probe_every < 1:
            raise ValueError(f"probe_every must be >= 1, got {self.probe_every}")
        if not self.rates:
            self.rates = [self.prior] * self.max_tokens

    def threshold(self, batch_size: int) -> float:
        span = max(self.full_batch - 1, 1)
        share = min(max(batch_size - 1, 0), span) / span
        return self.threshold_low + (self.threshold_high - self.threshold_low) * share

    def num_tokens(self, batch_size: int) -> int:
        threshold = self.threshold(batch_size)
        expected = 1.0
        depth = 0
        for rate in self.rates:
            expected *= rate
            if expected < threshold:
                break
            depth += 1
        if depth > 0:
            self._steps_without_drafts = 0
            return depth
        self._steps_without_drafts += 1
        if self._steps_without_drafts >= self.probe_every:
            self._steps_without_drafts = 0
            return 1
        return 0

    def observe(self, proposed: int, accepted: int) -> None:
        # Positions 0..accepted were judged (accepted ones and the first rejection); later
        # ones never reached the target's judgement and tell nothing.
        judged = min(accepted + 1, proposed)
        for position in range(judged):
            outcome = 1.0 if position < accepted else 0.0
            self.rates[position] += self.decay * (outcome - self.rates[position])

    def expected_acceptance(self) -> Sequence[float]:
        result: list[float] = []
        expected = 1.0
        for rate in self.rates:
            expected *= rate
            result.append(expected)
        return result
