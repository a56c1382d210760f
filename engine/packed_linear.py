"""oneDNN pre-packed weights for every ``nn.Linear`` of a model running on a CPU.

``F.linear`` on a CPU goes through MKL's sgemm. On our 2-core AMD EPYC machines it was
slow for one row and much slower still for 2-8 rows: a SmolLM2-135M forward over K+1
tokens cost 2.3-3.2x a one-token forward. oneDNN's inner product over a weight
reordered once into its blocked layout streams the weights at memory speed for one row
and for a few alike: the same forward over K+1 tokens cost 1.1-1.2x, and one token got
faster too. Each row also comes out bit-for-bit the same whatever the number of rows (SDPA
attention does not: it still differs in the last bits between one query and several).

Packing is an inference-only change of the model in place, applied to both sides of any
comparison (plain and speculative decoding share the target).

The batched path (``engine.runner.SlotRunner``: distillation, prompt writing) packs a float32
target only while it runs, and only for small products: its decode steps multiply 48-96 rows,
where the packed weights win (a 48-row step of SmolLM2 took 223 ms packed against 286 ms
through MKL on the 2-core AVX2 machine, medians of ten interleaved runs; the LM head alone ran
at 118 GFLOP/s against 63), while its prefills multiply up to 2,048 rows, where the two
kernels came out within 15 % of each other either way from one run to the next, so prefills
keep the stock kernel (``benchmarks/packed_linear_speed.py`` prints every layer at both sizes).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch
from torch import nn
from torch.nn import functional


def packing_available(device: torch.device) -> bool:
    available = bool(torch.backends.mkldnn.is_available())  # type: ignore[no-untyped-call]
    return device.type == "cpu" and available and bool(torch.backends.mkldnn.enabled)


def packable_dtypes() -> tuple[torch.dtype, ...]:
    """The dtypes oneDNN has blocked layouts for on this CPU; other dtypes keep the stock
    kernel. bfloat16 needs AVX512 (BW/VL/DQ) or AVX-NE-CONVERT: an AVX2-only CPU refuses it."""
    if torch.ops.mkldnn._is_mkldnn_bf16_supported():
        return (torch.float32, torch.bfloat16)
    return (torch.float32,)


class PackedLinear(nn.Module):
    """A ``nn.Linear`` whose forward uses a oneDNN-packed copy of its weight.

    ``weight`` and ``bias`` stay the original parameters, so code that reads them (tied
    embeddings, shape checks, ``state_dict``) sees no difference. No autograd: inference only.
    With ``max_packed_rows``, a product of more rows than that runs through ``F.linear``.
    """

    def __init__(self, linear: nn.Linear, max_packed_rows: int | None = None) -> None:
        super().__init__()
        self.max_packed_rows = max_packed_rows
        self.in_features = linear.in_features
        self.out_features = linear.out_features
        self.weight = linear.weight
        self.bias = linear.bias
        with torch.no_grad():
            packed = torch.ops.mkldnn._reorder_linear_weight(linear.weight.detach())
        self.register_buffer("packed_weight", packed, persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.max_packed_rows is not None and x.numel() > self.max_packed_rows * self.in_features:
            return functional.linear(x, self.weight, self.bias)
        return torch.ops.mkldnn._linear_pointwise(  # type: ignore[no-any-return]
            x, self.packed_weight, self.bias, "none", [], ""
        )

    def extra_repr(self) -> str:
        bias = self.bias is not None
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={bias}"


def pack_linear_layers(model: nn.Module) -> int:
    """Replace every packable ``nn.Linear`` inside ``model`` by a ``PackedLinear``; returns
    how many were replaced. Call after the model has its final device and dtype."""
    return len(_replace_linear_layers(model, dtypes=packable_dtypes(), max_packed_rows=None))


@contextmanager
def small_products_packed(model: nn.Module, *, max_packed_rows: int) -> Iterator[int]:
    """Within the block, every float32 ``nn.Linear`` of ``model`` on a CPU multiplies up to
    ``max_packed_rows`` rows with a packed weight (the module's note says why); yields how many
    layers were packed. The original modules are back afterwards."""
    replaced = _replace_linear_layers(model, dtypes=(torch.float32,), max_packed_rows=max_packed_rows)
    try:
        yield len(replaced)
    finally:
        for parent, name, linear in reversed(replaced):
            setattr(parent, name, linear)


def _replace_linear_layers(
    model: nn.Module, *, dtypes: tuple[torch.dtype, ...], max_packed_rows: int | None
) -> list[tuple[nn.Module, str, nn.Linear]]:
    """Swap in a ``PackedLinear`` for each packable ``nn.Linear`` in ``dtypes``; returns
    (parent, name, original) of each swap."""
    replaced: list[tuple[nn.Module, str, nn.Linear]] = []
    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            if type(child) is nn.Linear and child.weight.dtype in dtypes and _packable(child):
                setattr(parent, name, PackedLinear(child, max_packed_rows))
                replaced.append((parent, name, child))
    return replaced


def _packable(linear: nn.Linear) -> bool:
    return linear.weight.dtype in packable_dtypes() and packing_available(linear.weight.device)
