"""One serving step's drafts read back and its rows verified, each in one host sync for the
whole batch (``serving.engine``'s step 4): greedy rows together, sampled rows by speculative
sampling with their own generators (``speculative.verification``)."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from engine.drafting.draft import Proposal
from engine.sampling import SamplingParams, rows_probabilities
from engine.segments import SegmentOutput
from speculative.verification import Verdict, greedy_verdicts, read_verdicts, sampled_verdicts


def drafted_ids(proposals: Sequence[Proposal | None]) -> list[list[int]]:
    """Each proposal's drafted ids on the host (the step's segments are host token lists), read
    back in one sync for the whole batch rather than one per sequence; [] where none."""
    drafted = [proposal.token_ids for proposal in proposals if proposal is not None]
    flat: list[int] = torch.cat(drafted).tolist() if drafted else []
    ids: list[list[int]] = []
    start = 0
    for proposal in proposals:
        count = 0 if proposal is None else int(proposal.token_ids.shape[0])
        ids.append(flat[start : start + count])
        start += count
    return ids


def step_verdicts(
    proposals: Sequence[Proposal | None],
    outputs: Sequence[SegmentOutput],
    samplings: Sequence[SamplingParams],
    generators: Sequence[torch.Generator | None],
    *,
    no_drafts: torch.Tensor,
    vocab_size: int,
) -> list[Verdict]:
    """The verdict of every row (its next token alone when it drafted nothing), greedy rows
    and sampled rows each decided on the device, read back in one host sync for the batch.

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
    by_row = dict(zip([*greedy, *sampled], read_verdicts(greedy_rows, sampled_rows), strict=True))
    return [by_row[row] for row in range(len(samplings))]


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
