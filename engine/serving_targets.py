"""Which target runs behind the serving engine: exact packed attention, the slot pool, or one
forward per sequence for recurrent layers."""

from __future__ import annotations

from collections.abc import Sequence

from transformers import PreTrainedModel

from engine.capture import linear_attention_reason
from engine.feature_recorder import GenerationRecorder
from engine.packed_target import PackedTarget
from engine.recurrent_target import RecurrentTarget
from engine.runner import pool_positions
from engine.segments import ServingTarget
from engine.slot_target import SlotTarget

ATTENTION_KINDS = ("auto", "packed", "slots")


def serving_target(
    model: PreTrainedModel, aux_layer_ids: Sequence[int] | None, *, attention: str, max_sequences: int
) -> ServingTarget:
    """The target behind the engine. ``packed`` attends sequence by sequence: greedy output is
    bit-for-bit batch-1 decoding's, the CPU promise. ``slots`` runs one attention call per
    layer over a preallocated pool: what a GPU needs (lossless as vLLM's is: drafts are checked
    against this verify pass's own logits). ``auto``: slots on CUDA, packed elsewhere.
    Linear-attention (recurrent) state cannot be batched across sequences: one forward each."""
    if attention not in ATTENTION_KINDS:
        raise ValueError(f"attention must be one of {', '.join(ATTENTION_KINDS)}, got {attention!r}")
    if linear_attention_reason(model.config) is not None:
        return RecurrentTarget(model, aux_layer_ids)
    if attention == "packed" or (attention == "auto" and model.device.type != "cuda"):
        return PackedTarget(model, aux_layer_ids)
    recorder = (
        None
        if aux_layer_ids is None
        else GenerationRecorder(model, aux_layer_ids, aux_dtype=model.dtype, final_dtype=model.dtype)
    )
    return SlotTarget(
        model,
        max_sequences=max_sequences,
        max_positions=pool_positions(model),
        recorder=recorder,
    )


def sequence_limit(target: ServingTarget) -> int | None:
    """The positions one sequence may hold: the slot pool's, fixed when it is allocated; None
    where a sequence's cache grows as it needs (packed and recurrent targets, the CPU's)."""
    if isinstance(target, SlotTarget):
        # The pool's last position is its scratch one, which no sequence holds (SlotTarget).
        return int(target.runner.pool.capacity) - 1
    return None
