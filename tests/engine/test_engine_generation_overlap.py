"""Reading each step's ended rows a step late (``overlap``, a GPU's default), once the next step
is queued: the replies and features are the ones read at once gives, and the host reads step
k's snapshot only after step k+1 is queued.

On a CPU both orders run the same operations, one after another; what differs is the host's
bookkeeping: rows that ended are freed (and their slots refilled) a step later, and a snapshot
can be older than a slot's new row."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from transformers import PreTrainedModel

from engine import generation, step_readback
from engine.generation import generate_batched
from engine.packed_generation import Recording
from engine.replies import Reply
from engine.sampling import SamplingParams
from tests.engine.reply_checks import assert_same_replies_and_features
from trainer.models.tiny import build_tiny_target

VOCAB = 96
GREEDY = SamplingParams(temperature=0.0, top_p=1.0)
RECORDING = Recording(layers=[0, 1, 2], dtypes=(torch.float32, torch.float32))
NEVER = VOCAB + 1
# Prompts of every length, a shared prefix on a third of them.
PREFIX = [7, 11, 13]
_GENERATOR = torch.Generator().manual_seed(3)
PROMPTS = [
    ([*PREFIX] if i % 3 == 0 else []) + torch.randint(3, VOCAB, (1 + i % 9,), generator=_GENERATOR).tolist()
    for i in range(60)
]


@pytest.fixture(scope="module")
def target() -> PreTrainedModel:
    return build_tiny_target("LlamaForCausalLM", vocab_size=VOCAB)


@pytest.fixture(scope="module")
def stops(target: PreTrainedModel) -> list[int]:
    """Stop ids that end rows at many steps, their first included: slots change hands nearly
    every step. A random model mostly repeats a token; the tokens it switches to end rows."""
    free, _ = generate_batched(
        target, PROMPTS, stop_ids=[NEVER], max_new_tokens=12, batch_size=8, sampling=GREEDY
    )
    return sorted({t for r in free if r is not None for t in r.tokens[1:] if t != r.tokens[0]})


def _generate(
    target: PreTrainedModel, stops: list[int], *, overlap: bool, **options: Any
) -> tuple[list[Reply | None], bool]:
    return generate_batched(
        target,
        PROMPTS,
        stop_ids=stops,
        max_new_tokens=options.pop("max_new_tokens", 12),
        batch_size=options.pop("batch_size", 8),
        sampling=GREEDY,
        recorder=RECORDING.recorder(target),
        shared_prefix=PREFIX,
        overlap=overlap,
        **options,
    )


def test_replies_read_a_step_late_are_the_replies_read_at_once(
    target: PreTrainedModel, stops: list[int]
) -> None:
    at_once, stopped = _generate(target, stops, overlap=False)
    assert not stopped
    lengths = {len(reply.tokens) for reply in at_once if reply is not None}
    assert 0 in lengths, "precondition: rows that end at their first token"
    assert len(lengths) > 4, "precondition: rows end at many steps"
    late, stopped = _generate(target, stops, overlap=True)
    assert not stopped
    assert [r.stop_token for r in late if r is not None] == [r.stop_token for r in at_once if r is not None]
    assert_same_replies_and_features(at_once, late)


def test_the_host_reads_a_steps_snapshot_after_queueing_the_next(
    target: PreTrainedModel, stops: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    order: list[str] = []
    decode, wait = generation._decode, step_readback.QueuedSnapshot.wait

    def logged_decode(*args: Any) -> None:
        order.append("step")
        decode(*args)

    def logged_wait(self: step_readback.QueuedSnapshot) -> step_readback.SlotSnapshot:
        order.append("read")
        return wait(self)

    monkeypatch.setattr(generation, "_decode", logged_decode)
    monkeypatch.setattr(step_readback.QueuedSnapshot, "wait", logged_wait)
    for overlap in (False, True):
        order.clear()
        _generate(target, stops, overlap=overlap)
        steps = order.count("step")
        # The run ends with one read at once, for the rows no snapshot has shown yet and the cut ones.
        assert order[-1] == "read"
        in_loop = "".join("s" if entry == "step" else "r" for entry in order[:-1])
        if overlap:
            # Step 1 is queued with nothing to read; every later step is queued before the host
            # reads the one before it.
            assert in_loop == "s" + "sr" * (steps - 1)
        else:
            assert in_loop == "sr" * steps


def test_a_stop_cuts_the_rows_in_flight_as_when_read_at_once(
    target: PreTrainedModel, stops: list[int]
) -> None:
    results = []
    for overlap in (False, True):
        checks = 0

        def stop_after_five_steps() -> bool:
            nonlocal checks
            checks += 1
            return checks > 5

        replies, stopped = _generate(target, stops, overlap=overlap, should_stop=stop_after_five_steps)
        assert stopped
        assert any(reply is None for reply in replies)
        assert any(reply is not None and reply.stop_token is None for reply in replies), "rows cut"
        results.append([None if r is None else (r.tokens, r.stop_token) for r in replies])
    at_once, late = results
    # A step late, rows that ended free their slots a step later: fewer prompts start in five
    # steps, and every reply that came back is one read at once also gave, or its cut prefix.
    assert sum(r is not None for r in late) <= sum(r is not None for r in at_once)
    for ours, theirs in zip(late, at_once, strict=True):
        if ours is not None:
            assert theirs is not None
            assert ours[0] == theirs[0][: len(ours[0])]
