"""Choosing the next token from a batch of logits, on the device (no host sync)."""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True, slots=True)
class Sampling:
    temperature: float  # 0: greedy
    top_p: float


def sample_tokens(logits: torch.Tensor, sampling: Sampling) -> torch.Tensor:
    """One token per row from ``logits`` [R, V] at the temperature, kept to the top-p nucleus
    (the smallest set of most likely tokens whose mass reaches top_p; never empty)."""
    scaled = logits / sampling.temperature
    if sampling.top_p < 1:
        ordered, order = scaled.sort(dim=-1, descending=True)
        probs = ordered.softmax(-1)
        # Drop a token once the mass before it already reaches top_p: the first always stays.
        outside = probs.cumsum(-1) - probs >= sampling.top_p
        ordered = ordered.masked_fill(outside, float("-inf"))
        scaled = torch.full_like(scaled, float("-inf")).scatter(-1, order, ordered)
    return torch.multinomial(scaled.softmax(-1), num_samples=1).squeeze(-1)


def next_tokens(logits: torch.Tensor, sampling: Sampling) -> tuple[torch.Tensor, torch.Tensor]:
    """The greedy choice and the chosen token of each row (the same tensor when greedy)."""
    greedy = logits.argmax(-1)
    return greedy, greedy if sampling.temperature == 0 else sample_tokens(logits, sampling)
