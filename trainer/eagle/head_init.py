"""Where a new head starts: random, or with the target's own output layer.

The head's lm_head maps its hidden state onto the draft vocabulary, and the hidden
state it learns to produce plays the role of the target's final hidden state. Starting
``norm`` and ``lm_head`` as the target's final norm and lm_head rows (the draft
vocabulary's) hands the head a ready-made output layer for that space.
"""

from __future__ import annotations

from typing import Literal

import torch
from transformers import PreTrainedModel

from engine.capture import final_norm
from engine.heads.model import Eagle3DraftModel

InitMode = Literal["lm_head", "random"]


@torch.no_grad()
def init_head_from_target(
    head: Eagle3DraftModel, target: PreTrainedModel, draft_lm_head_rows: torch.Tensor, mode: InitMode
) -> None:
    """``lm_head``: copy the target's lm_head rows of the draft vocabulary and its final
    norm into the head. ``random``: leave the head as built, except an EAGLE-2 head's
    lm_head, which is always the target's (it is frozen and not exported)."""
    if mode == "random" and head.config.variant != "eagle2":
        return
    head.lm_head.weight.copy_(draft_lm_head_rows)
    norm_weight = getattr(final_norm(target), "weight", None)
    head_norm_weight = getattr(head.norm, "weight", None)  # EAGLE-2 heads have no output norm
    if (
        isinstance(norm_weight, torch.Tensor)
        and isinstance(head_norm_weight, torch.Tensor)
        and norm_weight.shape == head_norm_weight.shape
    ):
        head_norm_weight.copy_(norm_weight.float())
