"""Token-budget batches of similar-length samples.

Samples are sorted by length and cut into batches whose padded size (rows x longest
row) stays within a token budget, so a step costs about the same whatever the lengths
and little compute goes to padding. The batches are formed once and only their order is
shuffled per epoch: a batch then always has the same shape, which lets the target's
features be cached per batch and makes a resumed run replay the same computations.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from trainer.data.tokenize import TokenizedConversation


@dataclass(frozen=True)
class Batch:
    sample_indices: tuple[int, ...]
    length: int  # the longest sample; every row is right-padded to it

    @property
    def padded_tokens(self) -> int:
        return len(self.sample_indices) * self.length


@dataclass(frozen=True)
class BatchTensors:
    input_ids: torch.Tensor  # [B, T] right-padded with pad_id
    attention_mask: torch.Tensor  # [B, T] 1 on real tokens
    loss_mask: torch.Tensor  # [B, T] 1 on tokens to learn (assistant tokens), 0 on padding

    def to(self, device: torch.device) -> BatchTensors:
        return BatchTensors(
            self.input_ids.to(device), self.attention_mask.to(device), self.loss_mask.to(device)
        )


def plan_batches(
    lengths: Sequence[int],
    *,
    batch_tokens: int,
    max_batch_size: int,
    groups: Sequence[int] | None = None,
) -> list[Batch]:
    """Batches in length order; a sample longer than ``batch_tokens`` gets a batch of its own.

    With ``groups``, a batch holds samples of one group only (e.g. those whose target features
    were recorded while distilling, apart from those whose features must be computed: one
    sample without them makes the whole batch's features be computed again)."""
    if batch_tokens < 1 or max_batch_size < 1:
        raise ValueError(
            f"batch_tokens and max_batch_size must be positive, got {batch_tokens}, {max_batch_size}"
        )
    group_of = groups if groups is not None else [0] * len(lengths)
    order = sorted(range(len(lengths)), key=lambda index: (group_of[index], -lengths[index], index))
    batches: list[Batch] = []
    current: list[int] = []
    for index in order:
        # Longest first, so the batch's first sample sets its padded length.
        longest = lengths[current[0]] if current else lengths[index]
        full = (len(current) + 1) * longest > batch_tokens or len(current) == max_batch_size
        if current and (full or group_of[current[0]] != group_of[index]):
            batches.append(Batch(tuple(current), lengths[current[0]]))
            current = []
        current.append(index)
    if current:
        batches.append(Batch(tuple(current), lengths[current[0]]))
    return batches


def epoch_order(num_batches: int, *, seed: int, epoch: int) -> list[int]:
    """The batch order of one epoch: a permutation that depends only on (seed, epoch)."""
    generator = torch.Generator().manual_seed(seed * 1_000_003 + epoch)
    return [int(i) for i in torch.randperm(num_batches, generator=generator)]


def collate(samples: Sequence[TokenizedConversation], batch: Batch, *, pad_id: int) -> BatchTensors:
    rows = len(batch.sample_indices)
    input_ids = torch.full((rows, batch.length), pad_id, dtype=torch.long)
    attention_mask = torch.zeros((rows, batch.length), dtype=torch.long)
    loss_mask = torch.zeros((rows, batch.length), dtype=torch.long)
    for row, index in enumerate(batch.sample_indices):
        sample = samples[index]
        length = len(sample.input_ids)
        input_ids[row, :length] = torch.tensor(sample.input_ids, dtype=torch.long)
        attention_mask[row, :length] = 1
        loss_mask[row, :length] = torch.tensor(sample.loss_mask, dtype=torch.long)
    return BatchTensors(input_ids=input_ids, attention_mask=attention_mask, loss_mask=loss_mask)
