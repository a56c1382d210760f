"""Token-budget batches, per-epoch order and padding."""

from __future__ import annotations

import pytest
import torch

from trainer.data.tokenize import TokenizedConversation
from trainer.eagle.batching import Batch, collate, epoch_order, plan_batches


def test_batches_cover_every_sample_once_within_the_token_budget() -> None:
    lengths = [5, 100, 37, 64, 64, 3, 90, 12, 250, 41]
    batches = plan_batches(lengths, batch_tokens=200, max_batch_size=8)
    covered = sorted(i for batch in batches for i in batch.sample_indices)
    assert covered == list(range(len(lengths)))
    for batch in batches:
        assert batch.length == max(lengths[i] for i in batch.sample_indices)
        # Only a sample longer than the budget may exceed it, alone in its batch.
        assert batch.padded_tokens <= 200 or len(batch.sample_indices) == 1
    assert Batch((8,), 250) in batches
    # Length-sorted: little padding.
    padding = sum(b.padded_tokens for b in batches) - sum(lengths)
    assert padding < 0.25 * sum(lengths)


def test_max_batch_size_caps_rows_and_bad_budgets_are_rejected() -> None:
    batches = plan_batches([4] * 10, batch_tokens=1000, max_batch_size=3)
    assert [len(b.sample_indices) for b in batches] == [3, 3, 3, 1]
    with pytest.raises(ValueError, match="must be positive"):
        plan_batches([4], batch_tokens=0, max_batch_size=3)


def test_epoch_order_depends_only_on_seed_and_epoch() -> None:
    assert epoch_order(20, seed=1, epoch=0) == epoch_order(20, seed=1, epoch=0)
    assert sorted(epoch_order(20, seed=1, epoch=0)) == list(range(20))
    assert epoch_order(20, seed=1, epoch=0) != epoch_order(20, seed=1, epoch=1)
    assert epoch_order(20, seed=1, epoch=0) != epoch_order(20, seed=2, epoch=0)


def test_collate_right_pads_and_masks_padding() -> None:
    samples = [
        TokenizedConversation(input_ids=[5, 6, 7], loss_mask=[0, 1, 1]),
        TokenizedConversation(input_ids=[8, 9], loss_mask=[1, 1]),
    ]
    tensors = collate(samples, Batch((0, 1), 3), pad_id=2)
    assert tensors.input_ids.tolist() == [[5, 6, 7], [8, 9, 2]]
    assert tensors.attention_mask.tolist() == [[1, 1, 1], [1, 1, 0]]
    assert tensors.loss_mask.tolist() == [[0, 1, 1], [1, 1, 0]]
    assert tensors.input_ids.dtype == torch.long


def test_grouped_batches_never_mix_groups() -> None:
    lengths = [10, 12, 9, 11, 10, 8, 12, 7]
    groups = [0, 1, 0, 1, 1, 0, 0, 1]
    batches = plan_batches(lengths, batch_tokens=1000, max_batch_size=8, groups=groups)
    assert sorted(i for batch in batches for i in batch.sample_indices) == list(range(len(lengths)))
    assert len(batches) == 2
    assert all(len({groups[i] for i in batch.sample_indices}) == 1 for batch in batches)
