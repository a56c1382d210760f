"""Which ATen operators a block of code dispatches: the structural cost of an engine step.

On a GPU each operator is about one kernel launch, which is what a small model's step costs
there, so the count is measured on a CPU (the draft benchmark prints it beside each step's
time) and checked by tests (a packed product dispatches oneDNN's kernel, not a plain mm).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from torch.utils._python_dispatch import TorchDispatchMode


class DispatchedOps(TorchDispatchMode):  # type: ignore[no-untyped-call]
    """Records the name of every operator dispatched while the mode is entered, in order."""

    def __init__(self) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.names: list[str] = []

    def __torch_dispatch__(
        self,
        func: Callable[..., Any],
        types: object,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        self.names.append(str(getattr(func, "overloadpacket", func)))
        return func(*args, **(kwargs or {}))
