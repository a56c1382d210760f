"""Training-time test (TTT): the EAGLE-3 loss, unrolled over several draft steps.

Index t of step i feeds the embedding of token t+1+i and predicts token t+2+i, whose
teacher distribution is the target's softmax at position t+1+i. Step 0 reads the fused
target features; step i>0 reads the head's own output of step i-1, as at inference.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from trainer.eagle.model import Eagle3DraftModel, TTTKeyValues


@dataclass(frozen=True)
class TeacherTargets:
    """The target's next-token distribution restricted to the draft vocabulary."""

    probs: torch.Tensor  # [B, T, draft_vocab] softmax over the kept target ids
    argmax_draft_id: torch.Tensor  # [B, T] draft id of the target's argmax, -1 outside the draft vocab


def teacher_targets(target_logits: torch.Tensor, t2d: torch.Tensor) -> TeacherTargets:
    """Restrict full-vocabulary target logits [B, T, V] to the draft vocabulary."""
    kept = target_logits[..., t2d]
    argmax = target_logits.argmax(dim=-1)
    # Draft id of each target id: its rank among the kept ids (t2d is sorted by construction).
    draft_index = torch.cumsum(t2d.long(), dim=0) - 1
    argmax_draft_id = torch.where(t2d[argmax], draft_index[argmax], torch.full_like(argmax, -1))
    return TeacherTargets(probs=torch.softmax(kept.float(), dim=-1), argmax_draft_id=argmax_draft_id)


def _shift_left(tensor: torch.Tensor, by: int, fill: float | int | bool) -> torch.Tensor:
    """tensor[:, t + by] at index t, padded with ``fill`` past the end."""
    if by == 0:
        return tensor
    pad_shape = (tensor.shape[0], min(by, tensor.shape[1]), *tensor.shape[2:])
    pad = torch.full(pad_shape, fill, dtype=tensor.dtype, device=tensor.device)
    return torch.cat([tensor[:, by:], pad], dim=1)


@dataclass(frozen=True)
class TTTOutput:
    loss: torch.Tensor  # weighted sum over steps, each normalised by its masked count
    step_losses: list[float]
    step_accuracy: list[float]  # draft argmax == target argmax, per step (acceptance estimate)
    step_counts: list[int]  # masked positions per step


def ttt_loss(
    model: Eagle3DraftModel,
    *,
    input_ids: torch.Tensor,
    aux_hidden_states: torch.Tensor,
    teacher: TeacherTargets,
    loss_mask: torch.Tensor,
    steps: int,
    decay: float = 0.8,
) -> TTTOutput:
    """Unrolled EAGLE-3 loss over ``steps`` draft positions for a right-padded batch.

    ``loss_mask`` [B, T] marks tokens the head should learn to predict (assistant tokens
    of real, non-padding positions).
    """
    batch, length = input_ids.shape
    position_ids = torch.arange(length, device=input_ids.device).expand(batch, length)
    hidden = model.fuse(aux_hidden_states)
    in_draft_vocab = teacher.argmax_draft_id >= 0
    kv = TTTKeyValues()
    total = hidden.new_zeros(())
    losses: list[float] = []
    accuracy: list[float] = []
    counts: list[int] = []
    for step in range(steps):
        step_ids = _shift_left(input_ids, 1 + step, 0)
        hidden = model.forward_ttt_step(step_ids, hidden, position_ids + step, kv)
        log_probs = F.log_softmax(model.compute_logits(hidden).float(), dim=-1)
        probs = _shift_left(teacher.probs, 1 + step, 0.0)
        mask = _shift_left(loss_mask.bool(), 2 + step, False) & _shift_left(in_draft_vocab, 1 + step, False)
        count = mask.sum()
        cross_entropy = -(probs * log_probs).sum(-1)
        step_loss = (cross_entropy * mask).sum() / count.clamp(min=1)
        total = total + (decay**step) * step_loss
        hits = (log_probs.argmax(-1) == _shift_left(teacher.argmax_draft_id, 1 + step, -1)) & mask
        losses.append(float(step_loss.detach()))
        accuracy.append(float(hits.sum()) / max(int(count), 1))
        counts.append(int(count))
    return TTTOutput(loss=total, step_losses=losses, step_accuracy=accuracy, step_counts=counts)
