"""One serving step's rows verified and read back, with the drafts they judged, in one host
sync for the whole batch (``serving.engine``'s step 4): greedy rows together, sampled rows by
speculative sampling with their own generators (``speculative.verification``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from engine.drafting.draft import Proposal
from engine.sampling import SamplingParams, rows_probabilities
from engine.segments import SegmentOutput
from speculative.verification import (
    Verdict,
    VerdictsCopy,
    greedy_verdicts,
    queue_verdicts_and_drafts,
    sampled_verdicts,
)


@dataclass(frozen=True, slots=True)
class RowVerdict:
    """One row's verdict and the ids it drafted this step ([] where none), on the host."""

    verdict: Verdict
    drafted: list[int]

    @property
    def accepted_tokens(self) -> list[int]:
        """What the row emits: its accepted drafts, then the target's token."""
        return [*self.drafted[: self.verdict.accepted], self.verdict.next_token]


@dataclass(frozen=True, slots=True)
class QueuedVerdicts:
    """A step's verdicts decided on the device and queued for the host, not yet read."""

    copy: VerdictsCopy
    pair_of: list[int]  # each row's verdict pair, in the copy's order (greedy rows first)
    draft_counts: list[int]  # ids each row drafted
    pairs: torch.Tensor  # [rows, 2] (accepted, next token) on the device, in the copy's order

    def next_token(self, row: int) -> torch.Tensor:
        """``row``'s next token, [1] on the device (a view: no kernel), for a step queued
        before this one is read."""
        at = self.pair_of[row]
        return self.pairs[at : at + 1, 1]

    def read(self) -> list[RowVerdict]:
        """Every row's verdict and drafts, in row order: the step's one read."""
        verdicts, flat = self.copy.read()
        result: list[RowVerdict] = []
        start = 0
        for at, count in zip(self.pair_of, self.draft_counts, strict=True):
            result.append(RowVerdict(verdicts[at], flat[start : start + count]))
            start += count
        return result


def queue_step_verdicts(
    proposals: Sequence[Proposal | None],
    outputs: Sequence[SegmentOutput],
    samplings: Sequence[SamplingParams],
    generators: Sequence[torch.Generator | None],
    *,
    no_drafts: torch.Tensor,
    vocab_size: int,
) -> QueuedVerdicts:
    """The verdict of every row (its next token alone when it drafted nothing), greedy rows
    and sampled rows each decided on the device, queued for the host with the drafts (the
    step fed them to the target on the device, unread): ``read`` takes them back in one host
    sync for the batch.

    ``no_drafts`` is an empty id tensor on the device, made once by the caller."""
    greedy: list[int] = []
    sampled: list[int] = []
    for index, sampling in enumerate(samplings):
        (greedy if sampling.greedy else sampled).append(index)
    drafts = [proposal.token_ids if proposal is not None else no_drafts for proposal in proposals]
    scored = [
        output.logits if proposal is not None else output.logits[-1:]
        for proposal, output in zip(proposals, outputs, strict=True)
    ]
    greedy_rows = greedy_verdicts([drafts[row] for row in greedy], [scored[row] for row in greedy])
    sampled_rows = sampled_verdicts(
        [drafts[row] for row in sampled],
        [_draft_probs(proposals[row], vocab_size, no_drafts.device) for row in sampled],
        rows_probabilities([scored[row] for row in sampled], [samplings[row] for row in sampled]),
        [_generator(generators[row]) for row in sampled],
    )
    # A step has rows, so at least one kind decided some; a cat only when both did.
    decided = [rows for rows in (greedy_rows, sampled_rows) if rows.shape[0] > 0]
    pairs = torch.cat(decided) if len(decided) > 1 else decided[0]
    return QueuedVerdicts(
        copy=queue_verdicts_and_drafts([pairs], drafts),
        pair_of=_inverse([*greedy, *sampled]),
        draft_counts=[int(ids.shape[0]) for ids in drafts],
        pairs=pairs,
    )


def _inverse(order: list[int]) -> list[int]:
    """Where each row stands in ``order`` (a permutation of the rows)."""
    positions = [0] * len(order)
    for position, row in enumerate(order):
        positions[row] = position
    return positions


def _draft_probs(proposal: Proposal | None, vocab_size: int, device: torch.device) -> torch.Tensor:
    if proposal is None:
        return torch.empty(0, vocab_size, device=device)
    if proposal.probs is None:
        raise RuntimeError("sampled verification needs the draft distributions")
    return proposal.probs


def _generator(generator: torch.Generator | None) -> torch.Generator:
    if generator is None:
        raise RuntimeError("a sampled request has no generator")
    return generator
