"""Deciding which drafted tokens the target accepts.

Both rules are lossless. Greedy: a draft is kept while it equals the target's argmax,
then the target's own argmax follows (the "bonus" token), so the output is exactly what
plain greedy decoding would produce. Sampling: the speculative-sampling rule of Leviathan
et al. / Chen et al. (2023): accept draft x with probability min(1, p(x)/q(x)); at the
first rejection draw from norm(max(p - q, 0)); if every draft is accepted draw the bonus
from p. Every emitted token is then distributed exactly as the target's p.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch.nn.utils.rnn import pad_sequence

from engine.sampling import sample


@dataclass(frozen=True, slots=True)
class Verdict:
    """Outcome of one verification: the first ``accepted`` drafts are kept, then ``next_token``."""

    accepted: int
    next_token: int


def verify_greedy(draft_ids: torch.Tensor, target_logits: torch.Tensor) -> Verdict:
    """``draft_ids`` [K] target-vocabulary ids; ``target_logits`` [K+1, V] at the pending
    token and each draft. One host sync: a batch of one row of ``verify_greedy_rows``."""
    return verify_greedy_rows([draft_ids], [target_logits])[0]


def verify_greedy_rows(
    draft_ids: Sequence[torch.Tensor], target_logits: Sequence[torch.Tensor]
) -> list[Verdict]:
    """Greedy verification of every row of a batch at once, with one host sync for all.

    Row ``r`` drafted ``draft_ids[r]`` [K_r] (K_r may be 0: plain decoding's next token) and
    the target scored ``target_logits[r]`` [K_r+1, V]. A row accepts the leading run of drafts
    that equal the target's argmax, then takes the target's argmax after them. Verifying row
    by row would read two numbers back per row, each a device-to-host sync that stalls a GPU's
    queue; here every row's acceptance is computed on the device and read back in one
    ``tolist``."""
    if len(draft_ids) != len(target_logits):
        raise ValueError(f"{len(draft_ids)} rows of drafts but {len(target_logits)} of logits")
    if not draft_ids:
        return []
    for row, (drafts, logits) in enumerate(zip(draft_ids, target_logits, strict=True)):
        count = drafts.shape[0]
        if logits.shape[0] != count + 1:
            raise ValueError(f"row {row}: {count} drafts need {count + 1} logits, got {logits.shape[0]}")
    # Padding never matches: the target side pads with -1, the draft side with -2.
    targets = pad_sequence(
        [logits.argmax(dim=-1) for logits in target_logits], batch_first=True, padding_value=-1
    )
    drafts = pad_sequence(list(draft_ids), batch_first=True, padding_value=-2).to(targets.dtype)
    accepted = (targets[:, : drafts.shape[1]] == drafts).int().cumprod(dim=1).sum(dim=1)
    next_tokens = targets.gather(1, accepted.unsqueeze(1).long()).squeeze(1)
    pairs = torch.stack([accepted.long(), next_tokens], dim=1).tolist()
    return [Verdict(accepted=int(count), next_token=int(token)) for count, token in pairs]


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
