"""The head's optimizer: AdamW alone, or Muon on the hidden matrices with AdamW for the rest.

Muon orthogonalises each hidden matrix's momentum (Newton-Schulz) before the update, which
trains transformer blocks in fewer steps than AdamW; speculators trains its EAGLE-3 heads
this way. The output layer (``lm_head``), norms and any vector stay on AdamW, as Muon's
authors advise. With ``adjust_lr_fn="match_rms_adamw"`` Muon's update has AdamW's RMS, so
one learning rate (and one schedule) drives both.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal, Protocol

import torch
from torch import nn

OptimizerName = Literal["adamw", "muon"]
_ADAMW_BETAS = (0.9, 0.95)


class HeadOptimizer(Protocol):
    """What the training loop and checkpoints use of an optimizer."""

    @property
    def param_groups(self) -> list[dict[str, Any]]: ...

    def zero_grad(self, set_to_none: bool = True) -> None: ...

    def step(self) -> None: ...

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state_dict: dict[str, Any]) -> None: ...


class _Joined:
    """Several optimizers over disjoint parameters, stepped and saved as one."""

    def __init__(self, parts: dict[str, torch.optim.Optimizer]) -> None:
        self._parts = parts

    @property
    def param_groups(self) -> list[dict[str, Any]]:
        # The groups themselves, not copies: the loop sets each one's "lr" in place.
        return [group for part in self._parts.values() for group in part.param_groups]

    def zero_grad(self, set_to_none: bool = True) -> None:
        for part in self._parts.values():
            part.zero_grad(set_to_none=set_to_none)

    def step(self) -> None:
        for part in self._parts.values():
            part.step()

    def state_dict(self) -> dict[str, Any]:
        return {name: part.state_dict() for name, part in self._parts.items()}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        if set(state_dict) != set(self._parts):
            raise ValueError(
                f"optimizer state holds {sorted(state_dict)}, this run's optimizer has "
                f"{sorted(self._parts)}: a checkpoint resumes only with the optimizer it was saved with"
            )
        for name, part in self._parts.items():
            part.load_state_dict(state_dict[name])


def _decay_groups(params: Iterable[nn.Parameter], weight_decay: float) -> list[dict[str, Any]]:
    """Decay matrices only; norms are scales that decay would pull towards zero."""
    params = list(params)
    return [
        {"params": [p for p in params if p.dim() >= 2], "weight_decay": weight_decay},
        {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0},
    ]


def build_optimizer(head: nn.Module, *, name: OptimizerName, lr: float, weight_decay: float) -> HeadOptimizer:
    trainable = [(n, p) for n, p in head.named_parameters() if p.requires_grad]
    if name == "adamw":
        # Plain AdamW, so checkpoints keep the state layout earlier runs saved.
        return torch.optim.AdamW(
            _decay_groups((p for _, p in trainable), weight_decay), lr=lr, betas=_ADAMW_BETAS, eps=1e-8
        )
    hidden = [p for n, p in trainable if p.dim() == 2 and not n.startswith("lm_head")]
    rest = [p for n, p in trainable if not (p.dim() == 2 and not n.startswith("lm_head"))]
    return _Joined(
        {
            "muon": torch.optim.Muon(
                hidden, lr=lr, weight_decay=weight_decay, adjust_lr_fn="match_rms_adamw"
            ),
            "adamw": torch.optim.AdamW(
                _decay_groups(rest, weight_decay), lr=lr, betas=_ADAMW_BETAS, eps=1e-8
            ),
        }
    )
