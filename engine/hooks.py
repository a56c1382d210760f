"""Forward hooks that live exactly as long as a ``with`` block.

Both ways of reading target features (``TargetFeatureCapture`` for one forward at a time,
``GenerationRecorder`` across a whole ``generate``) hook the same decoder layers and must
leave the model as they found it, even when the forward raises.
"""

from __future__ import annotations

from collections.abc import Iterable
from types import TracebackType
from typing import Any, Self

import torch
from torch.utils.hooks import RemovableHandle


def layer_input(layer_id: int, args: tuple[Any, ...], kwargs: dict[str, Any]) -> torch.Tensor:
    """The hidden state a decoder layer was called with (first argument or ``hidden_states``)."""
    hidden = args[0] if args else kwargs.get("hidden_states")
    if not isinstance(hidden, torch.Tensor):
        raise RuntimeError(f"decoder layer {layer_id} was called without a hidden_states tensor")
    return hidden


class ScopedHooks:
    """Context manager base: ``_register()`` installs the hooks on entry, exit removes them."""

    def __init__(self) -> None:
        self._handles: list[RemovableHandle] = []

    def _register(self) -> Iterable[RemovableHandle]:
        raise NotImplementedError

    def __enter__(self) -> Self:
        if self._handles:
            raise RuntimeError(f"{type(self).__name__} is already open")
        self._handles.extend(self._register())
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles.clear()
