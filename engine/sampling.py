"""Turning logits into the distribution a token is drawn from (temperature, top-p), and
drawing from it: one definition for every caller (distillation and prompt writing, the
draft heads, speculative sampling).

Greedy decoding is temperature 0: it never builds a distribution, it takes the argmax.
The same transform is applied to the target's and the draft's logits; speculative
sampling stays exact for any draft distribution, so reshaping the draft the same way
only raises acceptance. Nothing here reads a tensor back to the host.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True, slots=True)
class SamplingParams:
    """How the next token is chosen: greedy when ``temperature`` is 0."""

    temperature: float = 0.0
    top_p: float = 1.0

    def __post_init__(self) -> None:
        if not self.temperature >= 0.0:
            raise ValueError(f"temperature must be >= 0, got {self.temperature}")
        if not 0.0 < self.top_p <= 1.0:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0


def probabilities(logits: torch.Tensor, params: SamplingParams) -> torch.Tensor:
    """Softmax of ``logits / temperature`` over the last axis, restricted to the top-p nucleus.

    Computed in float32 whatever the model dtype, so probabilities of low-precision models
    still sum to one closely enough for exact rejection sampling.
    """
    if params.greedy:
        raise ValueError("greedy decoding (temperature 0) has no sampling distribution")
    probs = torch.softmax(logits.float() / params.temperature, dim=-1)
    if params.top_p < 1.0:
        probs = _top_p_filter(probs, params.top_p)
    return probs


def _top_p_filter(probs: torch.Tensor, top_p: float) -> torch.Tensor:
    """Keep the smallest set of most likely tokens whose mass reaches ``top_p``; renormalise."""
    sorted_probs, order = probs.sort(dim=-1, descending=True)
    # A token stays if the mass strictly before it is below top_p, so the top token always stays.
    mass_before = sorted_probs.cumsum(dim=-1) - sorted_probs
    sorted_probs = sorted_probs.masked_fill(mass_before >= top_p, 0.0)
    kept = torch.zeros_like(probs).scatter_(-1, order, sorted_probs)
    return kept / kept.sum(dim=-1, keepdim=True)


def sample(probs: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """One draw per row of ``probs`` [..., V] -> ids [...]."""
    flat = probs.reshape(-1, probs.shape[-1])
    return torch.multinomial(flat, 1, generator=generator).reshape(probs.shape[:-1])


def sample_tokens(logits: torch.Tensor, params: SamplingParams) -> torch.Tensor:
    """One token per row of ``logits`` [R, V] from ``probabilities`` (torch's global generator:
    the batched generators' rows share one stream)."""
    return torch.multinomial(probabilities(logits, params), num_samples=1).squeeze(-1)


def next_tokens(logits: torch.Tensor, params: SamplingParams) -> tuple[torch.Tensor, torch.Tensor]:
    """The greedy choice and the chosen token of each row (the same tensor when greedy)."""
    greedy = logits.argmax(-1)
    return greedy, greedy if params.greedy else sample_tokens(logits, params)
