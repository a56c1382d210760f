"""bfloat16 copies of a frozen fp32 model's Linear weights (its decoder layers', its LM head's),
lent to it for a forward under bf16 autocast.

Autocast casts a Linear's fp32 weight to bf16 on every call; it keeps a cast only for weights
that require grad, and the target a head trains against is frozen. On SmolLM2-135M those casts
were a fifth of a CPU feature pass (a profile of three 510-token passes: ``aten::copy_`` 0.51 s
of 2.56 s). The copies made here are the casts autocast makes, so a forward that borrows them
computes exactly what it would compute without them, bit for bit.

The copies are lent module by module (a Linear's own parameter slots), so an LM head tied to
the input embedding borrows a bf16 weight while the embedding keeps its fp32 one, and the
residual stream stays fp32 as autocast keeps it. The copies cost half the Linears' fp32 size in
memory, so a model whose copies would pass ``max_bytes`` is left to autocast.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch
from torch import nn

MAX_COPY_BYTES = 2 * 1024**3


class AutocastWeights:
    """The bf16 copies of the fp32 weights and biases of the Linears in ``modules`` (none if they
    would not fit)."""

    def __init__(self, *modules: nn.Module, max_bytes: int = MAX_COPY_BYTES) -> None:
        linears = [
            m
            for module in modules
            for m in module.modules()
            if type(m) is nn.Linear and m.weight.dtype == torch.float32
        ]
        size = sum(m.weight.numel() + (0 if m.bias is None else m.bias.numel()) for m in linears) * 2
        self._linears = linears if size <= max_bytes else []
        self._copies = [
            {name: _bf16(tensor) for name, tensor in m.named_parameters(recurse=False)} for m in self._linears
        ]

    @property
    def bytes(self) -> int:
        return sum(t.numel() * t.element_size() for copies in self._copies for t in copies.values())

    @contextmanager
    def lent(self) -> Iterator[None]:
        """Within this block the Linears hold the bf16 copies; their own weights come back after."""
        originals = [dict(m._parameters) for m in self._linears]
        try:
            for module, copies in zip(self._linears, self._copies, strict=True):
                module._parameters.update(copies)
            yield
        finally:
            for module, own in zip(self._linears, originals, strict=True):
                module._parameters.update(own)


def _bf16(tensor: torch.Tensor) -> nn.Parameter:
    return nn.Parameter(tensor.detach().to(torch.bfloat16), requires_grad=False)
