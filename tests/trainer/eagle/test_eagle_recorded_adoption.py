"""Features recorded while distilling go into the feature cache before training; a batch the
cache has no room for is not collated (collating copies it into a padded tensor and moves it to
the head's device, the GPU, only for the cache to refuse it)."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from engine.replies import SampleFeatures
from trainer.eagle import batch_runner
from trainer.eagle.batch_runner import BatchRunner
from trainer.eagle.batching import Batch
from trainer.eagle.features import FeatureCache
from trainer.eagle.generation_features import FeaturedSample, collate_features, collated_nbytes
from trainer.eagle.schedule import StepTimer

HIDDEN = 8


def _sample(length: int, dtype: torch.dtype = torch.bfloat16) -> FeaturedSample:
    features = SampleFeatures(
        aux_hidden_states=torch.randn(length, 3 * HIDDEN).to(dtype),
        final_hidden=torch.randn(length, HIDDEN).to(dtype),
        argmax_ids=torch.randint(0, 50, (length,)),
    )
    return FeaturedSample(input_ids=[1] * length, loss_mask=[1] * length, features=features)


def test_the_collated_size_is_known_without_collating() -> None:
    # The first sample's dtypes decide the batch's (a sample kept in float32 where bf16 overflowed).
    samples = [_sample(5, torch.float32), _sample(7), _sample(3)]
    for indices in ([0, 1, 2], [1, 2], [2]):
        length = max(len(samples[i].input_ids) for i in indices)
        collated = collate_features(samples, indices, length)
        assert collated is not None
        assert collated_nbytes(samples, indices, length) == collated.nbytes
    assert collated_nbytes([FeaturedSample(input_ids=[1], loss_mask=[1])], [0], 1) is None


def _runner(cache: FeatureCache) -> BatchRunner:
    # Adoption reads only the cache and the head's device: no target, no teacher.
    head: Any = torch.nn.Module()
    head.fc = torch.nn.Linear(3 * HIDDEN, HIDDEN)
    return BatchRunner(
        head,
        teacher=None,  # type: ignore[arg-type]
        cache=cache,
        timer=StepTimer(),
        pad_id=0,
        ttt_steps=1,
        ttt_decay=1.0,
        autocast_bf16=False,
    )


def test_batches_the_cache_cannot_hold_are_not_collated(monkeypatch: pytest.MonkeyPatch) -> None:
    samples = [_sample(length) for length in (6, 6, 9, 9, 4, 4, 12, 12, 3, 3)]
    batches = [Batch(sample_indices=(i, i + 1), length=len(samples[i].input_ids)) for i in range(0, 10, 2)]
    keyed = [(f"train-{n}", batch) for n, batch in enumerate(batches)]
    sizes = [collated_nbytes(samples, batch.sample_indices, batch.length) for batch in batches]
    # Room for the first two batches and, later, the small fifth one; not the third or fourth.
    room = sizes[0] + sizes[1] + sizes[4]  # type: ignore[operator]
    collated: list[tuple[int, ...]] = []

    def counting_collate(samples: Any, indices: Any, length: int) -> Any:
        collated.append(tuple(indices))
        return collate_features(samples, indices, length)

    monkeypatch.setattr(batch_runner, "collate_features", counting_collate)
    runner = _runner(FeatureCache(max_bytes=room))
    assert runner.adopt_recorded_features(keyed, samples) == 3
    assert [key for key, _ in keyed if key in runner.cache] == ["train-0", "train-1", "train-4"]
    assert collated == [(0, 1), (2, 3), (8, 9)]
    assert runner.cache.bytes == room
    # Adopting again finds them cached, collating nothing.
    collated.clear()
    assert runner.adopt_recorded_features(keyed, samples) == 3
    assert collated == []
