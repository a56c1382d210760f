"""What one generation produced and where its time went."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

FinishReason = Literal["eos", "length"]


@dataclass(slots=True)
class GenerationResult:
    """Output and accounting of one ``generate`` call.

    ``accepted_per_step[i]`` is how many of the ``proposed_per_step[i]`` drafts the
    target accepted at verification ``i``, before any cut at EOS or ``max_new_tokens``;
    each verification also yields one token from the target itself (the bonus token), so
    the mean acceptance length tau is ``mean(accepted + 1)``. Plain decoding has no steps.
    """

    token_ids: list[int]  # new tokens only, EOS included when generation stopped on it
    prompt_length: int
    finish_reason: FinishReason
    num_speculative_tokens: int  # K; 0 for plain decoding
    num_target_forwards: int  # the prefill included
    accepted_per_step: list[int] = field(default_factory=list)
    proposed_per_step: list[int] = field(default_factory=list)
    verified_tokens: int = 0  # tokens the target scored in verifications (tree nodes + root)
    seconds: float = 0.0  # whole call: prefill, drafting, verification, bookkeeping
    prefill_seconds: float = 0.0  # target prefill (+ nothing else; the draft prefill counts as drafting)
    draft_seconds: float = 0.0  # every head forward
    target_seconds: float = 0.0  # target forwards after the prefill, with verification and rollback

    @property
    def num_verify_steps(self) -> int:
        return len(self.accepted_per_step)

    @property
    def tau(self) -> float:
        """Mean acceptance length: accepted drafts + 1 per verification (0 without any)."""
        steps = self.num_verify_steps
        return (sum(self.accepted_per_step) + steps) / steps if steps else 0.0

    @property
    def acceptance_by_position(self) -> list[float]:
        """Fraction of verifications in which draft ``i`` was accepted, among those that
        proposed it. Draft ``i`` needs drafts ``0..i-1`` accepted too, so these sum to
        tau - 1 when every step proposes K."""
        return acceptance_by_position(self.accepted_per_step, self.proposed_per_step)

    @property
    def tokens_per_second(self) -> float:
        return len(self.token_ids) / self.seconds if self.seconds > 0 else 0.0


def acceptance_by_position(accepted: list[int], proposed: list[int]) -> list[float]:
    """Per-position acceptance over any number of verifications (see ``GenerationResult``)."""
    width = max(proposed, default=0)
    rates: list[float] = []
    for position in range(width):
        offered = sum(1 for count in proposed if count > position)
        taken = sum(1 for count in accepted if count > position)
        rates.append(taken / offered if offered else 0.0)
    return rates
