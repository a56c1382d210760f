"""The features of the rows that end in a step come back to the host in one copy per buffer,
not two copies a row: each copy is a device-to-host transfer and sync, and at a GPU's 256 rows
two or three rows end every step."""

from __future__ import annotations

from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from engine.generation import generate_batched
from engine.packed_generation import Recording
from engine.sampling import SamplingParams
from trainer.models.tiny import build_tiny_target

VOCAB = 96
NEVER = VOCAB - 1  # a stop id the tiny target is never asked to stop on
RECORDING = Recording(layers=[0, 1, 2], dtypes=(torch.float32, torch.float32))


class _HostCopies(TorchFunctionMode):
    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def __torch_function__(
        self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None
    ) -> Any:
        if func is torch.Tensor.cpu:
            self.count += 1
        return func(*args, **(kwargs or {}))


def _copies_when_every_row_ends_at_once(rows: int) -> int:
    target = build_tiny_target("LlamaForCausalLM", vocab_size=VOCAB)
    # Prompts of one length and no stop: every row ends at the same step, after 4 tokens.
    prompts = [[10 + row, 20 + row, 30 + row] for row in range(rows)]
    with _HostCopies() as copies:
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
