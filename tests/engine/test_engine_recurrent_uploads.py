"""The recurrent serving target's step sends its token ids without stalling a GPU.

On CUDA ``torch.tensor(python_list, device="cuda")`` copies from pageable memory, which waits
for everything queued on the device: in ``RecurrentTarget.forward`` (one batch-1 forward per
sequence) each sequence's upload waited for the previous sequence's forward to finish before
the next forward's kernels were queued. The ids go through ``engine.transfers`` (pinned,
``non_blocking``) instead; a CPU run shows the difference as the calls that build a tensor
from Python data on the model's device.
"""

from __future__ import annotations

from typing import Any

import torch

from engine.recurrent_target import RecurrentTarget
from engine.segments import Segment
from tests.fixtures.torch_calls import CountingCalls
from tests.speculative.engine_doubles import tiny_target


def _pageable_upload(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    """A tensor built from Python data straight onto a device (``torch.tensor(..., device=...)``):
    a pageable host-to-device copy, a stream sync on CUDA."""
    return func is torch.tensor and kwargs.get("device") is not None


@torch.inference_mode()
def test_a_recurrent_step_uploads_no_token_ids_from_pageable_memory() -> None:
    model = tiny_target("Qwen3NextForCausalLM")
    target = RecurrentTarget(model, None)
    caches = [target.new_cache() for _ in range(3)]
    target.forward([Segment(cache, [5, 17, 33, 8 + row], keep=1) for row, cache in enumerate(caches)])
    with CountingCalls(_pageable_upload) as uploads:
        # A verification of three sequences, then the rollback of one's rejected drafts.
        outputs = target.forward([Segment(cache, [9, 10, 11], keep=3) for cache in caches])
        caches[0].crop(caches[0].length - 2)
    assert uploads.count == 0
    assert [tuple(output.logits.shape) for output in outputs] == [(3, model.config.vocab_size)] * 3
    assert [cache.length for cache in caches] == [5, 7, 7]
