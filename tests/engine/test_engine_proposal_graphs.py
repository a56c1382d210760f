"""A captured proposal's bookkeeping, on a CPU: buckets, padding rows, static inputs (a
sampled proposal's temperatures, top-p and uniforms among them) and recapture after the pool
grows. A stand-in "capture" runs the proposal eagerly on replay, so what is checked is
everything around the CUDA graph (tests/engine/test_engine_cuda.py replays real graphs where
a GPU is present)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

from engine.drafting.batch_draft import BatchDrafter, DraftRequest
from engine.drafting.draft import Proposal
from engine.drafting.proposal_graphs import ProposalGraphs
from engine.heads import draft_slots
from engine.sampling import SamplingParams
from tests.engine.eager_capture import eager_capture
from tests.speculative.engine_doubles import random_head, tiny_target


def _rounds(drafter: BatchDrafter, hidden: int, vocab: int, *, sampled: bool = False) -> list[Proposal]:
    """Rounds over different slots and lengths: 6 sequences of 3 new entries (bucket A); 3 of
    them given 140 (a prompt's worth: eager, and the pool grows if it must); the other 3, 3
    new entries again (bucket A, its rows past 3 left from the first round, whose slots have
    since moved on); all 6, one new entry each (bucket B). ``sampled``: every other slot
    samples, from a generator seeded by its round and slot."""
    generator = torch.Generator().manual_seed(1)
    slots = [drafter.slots.acquire() for _ in range(6)]
    proposals: list[Proposal] = []
    for round_index, (members, new) in enumerate(((slots, 3), (slots[3:], 140), (slots[:3], 3), (slots, 1))):
        requests = [
            DraftRequest(
                slot,
                torch.randn(new, 3 * hidden, generator=generator),
                torch.randint(3, vocab, (new,), generator=generator).tolist(),
                4,
                SamplingParams(0.8, 0.9) if sampled and slot % 2 else SamplingParams(),
                torch.Generator().manual_seed(10 * round_index + slot),
            )
            for slot in members
        ]
        with torch.inference_mode():
            proposals += drafter.propose(requests)
    return proposals


def _drafted(proposals: list[Proposal]) -> list[list[int]]:
    return [proposal.token_ids.tolist() for proposal in proposals]


@pytest.mark.parametrize("sampled", [False, True])
@pytest.mark.parametrize("first_positions", [1024, 8])
def test_replayed_proposals_draft_what_eager_proposals_draft(
    first_positions: int, sampled: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(draft_slots, "_INITIAL_POSITIONS", first_positions)
    target = tiny_target("LlamaForCausalLM")
    head = random_head(target, seed=4)
    vocab, hidden = int(target.config.vocab_size), int(target.config.hidden_size)
    graphed = BatchDrafter(head, vocab, max_sequences=6)
    graphs = ProposalGraphs(head, graphed.slots, graphed.draft_to_target, capture=eager_capture)
    graphed._graphs = graphs

    replayed = _rounds(graphed, hidden, vocab, sampled=sampled)
    plain = BatchDrafter(head, vocab, max_sequences=6)
    eager = _rounds(plain, hidden, vocab, sampled=sampled)

    assert _drafted(replayed) == _drafted(eager)
    for kept, reference in zip(replayed, eager, strict=True):
        # A sampled row's distributions come out of the replay too; a greedy row has none.
        if reference.probs is None:
            assert kept.probs is None
        else:
            assert kept.probs is not None
            torch.testing.assert_close(kept.probs, reference.probs)  # padded: other kernel shapes
    assert sampled == any(proposal.probs is not None for proposal in replayed)
    # Padding rows wrote nowhere a sequence keeps: every slot's committed entries are the same.
    for slot in range(6):
        length = plain.slots.length(slot)
        assert graphed.slots.length(slot) == length
        for kept, reference in zip(
            graphed.slots.pool.layer(0, torch.zeros(1)),
            plain.slots.pool.layer(0, torch.zeros(1)),
            strict=True,
        ):
            torch.testing.assert_close(kept[slot, :, :length], reference[slot, :, :length])
    # Buckets A (6 rows of 3 entries, 3 chain steps, 64 keys) and B (6 rows of 1, 3, 256); the
    # 140-entry round runs eagerly. A pool of 8 positions grows on the way (to 512 for B), so A
    # is captured again when its sequences come back; one of 1024 never grows, and A's capture
    # is replayed.
    assert graphs.captures == (2 if first_positions == 1024 else 3)
    assert graphed.slots.pool.capacity == max(first_positions, 512)
    assert not graphs.broken


def test_a_proposal_that_cannot_be_captured_is_drafted_eagerly() -> None:
    target = tiny_target("LlamaForCausalLM")
    head = random_head(target, seed=4)
    vocab, hidden = int(target.config.vocab_size), int(target.config.hidden_size)

    def failing_capture(function: Callable[[], torch.Tensor]) -> tuple[Callable[[], None], torch.Tensor]:
        raise RuntimeError("operation not permitted when stream is capturing")

    drafter = BatchDrafter(head, vocab, max_sequences=6)
    drafter._graphs = ProposalGraphs(head, drafter.slots, drafter.draft_to_target, capture=failing_capture)

    drafted = _rounds(drafter, hidden, vocab, sampled=True)

    assert drafter._graphs.broken
    assert _drafted(drafted) == _drafted(
        _rounds(BatchDrafter(head, vocab, max_sequences=6), hidden, vocab, sampled=True)
    )
