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
"""

from __future__ import annotations

import torch
from torch import nn


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
    """

    def __init__(self, linear: nn.Linear) -> None:
        super().__init__()
        self.in_features = linear.in_features
        self.out_features = linear.out_features
        self.weight = linear.weight
        self.bias = linear.bias
        with torch.no_grad():
            packed = torch.ops.mkldnn._reorder_linear_weight(linear.weight.detach())
        self.register_buffer("packed_weight", packed, persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.ops.mkldnn._linear_pointwise(  # type: ignore[no-any-return]
            x, self.packed_weight, self.bias, "none", [], ""
        )

    def extra_repr(self) -> str:
        bias = self.bias is not None
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={bias}"


def pack_linear_layers(model: nn.Module) -> int:
    """Replace every packable ``nn.Linear`` inside ``model`` by a ``PackedLinear``; returns
    how many were replaced. Call after the model has its final device and dtype."""
    replaced = 0
    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            if type(child) is nn.Linear and _packable(child):
                setattr(parent, name, PackedLinear(child))
                replaced += 1
    return replaced


def _packable(linear: nn.Linear) -> bool:
    return linear.weight.dtype in packable_dtypes() and packing_available(linear.weight.device)
