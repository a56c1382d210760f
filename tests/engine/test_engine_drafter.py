"""The drafter's incremental cache gives what a fresh computation gives, and its chain
matches the training-time-test semantics the head was trained with."""

from __future__ import annotations

import torch

from engine.capture import TargetFeatureCapture
from engine.drafting.draft import Drafter
from engine.heads.model import TTTKeyValues
from engine.sampling import SamplingParams
from tests.speculative.engine_doubles import random_head, tiny_target

SEQUENCE = [5, 17, 33, 8, 41, 12, 60, 9, 27, 3, 71, 14, 22, 90, 31, 7, 66, 45, 12, 80, 2, 19, 54, 38]
K = 3


def target_features(architecture: str) -> tuple[torch.nn.Module, torch.Tensor, Drafter]:
    target = tiny_target(architecture)
    head = random_head(target, seed=3)
    with torch.inference_mode(), TargetFeatureCapture(target, head.config.aux_layer_ids) as capture:
        target(torch.tensor([SEQUENCE]))
        features = capture.aux_hidden_states()[0]
    return target, features, Drafter(head, int(target.config.vocab_size))


def test_incremental_drafting_equals_drafting_from_scratch() -> None:
    _, features, drafter = target_features("GptOssForCausalLM")
    ids = torch.tensor(SEQUENCE)
    params = SamplingParams(temperature=1.0)
    with torch.inference_mode():
        incremental = []
        with drafter.session():
            start = 0
            for stop in (9, 10, 13, 17, 18, 22):  # chunks of 1..4 features, as verifications give
                proposal = drafter.propose(
                    features[start:stop],
                    ids[start + 1 : stop + 1],
                    num_tokens=K,
                    params=params,
                    generator=torch.Generator().manual_seed(stop),
                )
                assert drafter.length == stop  # only entries from target features stay cached
                incremental.append(proposal)
                start = stop
        for stop, proposal in zip((9, 10, 13, 17, 18, 22), incremental, strict=True):
            with drafter.session():
                fresh = drafter.propose(
                    features[:stop],
                    ids[1 : stop + 1],
                    num_tokens=K,
                    params=params,
                    generator=torch.Generator().manual_seed(stop),
                )
            assert proposal.token_ids.tolist() == fresh.token_ids.tolist()
            assert proposal.probs is not None
            assert fresh.probs is not None
            torch.testing.assert_close(proposal.probs, fresh.probs, atol=1e-5, rtol=1e-4)


def test_chain_matches_training_time_test() -> None:
    """TTT step i at index p feeds token p+1+i at position p+i on the head's own output:
    fed the drafted tokens, its argmax at index p must be the next drafted token."""
    _, features, drafter = target_features("LlamaForCausalLM")
    head = drafter.head
    last = 15  # the last entry built from a target feature
    ids = torch.tensor(SEQUENCE)
    with torch.inference_mode():
        with drafter.session():
            proposal = drafter.propose(
                features[: last + 1], ids[1 : last + 2], num_tokens=K, params=SamplingParams(), generator=None
            )
        drafts = proposal.token_ids
        forced = torch.cat([ids[: last + 2], drafts]).unsqueeze(0)
        length = forced.shape[1]
        aux = torch.zeros(1, length, features.shape[-1])
        aux[0, : last + 1] = features[: last + 1]
        hidden = head.fuse(aux)
        positions = torch.arange(length).unsqueeze(0)
        steps = TTTKeyValues()
        for step in range(K):
            step_ids = torch.cat([forced[:, 1 + step :], torch.zeros(1, 1 + step, dtype=torch.long)], dim=1)
            hidden = head.forward_ttt_step(step_ids, hidden, positions + step, steps)
            predicted = head.draft_to_target_ids(head.compute_logits(hidden)[0, last].argmax())
            assert int(predicted) == int(drafts[step]), f"step {step}"
