"""The P-EAGLE loss: every draft depth trained at once from the mask slots.

Depth 0 is EAGLE-3's step 0 (``ttt.ttt_loss``'s): the fused target feature at index t
with the embedding of token t+1, predicting token t+2. Depth d > 0 is the mask slot at
position t+d of the same anchor t, predicting token t+2+d from the target's distribution
at t+1+d; it attends to depth-0 keys at indices <= t and to the mask slots at t+1..t+d,
which is what one parallel-drafting forward sees at inference.

The paper precomputes that attention mask for a long packed row. For a one-layer head the
same scores come cheaper: a mask slot's key and value depend on its position only (all
its inputs are the learnt constants), so depth d needs the depth-0 keys (computed once)
plus d keys made from positions (``PEagleDraftModel.mask_keys_values``), laid out as
``Eagle3Attention.ttt_attention``'s diagonal. Each depth therefore costs only the anchors
it trains, and *drop-token sampling* keeps about n*r^d of the n anchors at depth d (a
fresh draw per depth and step; all of them when evaluating), spending the compute where
acceptance is decided: the first drafts.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F  # noqa: N812 - the conventional name

from engine.heads.model import TTTKeyValues
from engine.heads.peagle import PEagleDraftModel
from trainer.eagle.ttt import TeacherTargets, TTTOutput, _pack, _shift_left


def _kept_anchors(mask: torch.Tensor, keep_probability: float) -> torch.Tensor:
    """A random subset of the True entries of ``mask``, each kept with ``keep_probability``."""
    if keep_probability >= 1.0:
        return mask
    # From the CPU's generator whatever the mask's device: a checkpoint saves and restores that
    # one (trainer.eagle.checkpoint), not a GPU's, so a run resumed on a GPU keeps the anchors the
    # straight run keeps. The copy costs no extra wait: _pack reads the anchors' counts back next.
    draws = torch.rand(mask.shape).to(mask.device)
    return mask & (draws < keep_probability)


def parallel_loss(
    model: PEagleDraftModel,
    *,
    input_ids: torch.Tensor,
    aux_hidden_states: torch.Tensor,
    teacher: TeacherTargets,
    loss_mask: torch.Tensor,
    depths: int,
    decay: float = 0.8,
    keep_ratio: float = 0.75,
) -> TTTOutput:
    """P-EAGLE loss over ``depths`` draft positions for a right-padded batch.

    Arguments as ``ttt.ttt_loss``'s; ``keep_ratio`` is r of the drop-token sampling (depth d
    keeps each anchor with probability r**d while the model is training).
    """
    batch, length = input_ids.shape
    in_draft_vocab = teacher.argmax_draft_id >= 0
    masks = [
        _shift_left(loss_mask.bool(), 2 + depth, False) & _shift_left(in_draft_vocab, 1 + depth, False)
        for depth in range(depths)
    ]
    positions = torch.arange(length, device=input_ids.device).expand(batch, length)
    # Depth 0: the EAGLE-3 step over the whole row (its keys serve every depth).
    index, valid = _pack(masks[0])
    context = TTTKeyValues()
    hidden = model.fuse(aux_hidden_states)
    out = model.forward_ttt_step(_shift_left(input_ids, 1, 0), hidden, positions, context, query_index=index)
    total = out.new_zeros(())
    losses: list[float] = []
    accuracy: list[float] = []
    counts: list[int] = []

    def add(depth: int, prenorm: torch.Tensor, index: torch.Tensor, valid: torch.Tensor) -> None:
        nonlocal total
        rows = torch.arange(batch, device=input_ids.device)[:, None].expand_as(index)[valid]
        target_index = index[valid] + 1 + depth
        count = int(rows.numel())
        logits = model.lm_head(model.norm(prenorm[valid])).float()
        step_loss = F.cross_entropy(logits, teacher.probs[rows, target_index], reduction="sum") / max(
            count, 1
        )
        total = total + (decay**depth) * step_loss
        hits = logits.argmax(-1) == teacher.argmax_draft_id[rows, target_index]
        losses.append(float(step_loss.detach()))
        accuracy.append(float(hits.sum()) / max(count, 1))
        counts.append(count)

    add(0, out, index, valid)
    for depth in range(1, depths):
        kept = _kept_anchors(masks[depth], keep_ratio**depth if model.training else 1.0)
        index, valid = _pack(kept)
        if index.shape[1] == 0:  # no anchor this deep in the batch (or none kept)
            losses.append(0.0)
            accuracy.append(0.0)
            counts.append(0)
            continue
        steps = TTTKeyValues(keys=[context.keys[0]], values=[context.values[0]])
        for earlier in range(1, depth):
            keys, values = model.mask_keys_values(index + earlier)
            steps.keys.append(keys)
            steps.values.append(values)
        ids, mask_hidden = model.mask_inputs(index.numel(), dtype=hidden.dtype)
        prenorm = model.forward_ttt_step(
            ids.view(index.shape),
            mask_hidden.reshape(*index.shape, -1),
            index + depth,
            steps,
            query_index=index,
        )
        add(depth, prenorm, index, valid)
    return TTTOutput(loss=total, step_losses=losses, step_accuracy=accuracy, step_counts=counts)
