"""Per-slot device buffers of the target features recorded during generation."""

from __future__ import annotations

import torch

from engine.replies import SampleFeatures


class FeatureBuffers:
    """Aux states [slots, capacity, A] and final hidden [slots, capacity, H], written at the
    same positions as the keys; allocated on the first write (the recorder decides dtypes)."""

    def __init__(self, slots: int, capacity: int, device: torch.device) -> None:
        self.slots, self.capacity, self.device = slots, capacity, device
        self.aux: torch.Tensor | None = None
        self.final: torch.Tensor | None = None

    def write(
        self, rows: torch.Tensor, write_positions: torch.Tensor, aux: torch.Tensor, final: torch.Tensor
    ) -> None:
        """Store ``aux`` [B, Q, A] and ``final`` [B, Q, H] at ``write_positions`` [B, Q] of
        the slots ``rows`` [B, 1]."""
        if self.aux is None or self.final is None:
            self.aux = aux.new_zeros((self.slots, self.capacity, aux.shape[-1]))
            self.final = final.new_zeros((self.slots, self.capacity, final.shape[-1]))
        self.aux[rows, write_positions] = aux.to(self.aux.dtype)
        self.final[rows, write_positions] = final.to(self.final.dtype)

    def move(self, sources: torch.Tensor, targets: torch.Tensor, length: int) -> None:
        if self.aux is None or self.final is None:
            return
        self.aux[targets, :length] = self.aux[sources, :length]
        self.final[targets, :length] = self.final[sources, :length]

    def sample(
        self, slot: int, prompt_length: int, generated: int, argmax: torch.Tensor
    ) -> SampleFeatures | None:
        """Features of prompt + reply in ``slot``: every fed position's; the last generated
        token was never fed back, so its row is zeros (no loss reads it: nothing follows it).
        ``argmax`` [generated]: the target's greedy choice at each generation step, which is
        what the loss compares the draft with from the prompt's last position on."""
        if self.aux is None or self.final is None:
            return None
        length = prompt_length + generated
        aux = self.aux.new_zeros((length, self.aux.shape[-1]), device="cpu")
        final = self.final.new_zeros((length, self.final.shape[-1]), device="cpu")
        # Kept in host memory with the sample for the whole run, whatever device recorded them.
        aux[: length - 1] = self.aux[slot, : length - 1].cpu()
        final[: length - 1] = self.final[slot, : length - 1].cpu()
        argmax_ids = torch.zeros(length, dtype=torch.long)
        argmax_ids[prompt_length - 1 : length - 1] = argmax
        return SampleFeatures(aux_hidden_states=aux, final_hidden=final, argmax_ids=argmax_ids)
