"""What the frozen target contributes to a training batch, computed once and cached.

Per token we keep the three aux hidden states (the head's input), the target's final
normed hidden state and the argmax of its full-vocabulary logits. The teacher's
distribution over the draft vocabulary is recomputed from the final hidden state with
only the draft vocabulary's rows of the target's lm_head: that is ~V/V_draft times
cheaper than full logits and ~V_draft/H times smaller than caching the distribution.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from transformers import PreTrainedModel

from engine.capture import TargetFeatureCapture, output_head
from trainer.eagle.ttt import TeacherTargets, teacher_targets_from_kept_logits

FEATURE_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def final_dtype_for(feature_dtype: str) -> torch.dtype:
    """Storage dtype of the final hidden state next to aux states stored in ``feature_dtype``:
    it turns into teacher logits, where float16's extra precision matters."""
    return torch.float32 if feature_dtype == "float32" else torch.float16


# Rows of full-vocabulary logits formed at once when taking the argmax (bounds memory
# to ROWS x V floats: 1024 x 49152 x 4 bytes = 200 MB for SmolLM2).
_ARGMAX_ROWS = 1024


@dataclass(frozen=True)
class TargetFeatures:
    """One batch's target outputs, in the cache's compact dtypes."""

    aux_hidden_states: torch.Tensor  # [B, T, 3*H]
    final_hidden: torch.Tensor  # [B, T, H], after the target's final norm
    argmax_ids: torch.Tensor  # [B, T] int64, the target's greedy next token

    def to(self, device: torch.device) -> TargetFeatures:
        return TargetFeatures(
            self.aux_hidden_states.to(device), self.final_hidden.to(device), self.argmax_ids.to(device)
        )

    @property
    def nbytes(self) -> int:
        return sum(
            t.numel() * t.element_size() for t in (self.aux_hidden_states, self.final_hidden, self.argmax_ids)
        )


def _compact(tensor: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """``tensor`` in ``dtype``, or float32 where ``dtype`` would overflow (huge residual activations)."""
    converted = tensor.to(dtype)
    if converted.dtype != tensor.dtype and not torch.isfinite(converted).all():
        return tensor.float()
    return converted


class TargetTeacher:
    """The frozen target as a source of EAGLE-3 training signal."""

    def __init__(
        self,
        target: PreTrainedModel,
        aux_layer_ids: list[int],
        *,
        draft_target_ids: torch.Tensor,
        feature_dtype: torch.dtype = torch.bfloat16,
        autocast_bf16: bool = False,
    ) -> None:
        self.target = target
        self.autocast_bf16 = autocast_bf16
        self.aux_layer_ids = list(aux_layer_ids)
        # aux features feed a trained linear layer, so bf16 (wide range) suffices; the
        # final state turns into teacher logits, where fp16's extra precision matters.
        self.feature_dtype = feature_dtype
        self.final_dtype = torch.float32 if feature_dtype == torch.float32 else torch.float16
        lm_head = output_head(target)
        self._lm_head = lm_head
        self._draft_rows = lm_head.weight.detach()[draft_target_ids].float().contiguous()
        bias = lm_head.bias
        self._draft_bias = None if bias is None else bias.detach()[draft_target_ids].float()

    @torch.no_grad()
    def features(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor, *, needed: torch.Tensor | None = None
    ) -> TargetFeatures:
        """Run the target's decoder stack (never its full-vocabulary head on all tokens at once).

        ``needed`` [B, T] marks the positions whose argmax the loss reads; the full-vocabulary
        head (as costly as a third of the decoder stack on SmolLM2) runs on those alone and
        the other positions get id 0.
        """
        base = self.target.model
        with (
            torch.autocast(input_ids.device.type, dtype=torch.bfloat16, enabled=self.autocast_bf16),
            TargetFeatureCapture(self.target, self.aux_layer_ids) as capture,
        ):
            final = base(
                input_ids=input_ids, attention_mask=attention_mask, use_cache=False
            ).last_hidden_state
            aux = capture.aux_hidden_states()
            rows = final if needed is None else final[needed.bool()]
            flat = rows.reshape(-1, final.shape[-1])
            argmax = torch.cat(
                [
                    self._lm_head(flat[start : start + _ARGMAX_ROWS]).argmax(-1)
                    for start in range(0, flat.shape[0], _ARGMAX_ROWS)
                ]
                or [torch.zeros(0, dtype=torch.long, device=final.device)]
            )
        if needed is None:
            argmax_ids = argmax.view(final.shape[:-1])
        else:
            argmax_ids = torch.zeros(final.shape[:-1], dtype=torch.long, device=final.device)
            argmax_ids[needed.bool()] = argmax
        return TargetFeatures(
            aux_hidden_states=_compact(aux, self.feature_dtype),
            final_hidden=_compact(final, self.final_dtype),
            argmax_ids=argmax_ids,
        )

    def teacher(
        self, features: TargetFeatures, t2d: torch.Tensor, *, needed: torch.Tensor | None = None
    ) -> TeacherTargets:
        """Teacher distribution over the draft vocabulary from cached features.

        ``needed`` [B, T] marks the positions whose distribution the loss reads; the
        others are left at zero, which skips most of the prompt tokens' teacher logits.
        """
        hidden = features.final_hidden
        rows = hidden.float() if needed is None else hidden[needed].float()
        kept_logits = rows @ self._draft_rows.T
        if self._draft_bias is not None:
            kept_logits = kept_logits + self._draft_bias
        teacher = teacher_targets_from_kept_logits(kept_logits, features.argmax_ids, t2d)
        if needed is None:
            return teacher
        probs = hidden.new_zeros((*hidden.shape[:-1], kept_logits.shape[-1]), dtype=torch.float32)
        probs[needed] = teacher.probs
        return TeacherTargets(probs=probs, argmax_draft_id=teacher.argmax_draft_id)

    @property
    def draft_lm_head_rows(self) -> torch.Tensor:
        """The target's lm_head restricted to the draft vocabulary [V_draft, H] (an lm_head initialiser)."""
        return self._draft_rows


class FeatureCache:
    """Target features per batch key, up to a memory limit (later batches are recomputed)."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.bytes = 0
        self._items: dict[str, TargetFeatures] = {}

    def __contains__(self, key: str) -> bool:
        return key in self._items

    def get(self, key: str) -> TargetFeatures | None:
        return self._items.get(key)

    def has_room(self, nbytes: int) -> bool:
        """Whether features of ``nbytes`` would still fit."""
        return self.bytes + nbytes <= self.max_bytes

    def put(self, key: str, features: TargetFeatures) -> bool:
        """Keep ``features`` if they fit; returns whether they were kept."""
        if key in self._items or not self.has_room(features.nbytes):
            return key in self._items
        self._items[key] = features
        self.bytes += features.nbytes
        return True
