"""Drafting a batch of sequences together, each in a slot of one pool, proposes what drafting
each alone with its own cache proposes."""

from __future__ import annotations

import dataclasses
from collections import Counter
from contextlib import ExitStack

import pytest
import torch

from engine import sampling
from engine.capture import TargetFeatureCapture
from engine.dispatched_ops import DispatchedOps
from engine.drafting import batch_draft, draft_choice
from engine.drafting.batch_draft import BatchDrafter, DraftRequest
from engine.drafting.draft import Drafter, Proposal
from engine.heads import draft_slots
from engine.sampling import SamplingParams
from tests.fixtures.host_syncs import counting_host_reads
from tests.speculative.engine_doubles import random_head, tiny_target

SEQUENCES = [
    [5, 17, 33, 8, 41, 12, 60, 9, 27, 3, 71, 14, 22, 90, 31, 7],
    [44, 2, 19, 54, 38, 81, 6, 29, 13, 70, 25, 58],
    [11, 63, 35, 87, 4, 49, 20, 76, 32, 15, 68, 23, 51, 10, 84, 39, 26, 93],
]
# Features each sequence hands the head per round (1..4, as verifications give) and the
# drafts it asks for (fewer near a request's max_new_tokens).
CHUNKS = [(6, 1, 3, 2), (4, 2, 4, 1), (9, 4, 1, 2)]
NUM_TOKENS = [(3, 1, 2, 3), (2, 3, 3, 1), (1, 1, 3, 2)]


def _rounds(
    params: SamplingParams, batched: bool, variant: str = "eagle3"
) -> tuple[list[list[Proposal]], list[list[int]]]:
    target = tiny_target("Qwen3ForCausalLM")
    head = random_head(target, seed=5, variant=variant)
    vocab = int(target.config.vocab_size)
    features = []
    with torch.inference_mode(), TargetFeatureCapture(target, head.config.aux_layer_ids) as capture:
        for sequence in SEQUENCES:
            target(torch.tensor([sequence]))
            features.append(capture.aux_hidden_states()[0])
    generators = [torch.Generator().manual_seed(seed) for seed in range(len(SEQUENCES))]
    proposals: list[list[Proposal]] = [[] for _ in SEQUENCES]
    lengths: list[list[int]] = [[] for _ in SEQUENCES]
    drafters = [Drafter(head, vocab) for _ in SEQUENCES]
    batch = BatchDrafter(head, vocab, max_sequences=len(SEQUENCES) + 1)
    # Slots out of order: a sequence's slot need not be its row in the batch.
    slots = [batch.slots.acquire() for _ in range(len(SEQUENCES) + 1)][1:][::-1]
    with ExitStack() as stack:
        for drafter in drafters:
            stack.enter_context(drafter.session())
        with torch.inference_mode():
            for round_index in range(len(CHUNKS[0])):
                requests = []
                for index, slot in enumerate(slots):
                    start = batch.slots.length(slot) if batched else drafters[index].length
                    stop = start + CHUNKS[index][round_index]
                    ids = torch.tensor(SEQUENCES[index])
                    requests.append(
                        DraftRequest(
                            slot=slot,
                            aux_hidden_states=features[index][start:stop],
                            next_token_ids=ids[start + 1 : stop + 1].tolist(),
                            num_tokens=NUM_TOKENS[index][round_index],
                            params=params,
                            generator=None if params.greedy else generators[index],
                        )
                    )
                if batched:
                    made = batch.propose(requests)
                else:
                    made = [
                        drafter.propose(
                            request.aux_hidden_states,
                            torch.tensor(request.next_token_ids),
                            num_tokens=request.num_tokens,
                            params=request.params,
                            generator=request.generator,
                        )
                        for drafter, request in zip(drafters, requests, strict=True)
                    ]
                for index, proposal in enumerate(made):
                    proposals[index].append(proposal)
                    lengths[index].append(
                        batch.slots.length(slots[index]) if batched else drafters[index].length
                    )
    return proposals, lengths


@pytest.mark.parametrize("first_positions", [256, 4])
@pytest.mark.parametrize("variant", ["eagle3", "peagle"])
@pytest.mark.parametrize("params", [SamplingParams(), SamplingParams(temperature=0.8, top_p=0.9)])
def test_a_batch_proposes_what_each_sequence_alone_proposes(
    params: SamplingParams, variant: str, first_positions: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A pool of 4 positions a slot grows twice on the way (to 16, then 32): nothing written is lost.
    monkeypatch.setattr(draft_slots, "_INITIAL_POSITIONS", first_positions)
    alone, alone_lengths = _rounds(params, batched=False, variant=variant)
    together, together_lengths = _rounds(params, batched=True, variant=variant)

    # Only entries built from target features stay cached, whichever way the chain was drafted.
    assert together_lengths == alone_lengths
    assert together_lengths[0] == [6, 7, 10, 12]
    assert all(
        length == sum(chunks)
        for length, chunks in zip([lengths[-1] for lengths in together_lengths], CHUNKS, strict=True)
    )
    for single, batch in zip(alone, together, strict=True):
        for one, many in zip(single, batch, strict=True):
            assert many.token_ids.tolist() == one.token_ids.tolist()
            if params.greedy:
                assert many.probs is None
            else:
                assert one.probs is not None
                assert many.probs is not None
                torch.testing.assert_close(many.probs, one.probs, atol=1e-5, rtol=1e-4)


def _request(target_hidden: int, slot: int, num_tokens: int) -> DraftRequest:
    return DraftRequest(
        slot=slot,
        aux_hidden_states=torch.zeros(1, 3 * target_hidden),
        next_token_ids=[3],
        num_tokens=num_tokens,
        params=SamplingParams(),
        generator=None,
    )


def test_every_request_must_ask_for_a_draft_from_a_slot_of_its_own() -> None:
    target = tiny_target("LlamaForCausalLM")
    batch = BatchDrafter(random_head(target, seed=1), int(target.config.vocab_size), max_sequences=2)
    hidden = int(target.config.hidden_size)
    slot = batch.slots.acquire()
    with pytest.raises(ValueError, match="at least 1 draft token"):
        batch.propose([_request(hidden, slot, 0)])
    with pytest.raises(ValueError, match="share a draft slot"):
        batch.propose([_request(hidden, slot, 1), _request(hidden, slot, 1)])
    assert batch.slots.length(slot) == 0  # refused before anything was written
    assert batch.propose([]) == []


def test_slots_run_out_and_come_back() -> None:
    target = tiny_target("LlamaForCausalLM")
    batch = BatchDrafter(random_head(target, seed=1), int(target.config.vocab_size), max_sequences=1)
    slot = batch.slots.acquire()
    with pytest.raises(RuntimeError, match="all 1 draft slots are in use"):
        batch.slots.acquire()
    batch.slots.release(slot)
    with pytest.raises(ValueError, match="not in use"):
        batch.slots.release(slot)
    assert batch.slots.acquire() == slot


def _mixed_requests(drafter: BatchDrafter, batch: int, hidden: int, *, sampled: bool) -> list[DraftRequest]:
    """``batch`` requests of 2-4 new entries and 4 drafts each, in slots of ``drafter``;
    ``sampled``: every other row samples, so a batch of 6 mixes both kinds."""
    return [
        DraftRequest(
            slot=drafter.slots.acquire(),
            aux_hidden_states=torch.randn(2 + row % 3, 3 * hidden),
            next_token_ids=[(7 * row + column) % 90 for column in range(2 + row % 3)],
            num_tokens=4,
            params=SamplingParams(0.8, 0.9) if sampled and row % 2 == 0 else SamplingParams(),
            generator=torch.Generator().manual_seed(row),
        )
        for row in range(batch)
    ]


@pytest.mark.parametrize("sampled", [False, True])
@pytest.mark.parametrize("variant", ["eagle3", "peagle"])
def test_a_step_costs_the_same_attention_calls_and_no_host_read_whatever_the_batch(
    variant: str, sampled: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One head forward per chain step for the whole batch (one for a P-EAGLE head), each one
    attention call; drafting, greedy or sampled, never reads a tensor back to the host."""
    target = tiny_target("LlamaForCausalLM")
    head = random_head(target, seed=2, variant=variant)
    hidden = int(target.config.hidden_size)
    calls = {"attention": 0}
    attention = torch.nn.functional.scaled_dot_product_attention

    def counted(*args: object, **kwargs: object) -> torch.Tensor:
        calls["attention"] += 1
        return attention(*args, **kwargs)  # type: ignore[arg-type]

    counts: dict[int, tuple[int, int]] = {}
    for batch in (1, 6):
        drafter = BatchDrafter(head, int(target.config.vocab_size), max_sequences=batch)
        requests = _mixed_requests(drafter, batch, hidden, sampled=sampled)
        calls["attention"] = 0
        with (
            torch.inference_mode(),
            counting_host_reads(monkeypatch) as reads,
            monkeypatch.context() as patch,
        ):
            patch.setattr(torch.nn.functional, "scaled_dot_product_attention", counted)
            proposals = drafter.propose(requests)
            counts[batch] = (calls["attention"], reads.count)
        assert [len(proposal.token_ids) for proposal in proposals] == [4] * batch

    assert counts[1] == counts[6] == ((1 if variant == "peagle" else 4), 0)


def test_a_sampled_proposal_dispatches_the_same_ops_whatever_the_batch_but_its_draws(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """No Python per sampled row in a proposal: beyond each row's draw of its uniforms from
    its own generator (and the views that index them), a batch of 6 dispatches exactly the
    operators a batch of 1 does. (A CPU searches a nucleus tier by tier, as many tiers as the
    batch's hardest row needs; here it sorts whole rows, as a GPU does, so the count is fixed.)"""
    monkeypatch.setattr(sampling, "CPU_CANDIDATE_TIERS", ())
    target = tiny_target("LlamaForCausalLM")
    head = random_head(target, seed=2)
    hidden = int(target.config.hidden_size)
    per_row = {"aten.uniform_", "aten.select", "aten.slice", "aten.view"}
    dispatched: dict[int, Counter[str]] = {}
    for batch in (2, 6):
        drafter = BatchDrafter(head, int(target.config.vocab_size), max_sequences=batch)
        requests = _mixed_requests(drafter, batch, hidden, sampled=True)
        with torch.inference_mode(), DispatchedOps() as ops:
            drafter.propose(requests)
        dispatched[batch] = Counter(ops.names)

    assert dispatched[6]["aten.uniform_"] == 3  # rows 0, 2 and 4 sample
    two, six = ({op: n for op, n in dispatched[b].items() if op not in per_row} for b in (2, 6))
    assert six == two


def test_a_mixed_batch_maps_only_its_sampling_rows_onto_the_target_vocabulary(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A greedy row's draft distributions are never read: only the sampling rows' are mapped
    onto the target vocabulary, and each still gets its own row's."""
    target = tiny_target("LlamaForCausalLM")
    head = random_head(target, seed=2)
    hidden = int(target.config.hidden_size)
    vocab = int(target.config.vocab_size)
    mapped_rows: list[int] = []
    mapping = draft_choice.on_target_vocabulary

    def recorded(probs: torch.Tensor, *args: object) -> torch.Tensor:
        mapped_rows.append(probs.shape[0])
        return mapping(probs, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(batch_draft, "on_target_vocabulary", recorded)
    proposals = {}
    for sampled_rows in ("every other", "all"):
        drafter = BatchDrafter(head, vocab, max_sequences=6)
        torch.manual_seed(0)  # the same entries both times
        requests = _mixed_requests(drafter, 6, hidden, sampled=True)
        if sampled_rows == "all":
            requests = [dataclasses.replace(request, params=SamplingParams(0.8, 0.9)) for request in requests]
        with torch.inference_mode():
            proposals[sampled_rows] = drafter.propose(requests)

    assert mapped_rows == [3, 6]
    mixed, every = proposals["every other"], proposals["all"]
    for row in range(6):
        if row % 2:
            assert mixed[row].probs is None
            continue
        probs = mixed[row].probs
        assert probs is not None
        assert probs.shape == (4, vocab)
        # A row's distributions depend only on its own draws: the same as in an all-sampling batch.
        torch.testing.assert_close(probs, every[row].probs)
        torch.testing.assert_close(mixed[row].token_ids, every[row].token_ids)
