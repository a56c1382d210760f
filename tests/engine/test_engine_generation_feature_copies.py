"""The features of the rows that end in a step come back to the host in one copy per buffer,
not two copies a row: each copy is a device-to-host transfer and sync, and at a GPU's 256 rows
two or three rows end every step."""

from __future__ import annotations

from typing import Any

import torch

from engine.generation import generate_batched
from engine.packed_generation import Recording, generate_packed
from engine.sampling import SamplingParams
from tests.engine.reply_checks import assert_same_replies_and_features
from tests.fixtures.torch_calls import CountingCalls
from trainer.models.tiny import build_tiny_target

VOCAB = 96
NEVER = VOCAB - 1  # a stop id the tiny target is never asked to stop on
RECORDING = Recording(layers=[0, 1, 2], dtypes=(torch.float32, torch.float32))


def _copies_when_every_row_ends_at_once(rows: int) -> int:
    target = build_tiny_target("LlamaForCausalLM", vocab_size=VOCAB)
    # Prompts of one length and no stop: every row ends at the same step, after 4 tokens.
    prompts = [[10 + row, 20 + row, 30 + row] for row in range(rows)]
    with CountingCalls(lambda func, args, kwargs: func is torch.Tensor.cpu) as copies:
        replies, _ = generate_batched(
            target,
            prompts,
            recorder=RECORDING.recorder(target),
            stop_ids=[NEVER],
            max_new_tokens=4,
            batch_size=rows,
            sampling=SamplingParams(temperature=0.0, top_p=1.0),
        )
    assert all(reply is not None and reply.features is not None for reply in replies)
    assert all(reply is not None and len(reply.tokens) == 4 for reply in replies)
    return int(copies.count)


def test_the_copies_back_do_not_grow_with_the_rows_that_end() -> None:
    assert _copies_when_every_row_ends_at_once(12) == _copies_when_every_row_ends_at_once(3)


def test_rows_ending_together_in_more_than_one_copy_keep_their_own_features() -> None:
    """20 rows end at once, beyond one copy's 16: each reply's features are still its own (the
    exact path's, which runs every prompt by itself)."""
    target = build_tiny_target("LlamaForCausalLM", vocab_size=VOCAB)
    prompts = [[10 + row, 20 + row % 7, 30 + row % 5][: 2 + row % 2] for row in range(20)]
    options: dict[str, Any] = {
        "stop_ids": [NEVER],
        "max_new_tokens": 4,
        "sampling": SamplingParams(temperature=0.0, top_p=1.0),
    }
    exact, _ = generate_packed(target, prompts, recording=RECORDING, batch_size=20, **options)
    batched, _ = generate_batched(
        target, prompts, recorder=RECORDING.recorder(target), batch_size=20, **options
    )
    assert_same_replies_and_features(exact, batched)
