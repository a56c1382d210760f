"""A preallocated key/value pool: one tensor per decoder layer, one slot per batch row.

Slot-major ([slots, kv_heads, capacity, head_dim]) rather than paged: distillation rows have
a known upper length (prompt + reply cap), and a slot-major pool lets a step attend to
``pool[:rows, :, :keys]`` as a plain view — no gather, no block table, the same shapes every
step (what a CUDA graph needs). A step writes its new keys with one ``index_put_`` per layer
at device-side positions, so a row's length lives on the device and rolling back rejected
tokens is only a smaller length (nothing is copied or freed).

The last position of every slot is scratch: padded query positions write there, and no
mask ever lets a query see it.

On a CPU a bf16 or fp16 target keeps its keys and values in fp32: the CPU's flash-attention
kernel runs a decode step (one query per row) about 5x slower in bf16 than in fp32 (48 rows x
384 keys, SmolLM2's 9 query / 3 key heads: 9.6 ms against 1.8 ms a layer on AVX512-BF16), which
gave back most of what bf16 matmuls win. Converting only the new keys on write and the query
keeps the fp32 kernel's speed (the profiled batched run's attention: 2.3 s against fp32's 2.1 s);
converting the pool on every read would cost 3.0 ms a layer.
"""

from __future__ import annotations

import torch


def pool_dtype(like: torch.Tensor) -> torch.dtype:
    """The dtype a pool keeps keys and values in, for keys like ``like``: fp32 on a CPU for a
    half-precision target (see the module's note), the target's own dtype elsewhere."""
    if like.device.type == "cpu" and like.dtype in {torch.bfloat16, torch.float16}:
        return torch.float32
    return like.dtype


class SlotKVPool:
    """Keys and values of ``slots`` rows of up to ``capacity - 1`` positions each.

    Layers are allocated on their first write, from the shape of the keys the attention
    module hands over, so the pool needs to know nothing of the architecture."""

    def __init__(self, num_layers: int, slots: int, capacity: int, device: torch.device) -> None:
        if slots < 1 or capacity < 2:
            raise ValueError(f"a pool needs at least 1 slot and capacity 2, got {slots} and {capacity}")
        self.slots, self.capacity, self.device = slots, capacity, device
        self._keys: list[torch.Tensor | None] = [None] * num_layers
        self._values: list[torch.Tensor | None] = [None] * num_layers

    @property
    def scratch(self) -> int:
        """The position padded queries write to (never attended)."""
        return self.capacity - 1

    def layer(self, layer: int, like: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Layer ``layer``'s key and value pools, allocated like ``like`` [B, kv_heads, Q, D]
        (in ``pool_dtype(like)``)."""
        keys, values = self._keys[layer], self._values[layer]
        if keys is None or values is None:
            shape = (self.slots, like.shape[1], self.capacity, like.shape[3])
            dtype = pool_dtype(like)
            keys = torch.zeros(shape, dtype=dtype, device=self.device)
            values = torch.zeros(shape, dtype=dtype, device=self.device)
            self._keys[layer], self._values[layer] = keys, values
        return keys, values

    def ensure_positions(self, positions: int) -> None:
        """Make room for ``positions`` positions a slot, doubling the capacity as often as that
        takes (each allocated layer is copied once per doubling). The scratch position moves to
        the new end; nothing written before is lost. For callers that cannot bound a row's length
        up front, like the draft head of a serving batch."""
        if positions < self.capacity:
            return
        capacity = self.capacity
        while positions >= capacity:
            capacity *= 2
        old = self.capacity - 1  # the scratch position holds nothing worth keeping
        for store in (self._keys, self._values):
            for layer, tensor in enumerate(store):
                if tensor is None:
                    continue
                grown = tensor.new_zeros((tensor.shape[0], tensor.shape[1], capacity, tensor.shape[3]))
                grown[:, :, :old] = tensor[:, :, :old]
                store[layer] = grown
        self.capacity = capacity

    def move(self, sources: torch.Tensor, targets: torch.Tensor, length: int) -> None:
        """Copy positions ``0..length-1`` of each slot in ``sources`` to the matching ``targets``
        (a row moving down, or the shared prefix's slot into every joiner's)."""
        for keys, values in zip(self._keys, self._values, strict=True):
            if keys is None or values is None:
                continue
            keys[targets, :, :length] = keys[sources, :, :length]
            values[targets, :, :length] = values[sources, :, :length]

    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in [*self._keys, *self._values] if t is not None)
