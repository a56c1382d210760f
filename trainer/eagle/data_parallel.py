"""What one rank of a data-parallel run shares with the others (torch.distributed).

Every rank holds the whole head and optimizer. Each step's global batch (the batch one
process would train on) is cut into one shard per rank; each rank computes its shard's
loss, already divided by the *global* batch's counts (``ttt_loss``'s ``normalizers``), so
the gradients summed over the ranks are the global batch's gradient and every rank takes
the same optimizer step. Numbers logged are summed the same way, so a run with N ranks
writes the loss curve of one process on the same batches, within float tolerance.

With one rank (``DataParallel.single``) nothing is communicated and nothing is sharded:
the single-process path is the code it always was.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field

import torch
import torch.distributed as dist

from trainer.data.tokenize import TokenizedConversation
from trainer.eagle.batching import Batch
from trainer.eagle.collective_clock import CollectiveClock


@dataclass(frozen=True)
class DataParallel:
    rank: int
    world_size: int
    device: torch.device  # where this rank's collectives run (NCCL needs CUDA tensors)
    # Counts the collectives this rank enters, for rank 0's watch over hung ranks (rank_watch).
    clock: CollectiveClock | None = field(default=None, compare=False, repr=False)

    @classmethod
    def single(cls, device: torch.device | None = None) -> DataParallel:
        return cls(rank=0, world_size=1, device=device or torch.device("cpu"))

    @property
    def enabled(self) -> bool:
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        """Rank 0 writes checkpoints, metrics and the head, and decides when to stop."""
        return self.rank == 0

    def shard(self, batch: Batch, samples: Sequence[TokenizedConversation]) -> Batch | None:
        """This rank's rows of ``batch``, padded to their own longest; None when it has none
        (a batch with fewer rows than ranks)."""
        if not self.enabled:
            return batch
        # Strided, not contiguous: batches are sorted longest first, so every rank gets
        # rows of every length and about the same number of tokens.
        rows = batch.sample_indices[self.rank :: self.world_size]
        if not rows:
            return None
        return Batch(rows, max(len(samples[index].input_ids) for index in rows))

    def sum(self, values: Sequence[float]) -> list[float]:
        """``values`` summed element-wise over the ranks (every rank must call it, in the same order)."""
        if not self.enabled:
            return list(values)
        with self._collective():
            tensor = torch.tensor(list(values), dtype=torch.float64, device=self.device)
            dist.all_reduce(tensor)
            return [float(value) for value in tensor.cpu()]

    def sum_counts(self, counts: Sequence[int]) -> list[int]:
        return [round(value) for value in self.sum([float(count) for count in counts])]

    def from_main(self, values: Sequence[int]) -> list[int]:
        """Rank 0's ``values`` on every rank: its decisions (schedule length, stop) bind all."""
        if not self.enabled:
            return list(values)
        with self._collective():
            tensor = torch.tensor(list(values), dtype=torch.int64, device=self.device)
            dist.broadcast(tensor, src=0)
            return [int(value) for value in tensor.cpu()]

    def sum_gradients(self, module: torch.nn.Module) -> None:
        """Sum the trainable parameters' gradients over the ranks, in one flat all-reduce.

        A rank whose shard was empty (or never reached a parameter) contributes zeros."""
        if not self.enabled:
            return
        parameters = [p for p in module.parameters() if p.requires_grad]
        for parameter in parameters:
            if parameter.grad is None:
                parameter.grad = torch.zeros_like(parameter)
        grads = [parameter.grad for parameter in parameters if parameter.grad is not None]
        # One buffer instead of one collective per tensor: a head has dozens of small ones.
        flat = torch.cat([grad.reshape(-1) for grad in grads])
        with self._collective():
            dist.all_reduce(flat)
        offset = 0
        for grad in grads:
            grad.copy_(flat[offset : offset + grad.numel()].view_as(grad))
            offset += grad.numel()

    def copy_main_weights(self, module: torch.nn.Module) -> None:
        """Every rank starts from rank 0's trainable weights (its random init, or its checkpoint).

        The frozen ones (the target's embeddings) and the draft vocabulary come from the
        same target and samples on every rank, so they are not sent."""
        if not self.enabled:
            return
        with self._collective():
            for parameter in module.parameters():
                if parameter.requires_grad:
                    dist.broadcast(parameter.data, src=0)

    def _collective(self) -> AbstractContextManager[None]:
        return nullcontext() if self.clock is None else self.clock.collective()
