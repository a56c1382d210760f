"""Training-time test (TTT): the EAGLE-3 loss, unrolled over several draft steps.

Index t of step i feeds the embedding of token t+1+i and predicts token t+2+i, whose
teacher distribution is the target's softmax at position t+1+i. Step 0 reads the fused
target features; step i>0 reads the head's own output of step i-1, as at inference.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F  # noqa: N812 - the conventional name

from engine.heads.model import Eagle3DraftModel, TTTKeyValues, gather_positions


@dataclass(frozen=True)
class TeacherTargets:
    """The target's next-token distribution restricted to the draft vocabulary."""

    probs: torch.Tensor  # [B, T, draft_vocab] softmax over the kept target ids
    argmax_draft_id: torch.Tensor  # [B, T] draft id of the target's argmax, -1 outside the draft vocab


def draft_ids_of(target_ids: torch.Tensor, t2d: torch.Tensor) -> torch.Tensor:
    """Draft id of each target id, -1 where not kept (draft ids follow target id order)."""
    draft_index = torch.cumsum(t2d.long(), dim=0) - 1
    return torch.where(t2d[target_ids], draft_index[target_ids], torch.full_like(target_ids, -1))


def teacher_targets_from_kept_logits(
    kept_logits: torch.Tensor, argmax_target_id: torch.Tensor, t2d: torch.Tensor
) -> TeacherTargets:
    """Teacher from logits already restricted to the draft vocabulary [B, T, draft_vocab]
    plus the argmax over the *full* vocabulary [B, T] (which may fall outside the draft vocab).

    Training computes only the kept columns of the target's lm_head, which is far cheaper
    than materialising the full-vocabulary logits this would otherwise be sliced from.
    """
    return TeacherTargets(
        probs=torch.softmax(kept_logits.float(), dim=-1), argmax_draft_id=draft_ids_of(argmax_target_id, t2d)
    )


def teacher_targets(target_logits: torch.Tensor, t2d: torch.Tensor) -> TeacherTargets:
    """Restrict full-vocabulary target logits [B, T, V] to the draft vocabulary."""
    return teacher_targets_from_kept_logits(target_logits[..., t2d], target_logits.argmax(dim=-1), t2d)


def _shift_left(tensor: torch.Tensor, by: int, fill: float | int | bool) -> torch.Tensor:
    """tensor[:, t + by] at index t, padded with ``fill`` past the end."""
    if by == 0:
        return tensor
    pad_shape = (tensor.shape[0], min(by, tensor.shape[1]), *tensor.shape[2:])
    pad = torch.full(pad_shape, fill, dtype=tensor.dtype, device=tensor.device)
    return torch.cat([tensor[:, by:], pad], dim=1)


def teacher_positions(loss_mask: torch.Tensor) -> torch.Tensor:
    """Positions whose teacher distribution ``ttt_loss`` reads: p such that token p+1 is learned."""
    return _shift_left(loss_mask.bool(), 1, False)


@dataclass(frozen=True)
class TTTOutput:
    loss: torch.Tensor  # weighted sum over steps, each normalised by its masked count
    step_losses: list[float]
    step_accuracy: list[float]  # draft argmax == target argmax, per step (acceptance estimate)
    step_counts: list[int]  # masked positions per step
    step_feature_losses: list[float] | None = None  # feature regression per step, when trained


def feature_regression_loss(normed_draft: torch.Tensor, normed_target: torch.Tensor) -> torch.Tensor:
    """Summed smooth-L1 distance between the head's normed hidden state and the target's
    final (normed) hidden state for the same token, averaged over the hidden dimension.

    The target's lm_head turns that state into the teacher's logits, so matching it is
    matching the whole distribution through a dense H-wide signal per position (EAGLE-1's
    feature regression) rather than through a softmax alone: far more to learn from per
    distilled token, which is what a CPU budget is short of.
    """
    return (
        F.smooth_l1_loss(normed_draft.float(), normed_target.float(), reduction="sum")
        / normed_draft.shape[-1]
    )


def _pack(active: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Indices of the True positions of each row, left-aligned and padded with 0: ([B, A], valid [B, A])."""
    counts = active.sum(dim=1)
    width = int(counts.max()) if active.numel() else 0
    # A stable sort puts each row's active indices first, in order.
    order = torch.sort((~active).to(torch.int8), dim=1, stable=True).indices[:, :width]
    valid = torch.arange(width, device=active.device)[None, :] < counts[:, None]
    return torch.where(valid, order, torch.zeros_like(order)), valid


def _step_masks(loss_mask: torch.Tensor, teacher: TeacherTargets, steps: int) -> list[torch.Tensor]:
    """Step i at index t learns token t+2+i from the teacher at t+1+i (a draft-vocab argmax)."""
    in_draft_vocab = teacher.argmax_draft_id >= 0
    return [
        _shift_left(loss_mask.bool(), 2 + step, False) & _shift_left(in_draft_vocab, 1 + step, False)
        for step in range(steps)
    ]


def ttt_step_counts(loss_mask: torch.Tensor, teacher: TeacherTargets, steps: int) -> list[int]:
    """Positions each step of ``ttt_loss`` learns from (its ``step_counts``), without the forward."""
    return [int(mask.sum()) for mask in _step_masks(loss_mask, teacher, steps)]


def ttt_loss(
    model: Eagle3DraftModel,
    *,
    input_ids: torch.Tensor,
    aux_hidden_states: torch.Tensor,
    teacher: TeacherTargets,
    loss_mask: torch.Tensor,
    steps: int,
    decay: float = 0.8,
    target_final_hidden: torch.Tensor | None = None,
    feature_loss_weight: float = 0.0,
    normalizers: list[int] | None = None,
) -> TTTOutput:
    """Unrolled EAGLE-3 loss over ``steps`` draft positions for a right-padded batch.

    ``loss_mask`` [B, T] marks tokens the head should learn to predict (assistant tokens
    of real, non-padding positions). With ``feature_loss_weight`` > 0 and the target's
    final normed hidden states [B, T, H], each step also regresses its normed hidden state
    onto the target's at the position whose distribution it learns.

    Only indices where some step has a loss are computed past step 0's keys and values
    (``forward_ttt_step``'s ``query_index``): in chat data that skips most prompt tokens,
    which carry no loss but cost as much as answer tokens in a dense unroll.

    ``normalizers`` divide each step's sums instead of its own counts: a data-parallel rank
    passes the counts of the whole global batch, so its loss, step losses and accuracies are
    its share, and their sums over the ranks are the global batch's.
    """
    batch, length = input_ids.shape
    masks = _step_masks(loss_mask, teacher, steps)
    index, valid = _pack(torch.stack(masks).any(dim=0))
    rows_of = torch.arange(batch, device=input_ids.device)[:, None].expand_as(index)
    positions = torch.arange(length, device=input_ids.device).expand(batch, length)
    hidden = model.fuse(aux_hidden_states)
    kv = TTTKeyValues()
    total = hidden.new_zeros(())
    losses: list[float] = []
    accuracy: list[float] = []
    counts: list[int] = []
    regress = feature_loss_weight > 0.0 and target_final_hidden is not None
    feature_losses: list[float] = []
    for step in range(steps):
        step_ids = _shift_left(input_ids, 1 + step, 0)
        if step == 0:
            hidden = model.forward_ttt_step(step_ids, hidden, positions, kv, query_index=index)
        else:
            step_ids = gather_positions(step_ids, index)
            hidden = model.forward_ttt_step(step_ids, hidden, index + step, kv, query_index=index)
        # Only masked positions need logits: the next step reads the pre-norm hidden state,
        # not the logits, so the draft lm_head and softmax run on those rows alone.
        selected = gather_positions(masks[step], index) & valid
        batch_rows = rows_of[selected]
        target_index = index[selected] + 1 + step
        count = int(batch_rows.numel())
        divisor = max(count if normalizers is None else normalizers[step], 1)
        normed = model.norm(hidden[selected])
        logits = model.lm_head(normed).float()
        # Soft-label cross entropy: -(teacher probs * draft log-probs), summed over rows.
        soft_targets = teacher.probs[batch_rows, target_index]
        step_loss = F.cross_entropy(logits, soft_targets, reduction="sum") / divisor
        total = total + (decay**step) * step_loss
        if regress:
            assert target_final_hidden is not None
            feature_loss = feature_regression_loss(normed, target_final_hidden[batch_rows, target_index])
            feature_loss = feature_loss / divisor
            total = total + (decay**step) * feature_loss_weight * feature_loss
            feature_losses.append(float(feature_loss.detach()))
        hits = logits.argmax(-1) == teacher.argmax_draft_id[batch_rows, target_index]
        losses.append(float(step_loss.detach()))
        accuracy.append(float(hits.sum()) / divisor)
        counts.append(count)
    return TTTOutput(
        loss=total,
        step_losses=losses,
        step_accuracy=accuracy,
        step_counts=counts,
        step_feature_losses=feature_losses if regress else None,
    )
