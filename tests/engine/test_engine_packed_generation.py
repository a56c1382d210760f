"""Continuous-batching generation for distillation: a row that ends makes room for the next prompt."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
from transformers import PreTrainedModel

from engine.generation import generate_batched
from engine.packed_generation import Recording, generate_packed, packing_supported
from engine.replies import Reply
from engine.sampling import SamplingParams, sample_tokens
from trainer.models.tiny import build_tiny_target

VOCAB = 96
GREEDY = SamplingParams(temperature=0.0, top_p=1.0)
PROMPTS = [[5, 17, 33, 8], [40, 2, 71], [9, 9, 12, 60, 61, 3], [25], [30, 31, 32, 33, 34]]


@pytest.fixture(scope="module")
def target() -> PreTrainedModel:
    return build_tiny_target("LlamaForCausalLM", vocab_size=VOCAB)


def greedy_alone(model: PreTrainedModel, prompt: list[int], steps: int) -> list[int]:
    """Batch-1 greedy tokens from transformers' generate (no stop token)."""
    output = model.generate(  # type: ignore[operator]
        torch.tensor([prompt]), do_sample=False, max_new_tokens=steps, min_new_tokens=steps, pad_token_id=0
    )
    return [int(t) for t in output[0, len(prompt) :].tolist()]


def count_forwards(model: PreTrainedModel) -> tuple[list[int], torch.utils.hooks.RemovableHandle]:
    calls: list[int] = []
    handle = model.register_forward_hook(lambda *_: calls.append(1))
    return calls, handle


def test_greedy_replies_equal_each_prompt_generated_alone(target: PreTrainedModel) -> None:
    alone = [greedy_alone(target, prompt, 6) for prompt in PROMPTS]
    # A stop token that ends some rows early and not others: ragged ends, rows joining mid-run.
    stop = alone[0][2]
    replies, stopped = generate_packed(
        target, PROMPTS, stop_ids=[stop], max_new_tokens=6, batch_size=2, sampling=GREEDY
    )
    assert not stopped
    for expected, reply in zip(alone, replies, strict=True):
        assert reply is not None
        cut = expected.index(stop) if stop in expected else None
        if cut is None:
            assert (reply.tokens, reply.stop_token) == (expected, None)
        else:
            assert (reply.tokens, reply.stop_token) == (expected[:cut], stop)


def test_a_row_that_ends_hands_its_place_to_the_next_prompt_at_once(target: PreTrainedModel) -> None:
    prompts = PROMPTS[:3]
    alone = [greedy_alone(target, prompt, 4) for prompt in prompts]
    stop = alone[0][0]
    assert all(stop not in tokens for tokens in alone[1:]), "precondition: only the first row stops early"
    calls, handle = count_forwards(target)
    try:
        replies, _ = generate_packed(
            target, prompts, stop_ids=[stop], max_new_tokens=4, batch_size=2, sampling=GREEDY
        )
    finally:
        handle.remove()
    assert replies[0] is not None
    assert replies[0].tokens == []
    assert replies[0].stop_token == stop
    # Row 0 ends at step 1; row 2 joins at step 2 beside row 1 (steps 1-4) and ends at step 5.
    # Fixed batches would take 4 steps for (0, 1), then 4 more for 2.
    assert len(calls) == 5


def test_should_stop_returns_rows_in_flight_cut_and_never_started_ones_as_none(
    target: PreTrainedModel,
) -> None:
    steps: list[int] = []

    def stop_after_two_steps() -> bool:
        steps.append(1)
        return len(steps) > 2

    replies, stopped = generate_packed(
        target,
        PROMPTS,
        stop_ids=[VOCAB + 1],  # never generated: nothing ends on its own
        max_new_tokens=8,
        batch_size=2,
        sampling=GREEDY,
        should_stop=stop_after_two_steps,
    )
    assert stopped
    assert [None if r is None else (len(r.tokens), r.stop_token) for r in replies] == [
        (2, None),
        (2, None),
        None,
        None,
        None,
    ]


@pytest.mark.parametrize("generate", [generate_packed, generate_batched])
def test_a_stop_that_comes_as_the_last_row_ends_leaves_a_complete_run(
    target: PreTrainedModel, generate: Callable[..., tuple[list[Reply | None], bool]]
) -> None:
    """Both generation paths: a shard whose stop falls as its last reply ends is done."""
    delivered: list[int] = []
    replies, stopped = generate(
        target,
        PROMPTS,
        stop_ids=[VOCAB + 1],
        max_new_tokens=3,
        batch_size=2,
        sampling=GREEDY,
        should_stop=lambda: len(delivered) == len(PROMPTS),
        on_reply=lambda index, _reply: delivered.append(index),
    )
    assert not stopped
    assert all(reply is not None and len(reply.tokens) == 3 for reply in replies)


def test_recorded_features_cover_the_prompt_and_every_fed_reply_token(target: PreTrainedModel) -> None:
    replies, _ = generate_packed(
        target,
        PROMPTS[:2],
        stop_ids=[VOCAB + 1],
        max_new_tokens=3,
        batch_size=2,
        sampling=GREEDY,
        recording=Recording(layers=[0, 1, 2], dtypes=(torch.float32, torch.float32)),
    )
    for prompt, reply in zip(PROMPTS[:2], replies, strict=True):
        assert reply is not None
        assert reply.features is not None
        length = len(prompt) + 3
        hidden = target.config.hidden_size
        assert reply.features.aux_hidden_states.shape == (length, 3 * hidden)
        assert reply.features.final_hidden.shape == (length, hidden)
        # The last generated token is never fed back: zeros; every earlier position is recorded.
        assert reply.features.final_hidden[-1].abs().sum() == 0
        assert (reply.features.final_hidden[:-1].abs().sum(-1) > 0).all()
        # Greedy: the target's argmax after each position from the prompt's last on is the reply.
        assert reply.features.argmax_ids[len(prompt) - 1 : -1].tolist() == reply.tokens
        assert reply.features.argmax_ids[: len(prompt) - 1].abs().sum() == 0


def test_the_model_comes_back_with_its_own_attention(target: PreTrainedModel) -> None:
    before = target.config._attn_implementation
    generate_packed(target, PROMPTS[:1], stop_ids=[1], max_new_tokens=2, batch_size=1, sampling=GREEDY)
    assert target.config._attn_implementation == before


def test_sliding_window_models_are_not_packed() -> None:
    assert packing_supported(build_tiny_target("Qwen3ForCausalLM", vocab_size=VOCAB))
    assert not packing_supported(build_tiny_target("GptOssForCausalLM", vocab_size=VOCAB))


def test_sampling_keeps_to_the_top_p_nucleus() -> None:
    logits = torch.log(torch.tensor([[0.6, 0.3, 0.05, 0.05]])).repeat(400, 1)
    torch.manual_seed(0)
    nucleus = sample_tokens(logits, SamplingParams(temperature=1.0, top_p=0.8))
    assert set(nucleus.tolist()) == {0, 1}
    assert sample_tokens(logits, SamplingParams(temperature=1.0, top_p=0.5)).eq(0).all()
    # Without a nucleus every token can come out, at about its probability.
    free = sample_tokens(logits, SamplingParams(temperature=1.0, top_p=1.0))
    assert set(free.tolist()) == {0, 1, 2, 3}
    assert 0.5 < float(free.eq(0).float().mean()) < 0.7


def test_a_shared_prefix_runs_once_and_changes_no_reply_or_feature(target: PreTrainedModel) -> None:
    prefix = [7, 11, 13]
    prompts = [[*prefix, 20, 21], [*prefix, 30], [40, 41, 42], prefix]  # the last two cannot share it
    recording = Recording(layers=[0, 1, 2], dtypes=(torch.float32, torch.float32))
    options: dict[str, Any] = {
        "stop_ids": [VOCAB + 1],
        "max_new_tokens": 4,
        "batch_size": 4,
        "sampling": GREEDY,
    }
    alone, _ = generate_packed(target, prompts, recording=recording, **options)
    calls, handle = count_forwards(target)
    tokens_run: list[int] = []
    hook = target.model.embed_tokens.register_forward_hook(
        lambda _m, args, _o: tokens_run.append(int(args[0].shape[-1]))
    )
    try:
        shared, _ = generate_packed(target, prompts, recording=recording, shared_prefix=prefix, **options)
    finally:
        handle.remove()
        hook.remove()
    # The prefix alone, then one step whose prefill skips it in the two prompts that start with it.
    assert tokens_run[:2] == [3, 2 + 1 + 3 + 3]
    assert len(calls) == 1 + 4
    for expected, reply in zip(alone, shared, strict=True):
        assert reply is not None
        assert expected is not None
        assert reply.tokens == expected.tokens
        assert reply.features is not None
        assert expected.features is not None
        # The prefix's rows run in another matmul shape: equal up to the last bits.
        torch.testing.assert_close(
            reply.features.aux_hidden_states, expected.features.aux_hidden_states, atol=1e-4, rtol=1e-4
        )
        torch.testing.assert_close(
            reply.features.final_hidden, expected.features.final_hidden, atol=1e-4, rtol=1e-4
        )
        assert torch.equal(reply.features.argmax_ids, expected.features.argmax_ids)
