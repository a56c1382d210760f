"""Per-slot device buffers of the target features recorded during generation."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from engine.replies import SampleFeatures
from engine.transfers import CopiesQueued, to_host

# Ended rows whose features come back in one copy: a step ends two or three at a GPU's 256 rows.
ROWS_PER_COPY = 16


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

    def copy_back(self, slots: torch.Tensor, prompt_lengths: list[int], generated: list[int]) -> FeatureCopy:
        """Start copying the features of prompt + reply in each of ``slots`` [N] (on the
        buffers' device) to the host: every fed position's (the last generated token was never
        fed back, so no position holds it).

        The rows come back in one copy per buffer, however many rows ended this step: a copy
        each (two a row) was a device-to-host transfer and sync each, two or three rows ending
        every step at a GPU's 256 rows. On a GPU the copies are only queued: the slots may take
        new rows at once (the device runs the copies first), and ``FeatureCopy.samples`` waits
        for them."""
        lengths = [prompt + count for prompt, count in zip(prompt_lengths, generated, strict=True)]
        groups: list[tuple[range, torch.Tensor, torch.Tensor]] = []
        if self.aux is not None and self.final is not None:
            # In groups, so that the gathered copy stays small on the device when every row ends
            # at once (a run's last step), whatever the model's width and the rows' lengths.
            for start in range(0, len(lengths), ROWS_PER_COPY):
                group = range(start, min(start + ROWS_PER_COPY, len(lengths)))
                fed = max(lengths[row] for row in group) - 1
                # Kept in host memory with the samples for the run, whatever device recorded them.
                rows = slots[group.start : group.stop]
                groups.append((group, to_host(self.aux[rows, :fed]), to_host(self.final[rows, :fed])))
        return FeatureCopy(prompt_lengths, lengths, groups, CopiesQueued(self.device))


@dataclass(frozen=True, slots=True)
class FeatureCopy:
    """Ended rows' features on their way to the host (``FeatureBuffers.copy_back``): per group of
    rows, the rows' indices and their aux and final rows in host memory."""

    prompt_lengths: list[int]
    lengths: list[int]
    groups: list[tuple[range, torch.Tensor, torch.Tensor]]
    copied: CopiesQueued

    def samples(self, argmax: torch.Tensor) -> list[SampleFeatures | None]:
        """Each row's features, once copied; ``argmax`` [N, >= generated] (host): the target's
        greedy choice at each generation step, which is what the loss compares the draft with
        from the prompt's last position on. The last position's row is zeros: no loss reads it
        (nothing follows it)."""
        if not self.groups:
            return [None] * len(self.lengths)
        self.copied.wait()
        out: list[SampleFeatures | None] = []
        for group, aux_rows, final_rows in self.groups:
            for row in group:
                prompt, length, at = self.prompt_lengths[row], self.lengths[row], row - group.start
                aux = aux_rows.new_zeros((length, aux_rows.shape[-1]))
                final = final_rows.new_zeros((length, final_rows.shape[-1]))
                aux[: length - 1] = aux_rows[at, : length - 1]
                final[: length - 1] = final_rows[at, : length - 1]
                argmax_ids = torch.zeros(length, dtype=torch.long)
                argmax_ids[prompt - 1 : length - 1] = argmax[row, : length - prompt]
                out.append(SampleFeatures(aux_hidden_states=aux, final_hidden=final, argmax_ids=argmax_ids))
        return out
