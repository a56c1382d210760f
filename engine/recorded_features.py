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

    def samples(
        self, slots: torch.Tensor, prompt_lengths: list[int], generated: list[int], argmax: torch.Tensor
    ) -> list[SampleFeatures | None]:
        """Features of prompt + reply in each of ``slots`` [N] (on the buffers' device): every
        fed position's; the last generated token was never fed back, so its row is zeros (no
        loss reads it: nothing follows it). ``argmax`` [N, >= generated]: the target's greedy
        choice at each generation step, which is what the loss compares the draft with from the
        prompt's last position on.

        The rows come back to the host in one copy per buffer, however many rows ended this
        step: a copy each (two a row) was a device-to-host transfer and sync each, two or three
        rows ending every step at a GPU's 256 rows."""
        if self.aux is None or self.final is None:
            return [None] * len(prompt_lengths)
        lengths = [prompt + count for prompt, count in zip(prompt_lengths, generated, strict=True)]
        fed = max(lengths) - 1
        # Kept in host memory with the samples for the whole run, whatever device recorded them.
        aux_rows, final_rows = self.aux[slots, :fed].cpu(), self.final[slots, :fed].cpu()
        out: list[SampleFeatures | None] = []
        for row, (prompt, length) in enumerate(zip(prompt_lengths, lengths, strict=True)):
            aux = aux_rows.new_zeros((length, aux_rows.shape[-1]))
            final = final_rows.new_zeros((length, final_rows.shape[-1]))
            aux[: length - 1] = aux_rows[row, : length - 1]
            final[: length - 1] = final_rows[row, : length - 1]
            argmax_ids = torch.zeros(length, dtype=torch.long)
            argmax_ids[prompt - 1 : length - 1] = argmax[row, : length - prompt]
            out.append(SampleFeatures(aux_hidden_states=aux, final_hidden=final, argmax_ids=argmax_ids))
        return out
