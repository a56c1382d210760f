"""Deciding which drafted tokens the target accepts.

Both rules are lossless. Greedy: a draft is kept while it equals the target's argmax,
then the target's own argmax follows (the "bonus" token), so the output is exactly what
plain greedy decoding would produce. Sampling: the speculative-sampling rule of Leviathan
et al. / Chen et al. (2023): accept draft x with probability min(1, p(x)/q(x)); at the
first rejection draw from norm(max(p - q, 0)); if every draft is accepted draw the bonus
from p. Every emitted token is then distributed exactly as the target's p.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from speculative.sampling import sample


@dataclass(frozen=True, slots=True)
class Verdict:
    """Outcome of one verification: the first ``accepted`` drafts are kept, then ``next_token``."""

    accepted: int
    next_token: int


def verify_greedy(draft_ids: torch.Tensor, target_logits: torch.Tensor) -> Verdict:
    """``draft_ids`` [K] target-vocabulary ids; ``target_logits`` [K+1, V] at the pending
    token and each draft."""
    target_ids = target_logits.argmax(dim=-1)
    num_drafts = draft_ids.shape[0]
    # Accepted = length of the leading run of matches; one sync for the whole step.
    matches = (target_ids[:num_drafts] == draft_ids).int().cumprod(dim=0)
    accepted = int(matches.sum())
    return Verdict(accepted=accepted, next_token=int(target_ids[accepted]))


def verify_sampled(
    draft_ids: torch.Tensor,
    draft_probs: torch.Tensor,
    target_probs: torch.Tensor,
    generator: torch.Generator,
) -> Verdict:
    """Speculative sampling over K drafts.

    ``draft_ids`` [K] were drawn from ``draft_probs`` [K, V] (zero outside the draft
    vocabulary); ``target_probs`` [K+1, V] is the target's distribution at the pending
    token and after each draft, already tempered and top-p filtered.
    """
    num_drafts = draft_ids.shape[0]
    rows = torch.arange(num_drafts, device=draft_ids.device)
    p_draft = target_probs[rows, draft_ids]
    q_draft = draft_probs[rows, draft_ids]
    uniforms = torch.rand(num_drafts, generator=generator, dtype=p_draft.dtype, device=p_draft.device)
    # u < p/q written without the division: q > 0 for a drawn token, and p = 0 never accepts.
    accepts = (uniforms * q_draft < p_draft).int().cumprod(dim=0)
    accepted = int(accepts.sum())
    if accepted == num_drafts:
        return Verdict(accepted=accepted, next_token=int(sample(target_probs[accepted], generator)))
    residual = (target_probs[accepted] - draft_probs[accepted]).clamp_(min=0.0)
    mass = float(residual.sum())
    # p == q up to rounding leaves no residual mass; p itself is then the right law.
    distribution = residual / mass if mass > 0.0 else target_probs[accepted]
    return Verdict(accepted=accepted, next_token=int(sample(distribution, generator)))
