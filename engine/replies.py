"""What generation hands back: each prompt's reply and the target features recorded on the way."""

from __future__ import annotations

from dataclasses import dataclass
from types import TracebackType
from typing import Any, Protocol

import torch


@dataclass(frozen=True)
class SampleFeatures:
    """One sample's target outputs, position by position (length = the sample's tokens)."""

    aux_hidden_states: torch.Tensor  # [L, 3*H]
    final_hidden: torch.Tensor  # [L, H], after the target's final norm
    argmax_ids: torch.Tensor  # [L] the target's greedy next token where the loss reads it, else 0


@dataclass(frozen=True, slots=True)
class Reply:
    """One prompt's reply: tokens without the stop token, the stop token (None when cut at the
    length cap or by a stop request), and the recorded features of prompt + reply."""

    tokens: list[int]
    stop_token: int | None
    features: SampleFeatures | None


class FeatureRecorder(Protocol):
    """Records the target's features forward by forward (hooks opened by ``with``)."""

    def __enter__(self) -> Any: ...

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> Any: ...

    def take_latest(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The latest forward's aux states [B, T, A] and final hidden [B, T, H]."""
        ...

    @property
    def layout(self) -> tuple[object, ...]:
        """What the recorded features are (layers, dtypes): two recorders of one layout make the
        same step outputs, so a CUDA graph captured with one replays for the other."""
        ...
