"""One slot runner (pool and step graphs) kept over ``generate_batched`` calls: calls that fit it
reply exactly as with a runner of their own and capture no graph again, and between calls the
model is as it was handed in. The graphs are the eager stand-in on a CPU
(tests/engine/test_engine_step_graphs.py); tests/engine/test_engine_cuda.py replays real ones."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from transformers import PreTrainedModel

from engine import cuda_graphs
from engine import runner as runner_module
from engine.cuda_graphs import CaptureTotals, DecodeGraphs
from engine.generation import generate_batched
from engine.packed_generation import Recording
from engine.replies import Reply
from engine.runner import SlotRunner
from engine.runner_cache import CAPACITY_STEP, RunnerCache
from engine.sampling import SamplingParams
from tests.engine.eager_capture import eager_capture
from tests.engine.reply_checks import assert_same_replies_and_features
from trainer.models.tiny import build_tiny_target

VOCAB = 96
NEVER = VOCAB + 1  # rows end at the length cap
GREEDY = SamplingParams(temperature=0.0, top_p=1.0)
RECORDING = Recording(layers=[0, 1, 2], dtypes=(torch.float32, torch.float32))
# The first call needs 60 + 12 + 1 = 73 positions a slot (a pool of 128); the second 80 + 12 + 1
# = 93, which fits that pool, but is no multiple of the 32 keys a step reads at a time: its last
# steps read 93 keys, as a runner of its own would, not 96 or 128. Each call's short prompts run
# first, in steps of at most 64 keys (one graph bucket), then its long one (another).
FIRST = [[5, 17, 33, 8], [40, 2, 71], [9, 9, 12], [25, 3], [30, 31, 32], [6] * 60]
SECOND = [[7, 1, 2], [50, 51, 52, 53], [11], [60, 61], [70, 71, 72], [3] * 80]
OPTIONS: dict[str, Any] = {"stop_ids": [NEVER], "max_new_tokens": 12, "batch_size": 3, "sampling": GREEDY}


@pytest.fixture
def target(monkeypatch: pytest.MonkeyPatch) -> PreTrainedModel:
    """A tiny Llama whose runners capture step graphs with the eager stand-in."""

    def graphs(runner: SlotRunner, max_rows: int) -> DecodeGraphs:
        return DecodeGraphs(runner, max_rows, capture=eager_capture)

    monkeypatch.setattr(runner_module, "graphs_wanted", lambda device, config: True)
    monkeypatch.setattr(runner_module, "DecodeGraphs", graphs)
    monkeypatch.setattr(cuda_graphs, "CAPTURED", CaptureTotals())
    return build_tiny_target("LlamaForCausalLM", vocab_size=VOCAB)


@pytest.fixture
def keys_read(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The keys every step reads: an eager forward's, or the replayed graph's bucket."""
    read: list[int] = []
    replaying = [0]
    forward, run = SlotRunner.forward, DecodeGraphs.run

    def eager(self: SlotRunner, *args: Any, key_length: int, **kwargs: Any) -> Any:
        if not replaying[0]:
            read.append(key_length)
        return forward(self, *args, key_length=key_length, **kwargs)

    def replayed(self: DecodeGraphs, input_ids: torch.Tensor, *args: Any) -> Any:
        key_length = args[2]
        read.append(self.bucket(input_ids.shape[0], input_ids.shape[1], key_length)[2])
        replaying[0] += 1
        try:
            return run(self, input_ids, *args)
        finally:
            replaying[0] -= 1

    monkeypatch.setattr(SlotRunner, "forward", eager)
    monkeypatch.setattr(DecodeGraphs, "run", replayed)
    return read


def _run(
    model: PreTrainedModel, prompts: list[list[int]], runners: RunnerCache | None
) -> tuple[list[Reply | None], CaptureTotals]:
    with cuda_graphs.captures_during() as captured:
        replies, stopped = generate_batched(
            model, prompts, recorder=RECORDING.recorder(model), runners=runners, **OPTIONS
        )
    assert not stopped
    return replies, captured()


def test_calls_that_fit_share_one_runner_and_reply_as_with_their_own(
    target: PreTrainedModel, keys_read: list[int]
) -> None:
    own = [_run(target, prompts, None) for prompts in (FIRST, SECOND)]
    keys_own = list(keys_read)
    keys_read.clear()

    with RunnerCache(target) as runners:
        shared = [_run(target, prompts, runners) for prompts in (FIRST, SECOND)]
        assert runners.built == 1

    for (own_replies, _), (shared_replies, _) in zip(own, shared, strict=True):
        assert_same_replies_and_features(own_replies, shared_replies)
    # Step by step the same keys read: a pool larger than the call needs changes nothing.
    assert keys_read == keys_own
    assert 93 in keys_own
    assert max(keys_own) == 93
    # The second call replays the first call's graph of up to 64 keys; it captures only its
    # longest keys' bucket, which is capped at its own 93 positions.
    (_, first_own), (_, second_own) = own
    (_, first_shared), (_, second_shared) = shared
    assert first_shared.captures == first_own.captures
    assert second_own.captures == 2
    assert second_shared.captures == 1


def test_between_calls_the_model_is_as_handed_in(target: PreTrainedModel) -> None:
    attention = target.config._attn_implementation
    head = target.get_output_embeddings()  # type: ignore[no-untyped-call]
    prompt = torch.tensor([FIRST[1]])
    expected = target(prompt).logits
    with RunnerCache(target) as runners:
        for prompts in (FIRST, SECOND):
            _run(target, prompts, runners)
            assert target.config._attn_implementation == attention
            assert target.get_output_embeddings() is head  # type: ignore[no-untyped-call]
            torch.testing.assert_close(target(prompt).logits, expected)


def test_a_call_the_runner_does_not_fit_gets_a_new_one(target: PreTrainedModel) -> None:
    longer = [[4] * (2 * CAPACITY_STEP), [5, 6]]
    with RunnerCache(target) as runners:
        _run(target, FIRST, runners)
        first = runners.take(rows=3, capacity=73, recorder=RECORDING.recorder(target))
        runners.give_back(first)
        assert runners.built == 1

        _run(target, longer, runners)  # more positions than the pool holds (and fewer rows)
        assert runners.built == 2
        assert first.graphs is None  # closed: its pool and graphs are not kept beside the new one
        _run(target, FIRST, runners)  # three rows again
        assert runners.built == 3
        generate_batched(target, FIRST, runners=runners, **OPTIONS)  # no features recorded
        assert runners.built == 4
        other = Recording(layers=[0, 1], dtypes=(torch.float32, torch.float32))
        generate_batched(target, FIRST, recorder=other.recorder(target), runners=runners, **OPTIONS)
        assert runners.built == 5


def test_a_cache_of_another_model_is_refused(target: PreTrainedModel) -> None:
    other = build_tiny_target("LlamaForCausalLM", vocab_size=VOCAB)
    with RunnerCache(other) as runners, pytest.raises(ValueError, match="another model"):
        generate_batched(target, FIRST, runners=runners, **OPTIONS)
