"""The target model run once per step over the packed new tokens of every sequence."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import ExitStack

import torch
from transformers import PreTrainedModel

from engine.capture import (
    TargetFeatureCapture,
    UnsupportedArchitectureError,
    decoder_layers,
    linear_attention_reason,
)
from engine.packed_attention import PACKED_ATTENTION, PackedLayout, SequenceKV, packed_layout
from engine.segments import Segment, SegmentOutput, SequenceCache, check_keep, host_token_ids


class PackedTarget:
    """Owns the target for the serving engine: switches it to packed attention and, for a
    head, keeps the aux-layer feature capture open for the engine's lifetime.

    Sliding-window layers and attention sinks (GPT-OSS) are served as transformers' own
    batch-1 decoding computes them (see ``packed_attention``)."""

    def __init__(self, model: PreTrainedModel, aux_layer_ids: Sequence[int] | None) -> None:
        reason = linear_attention_reason(model.config)
        if reason is not None:
            raise UnsupportedArchitectureError(reason)
        self.model = model
        self.num_layers = len(decoder_layers(model))
        model.set_attn_implementation(PACKED_ATTENTION)
        self._stack = ExitStack()
        self._capture: TargetFeatureCapture | None = None
        if aux_layer_ids is not None:
            self._capture = self._stack.enter_context(TargetFeatureCapture(model, aux_layer_ids))

    def new_cache(self, capacity: int | None = None) -> SequenceKV:
        """An empty cache; ``capacity`` preallocates room for that many positions."""
        return SequenceKV(self.num_layers, capacity)

    def close(self) -> None:
        self._stack.close()

    def forward(self, segments: Sequence[Segment]) -> list[SegmentOutput]:
        """One forward over every segment; each cache grows by its segment's tokens."""
        device = self.model.device
        ids: list[int] = []
        positions: list[torch.Tensor] = []
        kept: list[torch.Tensor] = []
        for segment in segments:
            check_keep(segment)
        tokens = host_token_ids(segments)
        for segment, segment_ids in zip(segments, tokens, strict=True):
            ids.extend(segment_ids)
            past = segment.cache.length
            positions.append(torch.arange(past, past + len(segment_ids)))
            kept.append(torch.arange(len(ids) - segment.keep, len(ids)))
        layout = PackedLayout(
            caches=[_packed_cache(s.cache) for s in segments], lengths=[len(each) for each in tokens]
        )
        with packed_layout(layout):
            outputs = self.model(
                input_ids=torch.tensor([ids], dtype=torch.long, device=device),
                position_ids=torch.cat(positions).unsqueeze(0).to(device),
                use_cache=False,
                logits_to_keep=torch.cat(kept).to(device),
            )
        logits = outputs.logits[0].split([s.keep for s in segments])
        if self._capture is None:
            return [SegmentOutput(logits=rows, features=None) for rows in logits]
        features = torch.split(self._capture.aux_hidden_states()[0], list(layout.lengths))
        return [SegmentOutput(logits=r, features=f) for r, f in zip(logits, features, strict=True)]


def _packed_cache(cache: SequenceCache) -> SequenceKV:
    if not isinstance(cache, SequenceKV):
        raise TypeError(f"PackedTarget runs on its own SequenceKV caches, not {type(cache).__name__}")
    return cache


def uses_full_attention(model: PreTrainedModel) -> bool:
    """Whether every layer of ``model`` attends to the whole sequence (no sliding window)."""
    return not _other_attention(model)


def _other_attention(model: PreTrainedModel) -> str:
    """The attention kinds besides full attention that ``model`` has, as words ('' if none)."""
    text = model.config.get_text_config()
    layer_types = getattr(text, "layer_types", None) or []
    other = sorted({kind for kind in layer_types if kind != "full_attention"})
    if other:
        return ", ".join(other)
    return "sliding-window" if getattr(text, "use_sliding_window", False) else ""
