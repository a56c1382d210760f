"""A sequence's keys/values: appended step by step, cropped after rejected drafts."""

from __future__ import annotations

import pytest
import torch

from engine.packed_attention import SequenceKV


def chunk(start: int, length: int) -> torch.Tensor:
    return torch.arange(start, start + length, dtype=torch.float32).view(1, 1, length, 1).repeat(1, 2, 1, 3)


@pytest.mark.parametrize("capacity", [None, 12])
def test_appends_and_crops_read_back_the_same_positions(capacity: int | None) -> None:
    cache = SequenceKV(num_layers=2, capacity=capacity)
    for layer in range(2):
        keys, values = cache.append(layer, chunk(0, 5), -chunk(0, 5))
        assert torch.equal(keys, chunk(0, 5))
        assert torch.equal(values, -chunk(0, 5))
    assert cache.length == 5
    cache.crop(3)  # two drafts rejected
    assert (cache.length, cache.layer_length(1)) == (3, 3)
    keys, values = cache.append(0, chunk(3, 4), -chunk(3, 4))
    assert torch.equal(keys, chunk(0, 7))
    assert torch.equal(values, -chunk(0, 7))
    assert (cache.layer_length(0), cache.layer_length(1)) == (7, 3)


def test_a_preallocated_cache_refuses_more_than_its_capacity() -> None:
    cache = SequenceKV(num_layers=1, capacity=4)
    cache.append(0, chunk(0, 3), chunk(0, 3))
    with pytest.raises(ValueError, match="capacity 4 cannot hold 5 positions"):
        cache.append(0, chunk(3, 2), chunk(3, 2))
