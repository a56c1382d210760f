"""When prompts waiting for the slot pool join it: how many free slots a step waits for."""

from __future__ import annotations

import torch

# On a GPU a prefill is an eager forward (a prompt's width is no decode graph's): launch-bound,
# about 50 kernels a layer (some 1,500 for SmolLM2), several times a replayed decode step. At
# 256 rows and replies of about 100 tokens, two or three rows end every step, so admitting each
# as it ends ran such a prefill nearly every step, which alone would take more than a step's
# budget at 50k tokens/s. Joiners wait there until an eighth of the rows is free: a prefill
# every dozen steps or so, for about 6 % of the rows idle on average. A CPU's prefill costs its
# tokens, not launches: it admits a row as soon as its slot is free.
JOIN_SHARE = 8


def rows_per_join(rows: int, device: torch.device) -> int:
    """Free slots a step waits for before admitting prompts (fewer when fewer prompts wait)."""
    return max(1, rows // JOIN_SHARE) if device.type == "cuda" else 1
