"""A serving step's rows: the requests in the batch, what each feeds the target and asks of
the head, and a step whose work is queued on the device but whose verdicts are not read yet.

A queued step lets the engine overlap plain (K = 0) steps on a GPU, as distillation does
(``engine.generation``): the host queues step k+1, each row fed the token step k chose, still
on the device, and only then reads step k. Every plain step emits exactly one token a row, so
the host knows each row's positions without the read; what it cannot know is an EOS, so a row
that ended in step k runs in step k+1 as a dead row, whose output is dropped (it fits the
pool: a row's last token is never fed otherwise). A row whose ``max_new_tokens`` step k
reaches is left out of step k+1: the host knows that one without the read. A speculative step
needs the verdicts before it can draft (what each row accepted), so it reads any queued step
first. A row that ended keeps its pool slot until the step that holds it is read: the engine
admits a new request into it a step later.
"""

from __future__ import annotations

from contextlib import ExitStack
from dataclasses import dataclass, field

import torch

from engine.drafting.batch_draft import BatchDrafter, DraftRequest
from engine.drafting.draft import Proposal
from engine.segments import Segment, SegmentOutput, SequenceCache
from serving.requests import RequestHandle
from serving.step_verification import QueuedVerdicts
from speculative.sequence import SequenceState


@dataclass(slots=True, eq=False)
class ActiveRequest:
    """A request in the batch."""

    handle: RequestHandle
    sequence: SequenceState
    cache: SequenceCache
    generator: torch.Generator | None
    draft_slot: int | None  # its slot of the head's key/value pool, when it drafts
    session: ExitStack = field(default_factory=ExitStack)
    unseen: torch.Tensor | None = None  # target features the head has no cache entries for yet
    prefilled: bool = False

    @property
    def gone(self) -> bool:
        """Ended (EOS, length, an error) or cancelled: what a step computes for it is dropped."""
        return self.sequence.finished or self.handle.done


@dataclass(slots=True)
class QueuedStep:
    """A step queued on the device, its verdicts not yet read."""

    rows: list[ActiveRequest]
    proposals: list[Proposal | None]
    outputs: list[SegmentOutput]
    verdicts: QueuedVerdicts
    k: int
    timed: bool  # decoding only: its wall time may teach the speculation policy
    started: float  # perf_counter when it began queueing
    captures: int  # CUDA graph captures counted when it began

    def rows_gone(self, batch: list[ActiveRequest]) -> int:
        """Rows of this step no longer in ``batch``: each still holds its pool slot, which the
        step's queued work writes, until the step is read and let go."""
        kept = {id(active) for active in batch}
        return sum(1 for row in self.rows if id(row) not in kept)

    def next_inputs(self, batch: list[ActiveRequest]) -> tuple[list[ActiveRequest], list[Segment], bool]:
        """The rows and inputs of the next (plain) step, built before this one is read, and
        whether that step only decodes (no prompt in it). A row of this step takes the token
        this step chose, unread; one this step brings to its ``max_new_tokens`` is left out (it
        ends here: no dead step); a row that joined since feeds its prompt."""
        index_of = {id(row): index for index, row in enumerate(self.rows)}
        rows: list[ActiveRequest] = []
        segments: list[Segment] = []
        decoding_only = True
        for active in batch:
            index = index_of.get(id(active))
            if index is None:
                segment = segment_of(active, None)
                decoding_only = decoding_only and active.prefilled
            elif active.sequence.remaining > 1:
                segment = Segment(active.cache, [], keep=1, drafted=self.verdicts.next_token(index))
            else:
                continue
            rows.append(active)
            segments.append(segment)
        return rows, segments, decoding_only


def segment_of(active: ActiveRequest, proposal: Proposal | None) -> Segment:
    """What ``active`` feeds the target this step, its last token read back already: its
    prompt when it joins, else its last token, then its drafts if it has a proposal."""
    if not active.prefilled:
        return Segment(active.cache, active.sequence.prompt_ids, keep=1)
    if proposal is None:
        return Segment(active.cache, [active.sequence.last_token], keep=1)
    # The drafts stay on the device (their count is a shape): they come back with the verdicts.
    drafts = proposal.token_ids
    keep = 1 + int(drafts.shape[0])
    return Segment(active.cache, [active.sequence.last_token], keep=keep, drafted=drafts)


def draft_proposals(drafter: BatchDrafter | None, rows: list[ActiveRequest], k: int) -> list[Proposal | None]:
    """Up to ``k`` drafts for every row that can take them, in one batch."""
    proposals: list[Proposal | None] = [None] * len(rows)
    if drafter is None or k < 1:
        return proposals
    drafting: list[int] = []
    requests: list[DraftRequest] = []
    for index, active in enumerate(rows):
        request = _draft_request(drafter, active, k)
        if request is not None:
            drafting.append(index)
            requests.append(request)
    for index, proposal in zip(drafting, drafter.propose(requests), strict=True):
        proposals[index] = proposal
    return proposals


def _draft_request(drafter: BatchDrafter, active: ActiveRequest, k: int) -> DraftRequest | None:
    num_drafts = min(k, active.sequence.remaining - 1)
    slot = active.draft_slot
    if slot is None or not active.prefilled or num_drafts < 1 or active.unseen is None:
        return None
    # The head's entries lag the target by the positions it has not seen features of.
    next_ids = active.sequence.tokens_in(drafter.slots.length(slot) + 1, active.cache.length + 1)
    return DraftRequest(
        slot=slot,
        aux_hidden_states=active.unseen,
        next_token_ids=next_ids,
        num_tokens=num_drafts,
        params=active.handle.request.sampling,
        generator=active.generator,
    )
