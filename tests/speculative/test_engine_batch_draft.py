"""Drafting a batch of sequences together proposes what drafting each alone proposes."""

from __future__ import annotations

import pytest
import torch

from engine.capture import TargetFeatureCapture
from speculative.batch_draft import DraftRequest, propose_batch
from speculative.draft import Drafter, Proposal
from speculative.sampling import SamplingParams
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
    drafters = [Drafter(head, vocab) for _ in SEQUENCES]
    generators = [torch.Generator().manual_seed(seed) for seed in range(len(SEQUENCES))]
    proposals: list[list[Proposal]] = [[] for _ in SEQUENCES]
    lengths: list[list[int]] = [[] for _ in SEQUENCES]
    sessions = [drafter.session() for drafter in drafters]
    for session in sessions:
        session.__enter__()
    try:
        with torch.inference_mode():
            for round_index in range(len(CHUNKS[0])):
                requests = []
                for index, drafter in enumerate(drafters):
                    start = drafter.length
                    stop = start + CHUNKS[index][round_index]
                    ids = torch.tensor(SEQUENCES[index])
                    requests.append(
                        DraftRequest(
                            drafter=drafter,
                            aux_hidden_states=features[index][start:stop],
                            next_token_ids=ids[start + 1 : stop + 1],
                            num_tokens=NUM_TOKENS[index][round_index],
                            params=params,
                            generator=None if params.greedy else generators[index],
                        )
                    )
                if batched:
                    made = propose_batch(head, requests)
                else:
                    made = [
                        request.drafter.propose(
                            request.aux_hidden_states,
                            request.next_token_ids,
                            num_tokens=request.num_tokens,
                            params=request.params,
                            generator=request.generator,
                        )
                        for request in requests
                    ]
                for index, proposal in enumerate(made):
                    proposals[index].append(proposal)
                    lengths[index].append(drafters[index].length)
    finally:
        for session in sessions:
            session.__exit__(None, None, None)
    return proposals, lengths


@pytest.mark.parametrize("variant", ["eagle3", "peagle"])
@pytest.mark.parametrize("params", [SamplingParams(), SamplingParams(temperature=0.8, top_p=0.9)])
def test_a_batch_proposes_what_each_sequence_alone_proposes(params: SamplingParams, variant: str) -> None:
    alone, alone_lengths = _rounds(params, batched=False, variant=variant)
    together, together_lengths = _rounds(params, batched=True, variant=variant)

    # Only entries built from target features stay cached, whichever way the chain was drafted.
    assert together_lengths == alone_lengths
    assert together_lengths[0] == [6, 7, 10, 12]
    for single, batch in zip(alone, together, strict=True):
        for one, many in zip(single, batch, strict=True):
            assert many.token_ids.tolist() == one.token_ids.tolist()
            if params.greedy:
                assert many.probs is None
            else:
                assert one.probs is not None
                assert many.probs is not None
                torch.testing.assert_close(many.probs, one.probs, atol=1e-5, rtol=1e-4)


def test_every_request_must_ask_for_a_draft() -> None:
    target = tiny_target("LlamaForCausalLM")
    head = random_head(target, seed=1)
    drafter = Drafter(head, int(target.config.vocab_size))
    request = DraftRequest(
        drafter=drafter,
        aux_hidden_states=torch.zeros(1, 3 * int(target.config.hidden_size)),
        next_token_ids=torch.tensor([3]),
        num_tokens=0,
        params=SamplingParams(),
        generator=None,
    )
    with pytest.raises(ValueError, match="at least 1 draft token"):
        propose_batch(head, [request])
    assert propose_batch(head, []) == []
