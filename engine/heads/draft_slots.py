"""The draft head's keys and values for a whole serving batch: one slot-major pool.

``DraftKVCache`` (``engine.heads.model``) keeps one growing tensor per sequence: every head
forward concatenates onto it (a copy of the whole cache) and attends sequence by sequence,
so a draft step costs a few kernels per sequence and grows with the batch. Here every
sequence owns a slot of one preallocated pool (``engine.kv_pool.SlotKVPool``, the target's
kind), and a head forward over the batch writes all new entries with one ``index_put_`` and
attends with one ``scaled_dot_product_attention`` call, whatever the number of sequences.

A slot's state is its committed length: how many entries were built from the target's
features. The chain's own entries are written past it and never committed, so dropping them
(rejected drafts, the end of a proposal) costs nothing: the next commit writes over them, and
until then no query can see them, since a query at position ``p`` sees keys ``<= p`` only.
The committed lengths live on the host, where the engine learns how many tokens each sequence
accepted anyway; positions reach the device once per proposal, and the chain derives its
own on the device.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from engine.grouped_attention import grouped_attention
from engine.kv_pool import SlotKVPool
from engine.slot_attention import visible_keys

# The first capacity of a slot, in positions; it doubles when a sequence outgrows it.
_INITIAL_POSITIONS = 256


@dataclass(frozen=True, slots=True)
class HeadSlotStep:
    """One head forward over a padded batch ``[B, Q]``.

    ``rows`` [B, 1]: each batch row's slot. ``positions`` [B, Q]: each new entry's position,
    where it is written and what its rotary embedding encodes (the pool's scratch position
    for padding). ``mask`` [B, 1, Q, key_length]: which keys each query sees."""

    pool: SlotKVPool
    rows: torch.Tensor
    positions: torch.Tensor
    key_length: int
    mask: torch.Tensor

    def attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float) -> torch.Tensor:
        """Store ``k``/``v`` [B, kv_heads, Q, D] at their positions, then attend ``q`` [B, heads,
        Q, D] over each row's slot: one write and one attention call for the batch."""
        keys, values = self.pool.layer(0, k)
        # Advanced indices on dims 0 and 2 around a slice put [B, Q] first: [B, Q, kv_heads, D].
        keys[self.rows, :, self.positions] = k.transpose(1, 2).to(keys.dtype)
        values[self.rows, :, self.positions] = v.transpose(1, 2).to(values.dtype)
        slots = self.rows[:, 0]
        seen_keys = keys[slots, :, : self.key_length]
        seen_values = values[slots, :, : self.key_length]
        out = grouped_attention(q.to(keys.dtype), seen_keys, seen_values, self.mask, scale)
        return out.to(q.dtype)


class DraftSlots:
    """Slots of the head's pool for up to ``slots`` sequences, with their committed lengths.

    The pool has one row more, ``spare``, which no sequence holds: rows that pad a batch to a
    fixed shape (a CUDA graph's) write there."""

    def __init__(self, slots: int, device: torch.device) -> None:
        self.pool = SlotKVPool(1, slots + 1, _INITIAL_POSITIONS, device)
        self.device = device
        self.slots = slots
        self.spare = slots
        self._lengths = [0] * slots
        self._free = list(range(slots - 1, -1, -1))  # popped from the end: slot 0 first

    def acquire(self) -> int:
        """A free slot with nothing committed."""
        if not self._free:
            raise RuntimeError(f"all {self.slots} draft slots are in use")
        slot = self._free.pop()
        self._lengths[slot] = 0
        return slot

    def release(self, slot: int) -> None:
        if slot in self._free or not 0 <= slot < self.slots:
            raise ValueError(f"draft slot {slot} is not in use")
        self._free.append(slot)

    @property
    def in_use(self) -> int:
        return self.slots - len(self._free)

    def length(self, slot: int) -> int:
        """Entries of ``slot`` built from target features."""
        return self._lengths[slot]

    def commit(self, slot: int, length: int) -> None:
        self._lengths[slot] = length

    def step(self, rows: torch.Tensor, positions: torch.Tensor, key_length: int) -> HeadSlotStep:
        """A forward writing at ``positions`` [B, Q] of slots ``rows`` [B, 1] and attending over
        the first ``key_length`` positions; the pool must already hold ``key_length``."""
        if key_length >= self.pool.capacity:
            raise ValueError(f"{key_length} keys do not fit a pool of {self.pool.capacity - 1} positions")
        mask = visible_keys(positions, key_length)
        return HeadSlotStep(self.pool, rows, positions, key_length, mask)
