"""Training samples that carry the target features distillation recorded for them
(``engine.feature_recorder`` records them while the target writes its replies), and their
collation into a training batch's ``TargetFeatures``."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from engine.replies import SampleFeatures
from trainer.data.tokenize import TokenizedConversation
from trainer.eagle.features import TargetFeatures


@dataclass(frozen=True, slots=True)
class FeaturedSample(TokenizedConversation):
    """A training sample that carries its target features (None: compute them when training)."""

    features: SampleFeatures | None = None


def recorded_features(sample: TokenizedConversation) -> SampleFeatures | None:
    """The target features distillation recorded for this sample; None if it recorded none."""
    return sample.features if isinstance(sample, FeaturedSample) else None


def collated_nbytes(
    samples: Sequence[TokenizedConversation], indices: Sequence[int], length: int
) -> int | None:
    """The bytes ``collate_features`` would return for these samples, without collating them
    (its tensors take the first sample's dtypes and widths); None if the first has no features."""
    first = recorded_features(samples[indices[0]]) if indices else None
    if first is None:
        return None
    aux, final = first.aux_hidden_states, first.final_hidden
    per_token = aux.shape[-1] * aux.element_size() + final.shape[-1] * final.element_size()
    return len(indices) * length * (per_token + torch.empty((), dtype=torch.long).element_size())


def collate_features(
    samples: Sequence[TokenizedConversation], indices: Sequence[int], length: int
) -> TargetFeatures | None:
    """The recorded features of ``samples[indices]`` right-padded to ``length``; None
    unless every sample carries features."""
    present: list[SampleFeatures] = []
    for index in indices:
        features = recorded_features(samples[index])
        if features is None:
            return None
        present.append(features)
    first = present[0]
    aux = first.aux_hidden_states.new_zeros((len(present), length, first.aux_hidden_states.shape[-1]))
    final = first.final_hidden.new_zeros((len(present), length, first.final_hidden.shape[-1]))
    argmax = torch.zeros((len(present), length), dtype=torch.long)
    for row, features in enumerate(present):
        size = features.argmax_ids.shape[0]
        aux[row, :size] = features.aux_hidden_states
        final[row, :size] = features.final_hidden
        argmax[row, :size] = features.argmax_ids
    return TargetFeatures(aux_hidden_states=aux, final_hidden=final, argmax_ids=argmax)
