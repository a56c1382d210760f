"""Choosing every row's draft token at once, on the device: greedy rows take the argmax,
sampled rows draw from their own tempered, top-p distribution -- no host read and no Python
per row, so a sampled proposal runs like a greedy one and a CUDA graph can hold it.

A sampled row draws by inverting its distribution's cumulative sum at a uniform number
(``engine.sampling.draw_at``, as every seeded draw in the engine does): the first token whose
cumulative mass exceeds u. The uniforms are what make a graph possible: each
sampled row draws all of its proposal's, one a draft, from its own generator before the
proposal starts, outside any graph, and the graph only sums and searches. A row consumes its
generator the same way alone (``Drafter``), in a batch, eagerly or replayed, so a seeded
request drafts the same tokens whatever the batch it is in. (An exponential race, argmax of
p / E with E ~ Exp(1), needs a draw per vocabulary entry: on a CPU that cost 0.55 ms a row
and step for a 8,192-token draft vocabulary, more than the rest of the choice.)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from engine.sampling import SamplingParams, draw_at, row_probabilities
from engine.transfers import float_tables_to


@dataclass(frozen=True, slots=True)
class DraftChoice:
    """How each row of a proposal chooses its drafts: ``temperature`` [B] (0: greedy) and
    ``top_p`` [B] as the rows' ``SamplingParams``; ``uniforms`` [B, K] each row's draw in
    [0, 1) for chain step k (0 where a row is greedy or has stopped drafting)."""

    temperature: torch.Tensor
    top_p: torch.Tensor
    uniforms: torch.Tensor


def draft_choice(
    params: Sequence[SamplingParams],
    generators: Sequence[torch.Generator | None],
    num_tokens: Sequence[int],
    *,
    steps: int,
    device: torch.device,
) -> DraftChoice | None:
    """The choice of rows drafting with ``params`` (None when every row is greedy): each
    sampled row draws the uniforms of its own ``num_tokens`` drafts from its own generator, in
    one call, here, before any head forward; ``steps`` is the longest chain of the batch."""
    if all(row.greedy for row in params):
        return None
    # Refused before any row draws, so a refused proposal leaves every generator as it was.
    if any(generator is None for row, generator in zip(params, generators, strict=True) if not row.greedy):
        raise ValueError("sampled drafting needs a generator")
    uniforms = torch.zeros((len(params), steps), dtype=torch.float32, device=device)
    for row, (row_params, generator, count) in enumerate(zip(params, generators, num_tokens, strict=True)):
        if generator is not None and not row_params.greedy:
            uniforms[row, :count].uniform_(generator=generator)
    # Through pinned memory: a plain copy from the host would wait for the device's queue.
    temperature, top_p = float_tables_to(
        device, [row.temperature for row in params], [row.top_p for row in params]
    )
    return DraftChoice(temperature=temperature, top_p=top_p, uniforms=uniforms)


def choose(
    logits: torch.Tensor, choice: DraftChoice | None, step: int
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Chain step ``step``'s draft of every row of ``logits`` [B, V] (draft-vocabulary ids [B])
    and, when any row samples, the distributions the rows drew from [B, V] (a greedy row's is
    unused)."""
    # float32: a bfloat16 argmax on a CPU costs ~8x as much, for the same choice.
    greedy = logits.float().argmax(-1)
    if choice is None:
        return greedy, None
    probs = row_probabilities(logits, choice.temperature, choice.top_p)
    return torch.where(choice.temperature > 0, draw_at(probs, choice.uniforms[:, step]), greedy), probs


def on_target_vocabulary(
    probs: torch.Tensor, draft_to_target: torch.Tensor, target_vocab_size: int
) -> torch.Tensor:
    """Draft distributions [..., V_draft] as distributions over the target vocabulary [...,
    V_target], zero outside the draft vocabulary (what speculative sampling compares)."""
    full = probs.new_zeros((*probs.shape[:-1], target_vocab_size))
    return full.index_copy_(-1, draft_to_target, probs)
