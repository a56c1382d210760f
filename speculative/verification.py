"""Deciding which drafted tokens the target accepts.

Both rules are lossless. Greedy: a draft is kept while it equals the target's argmax,
then the target's own argmax follows (the "bonus" token), so the output is exactly what
plain greedy decoding would produce. Sampling: the speculative-sampling rule of Leviathan
et al. / Chen et al. (2023): accept draft x with probability min(1, p(x)/q(x)); at the
first rejection draw from norm(max(p - q, 0)); if every draft is accepted draw the bonus
from p. Every emitted token is then distributed exactly as the target's p.

Each rule decides a whole batch on the device (``greedy_verdicts``, ``sampled_verdicts``)
and ``read_verdicts`` reads every row's outcome back in one host sync: on a GPU a step's
verification then waits for the device once, however many rows it has.
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
    """Greedy verification of every row of a batch at once, with one host sync for all
    (``greedy_verdicts``, read back)."""
    return read_verdicts(greedy_verdicts(draft_ids, target_logits))


def greedy_verdicts(draft_ids: Sequence[torch.Tensor], target_logits: Sequence[torch.Tensor]) -> torch.Tensor:
    """Greedy verification of every row of a batch on the device: [R, 2] (accepted, next token).

    Row ``r`` drafted ``draft_ids[r]`` [K_r] (K_r may be 0: plain decoding's next token) and
    the target scored ``target_logits[r]`` [K_r+1, V]. A row accepts the leading run of drafts
    that equal the target's argmax, then takes the target's argmax after them. Verifying row
    by row would read two numbers back per row, each a device-to-host sync that stalls a GPU's
    queue; here nothing is read until ``read_verdicts``."""
    _check_rows(draft_ids, target_logits)
    if not draft_ids:
        return torch.empty(0, 2, dtype=torch.long)
    # Padding never matches: the target side pads with -1, the draft side with -2.
    targets = pad_sequence(
        [logits.argmax(dim=-1) for logits in target_logits], batch_first=True, padding_value=-1
    )
    drafts = pad_sequence(list(draft_ids), batch_first=True, padding_value=-2).to(targets.dtype)
    accepted = (targets[:, : drafts.shape[1]] == drafts).int().cumprod(dim=1).sum(dim=1)
    next_tokens = targets.gather(1, accepted.unsqueeze(1).long()).squeeze(1)
    return torch.stack([accepted.long(), next_tokens], dim=1)


def verify_sampled(
    draft_ids: torch.Tensor,
    draft_probs: torch.Tensor,
    target_probs: torch.Tensor,
    generator: torch.Generator,
) -> Verdict:
    """Speculative sampling over K drafts.

    ``draft_ids`` [K] were drawn from ``draft_probs`` [K, V] (zero outside the draft
    vocabulary); ``target_probs`` [K+1, V] is the target's distribution at the pending
    token and after each draft, already tempered and top-p filtered. One host sync: a batch
    of one row of ``sampled_verdicts``.
    """
    return read_verdicts(sampled_verdicts([draft_ids], [draft_probs], [target_probs], [generator]))[0]


def sampled_verdicts(
    draft_ids: Sequence[torch.Tensor],
    draft_probs: Sequence[torch.Tensor],
    target_probs: Sequence[torch.Tensor],
    generators: Sequence[torch.Generator],
) -> torch.Tensor:
    """Speculative sampling of every row of a batch on the device: [R, 2] (accepted, next token).

    Row ``r`` is ``verify_sampled``'s arguments; K_r may be 0 (plain sampling: the token is
    drawn from ``target_probs[r][0]``, ``draft_probs[r]`` is [0, V]). Each row draws from its
    own generator, K_r uniforms then one token, in the order a row verified alone draws them,
    so a seeded request samples the same tokens whatever else is in the batch. Nothing is
    read back: which distribution the last token comes from is chosen on the device.
    """
    _check_rows(draft_ids, target_probs)
    if not (len(draft_ids) == len(draft_probs) == len(generators)):
        raise ValueError(
            f"{len(draft_ids)} rows of drafts, {len(draft_probs)} of draft distributions "
            f"and {len(generators)} generators"
        )
    rows = [
        _sampled_verdict(ids, q, p, generator)
        for ids, q, p, generator in zip(draft_ids, draft_probs, target_probs, generators, strict=True)
    ]
    return torch.stack(rows) if rows else torch.empty(0, 2, dtype=torch.long)


def _sampled_verdict(
    draft_ids: torch.Tensor, draft_probs: torch.Tensor, target_probs: torch.Tensor, generator: torch.Generator
) -> torch.Tensor:
    """One row of ``sampled_verdicts``: accept draft x with probability min(1, p(x)/q(x)); at
    the first rejection draw from norm(max(p - q, 0)); after K acceptances draw from p."""
    num_drafts = draft_ids.shape[0]
    if num_drafts == 0:  # plain sampling: nothing to accept, the token comes from p
        token = sample(target_probs[0], generator)
        return torch.stack([torch.zeros_like(token), token])
    positions = torch.arange(num_drafts, device=draft_ids.device)
    p_draft = target_probs[positions, draft_ids]
    q_draft = draft_probs[positions, draft_ids]
    uniforms = torch.rand(num_drafts, generator=generator, dtype=p_draft.dtype, device=p_draft.device)
    # u < p/q written without the division: q > 0 for a drawn token, and p = 0 never accepts.
    accepted = (uniforms * q_draft < p_draft).long().cumprod(dim=0).sum().view(1)
    p_next = target_probs.index_select(0, accepted)[0]
    # Past the last draft there is no q, and p itself is the law: the last draft's row, zeroed,
    # stands in for it, so no [K+1, V] copy is made per row and step.
    within = accepted < num_drafts
    q_next = draft_probs.index_select(0, accepted.clamp(max=num_drafts - 1))[0] * within
    residual = (p_next - q_next).clamp_(min=0.0)
    mass = residual.sum()
    # Every draft accepted: p. p == q up to rounding leaves no residual mass: p is the law too.
    from_p = ~within[0] | (mass <= 0.0)
    distribution = torch.where(from_p, p_next, residual / torch.where(from_p, 1.0, mass))
    return torch.cat([accepted, sample(distribution, generator).view(1)])


def read_verdicts(*verdicts: torch.Tensor) -> list[Verdict]:
    """The verdicts of every [R, 2] tensor given, in order, read back in one host sync."""
    filled = [rows for rows in verdicts if rows.shape[0] > 0]
    pairs: list[list[int]] = torch.cat(filled).tolist() if filled else []
    return [Verdict(accepted=int(count), next_token=int(token)) for count, token in pairs]


def _check_rows(draft_ids: Sequence[torch.Tensor], scores: Sequence[torch.Tensor]) -> None:
    """Each row scores its K drafts and the position after them: K + 1 rows of logits or probs."""
    if len(draft_ids) != len(scores):
        raise ValueError(f"{len(draft_ids)} rows of drafts but {len(scores)} of logits")
    for row, (drafts, logits) in enumerate(zip(draft_ids, scores, strict=True)):
        count = drafts.shape[0]
        if logits.shape[0] != count + 1:
            raise ValueError(f"row {row}: {count} drafts need {count + 1} logits, got {logits.shape[0]}")
