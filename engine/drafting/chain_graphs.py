"""A greedy draft chain's later steps: one function, run eagerly or replayed as one CUDA graph.

After the first forward of a proposal (``BatchDrafter``), a greedy chain is K-1 identical
steps: feed each row's head output back with the token it just drafted, one row per sequence,
and take the argmax. ``greedy_chain`` runs them with fixed shapes -- the rows, the number of
steps and the keys attended are set before the first step, positions come from a device
tensor, nothing is read back -- so on a GPU the whole chain is captured once per (rows, steps,
keys) bucket and replayed with one launch (``ChainGraphs``): a small head's step is a hundred
tiny kernels, launch-bound. The CPU runs the same function eagerly, so every test of the
drafter on the CPU runs the body the graphs capture.

Drafts never decide the output (the target verifies them), so a graph that cannot be captured
-- a head that reads values back, say -- costs only speed: the chain then runs eagerly.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

import torch

from engine.cuda_graphs import Capture, cuda_graph_capture, graphs_enabled, power_of_two_at_least
from engine.drafting.draft import to_target
from engine.heads.draft_slots import DraftSlots
from engine.heads.model import Eagle3DraftModel

logger = logging.getLogger(__name__)


def greedy_chain(  # noqa: PLR0917 - the chain's state, each a tensor the graph keeps
    head: Eagle3DraftModel,
    slots: DraftSlots,
    draft_to_target: torch.Tensor,
    tokens: torch.Tensor,
    prenorm: torch.Tensor,
    rows: torch.Tensor,
    positions: torch.Tensor,
    *,
    steps: int,
    key_length: int,
) -> torch.Tensor:
    """``steps`` greedy drafts [B, steps] (target ids) after ``tokens`` [B], each row's last
    draft, and ``prenorm`` [B, H], the head's output that drafted it; ``positions`` [B, 1] is
    the position of that output's entry, ``rows`` [B, 1] each row's slot. Every step attends
    over the first ``key_length`` keys (masked to each row's own past)."""
    drafts: list[torch.Tensor] = []
    for _ in range(steps):
        positions = positions + 1
        prenorm, logits = chain_step(head, slots, tokens, prenorm, rows, positions, key_length)
        tokens = to_target(draft_to_target, logits.float().argmax(-1))
        drafts.append(tokens)
    return torch.stack(drafts, dim=1)


def chain_step(  # noqa: PLR0917 - the chain's state, as greedy_chain keeps it
    head: Eagle3DraftModel,
    slots: DraftSlots,
    tokens: torch.Tensor,
    prenorm: torch.Tensor,
    rows: torch.Tensor,
    positions: torch.Tensor,
    key_length: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    """One step of a chain, greedy or sampled: each row's last draft ``tokens`` [B] and the
    output that drafted it ``prenorm`` [B, H] go in at ``positions`` [B, 1] of slots ``rows``
    [B, 1]; out come the new output [B, H] and its draft-vocabulary logits [B, V]. Choosing
    the next draft is the caller's: greedy chains do it on the device (and in a graph)."""
    step = slots.step(rows, positions, key_length)
    prenorm = head.forward_slots(tokens[:, None], prenorm[:, None], step)[:, 0]
    return prenorm, head.compute_logits(prenorm)


@dataclass
class _Graph:
    replay: Callable[[], None]
    tokens: torch.Tensor  # [R]
    prenorm: torch.Tensor  # [R, H]
    rows: torch.Tensor  # [R, 1]
    positions: torch.Tensor  # [R, 1]
    drafts: torch.Tensor  # [R, steps], rewritten by each replay
    capacity: int  # the pool's capacity when captured: a grown pool is a new tensor


class ChainGraphs:
    """``greedy_chain`` captured once per (rows, steps, keys) bucket and replayed. Padding rows
    draft from the pool's spare slot, which no sequence holds. ``capture`` is a CUDA graph's
    unless given (the tests run the bookkeeping on a CPU with an eager stand-in)."""

    def __init__(
        self,
        head: Eagle3DraftModel,
        slots: DraftSlots,
        draft_to_target: torch.Tensor,
        capture: Capture | None = None,
    ) -> None:
        self.head, self.slots, self.draft_to_target = head, slots, draft_to_target
        self._capture_function = capture or cuda_graph_capture(torch.cuda.graph_pool_handle())
        self._graphs: dict[tuple[int, int, int], _Graph] = {}
        self.captures = 0
        self.broken = False  # set when a capture failed: the chain runs eagerly from then on

    def run(
        self,
        tokens: torch.Tensor,
        prenorm: torch.Tensor,
        rows: torch.Tensor,
        positions: torch.Tensor,
        *,
        steps: int,
        key_length: int,
    ) -> torch.Tensor:
        """``greedy_chain``'s drafts [B, steps] from one replay."""
        batch = tokens.shape[0]
        key = (
            min(self.slots.slots, power_of_two_at_least(batch, 8)),
            steps,
            power_of_two_at_least(key_length, 64),
        )
        self.slots.pool.ensure_positions(key[2])
        graph = self._graphs.get(key)
        if graph is None or graph.capacity != self.slots.pool.capacity:
            graph = self._graphs[key] = self._capture(*key, width=prenorm.shape[-1], dtype=prenorm.dtype)
        graph.tokens[:batch].copy_(tokens)
        graph.prenorm[:batch].copy_(prenorm)
        graph.rows[:batch].copy_(rows)
        graph.positions[:batch].copy_(positions)
        # Rows past the batch draft from the spare slot, wherever an earlier, larger call's were.
        graph.rows[batch:].fill_(self.slots.spare)
        graph.positions[batch:].fill_(0)
        graph.replay()
        return graph.drafts[:batch].clone()

    def _capture(self, rows: int, steps: int, keys: int, *, width: int, dtype: torch.dtype) -> _Graph:
        device = self.draft_to_target.device
        tokens = torch.zeros(rows, dtype=torch.long, device=device)
        prenorm = torch.zeros((rows, width), dtype=dtype, device=device)
        slot_rows = torch.full((rows, 1), self.slots.spare, dtype=torch.long, device=device)
        positions = torch.zeros((rows, 1), dtype=torch.long, device=device)

        def chain() -> torch.Tensor:
            # Until the first replay every row is padding: a warm-up writes the spare slot only.
            return greedy_chain(
                self.head,
                self.slots,
                self.draft_to_target,
                tokens,
                prenorm,
                slot_rows,
                positions,
                steps=steps,
                key_length=keys,
            )

        replay, drafts = self._capture_function(chain)
        self.captures += 1
        logger.info("captured a draft chain: %d rows, %d steps, %d keys", rows, steps, keys)
        return _Graph(replay, tokens, prenorm, slot_rows, positions, drafts, self.slots.pool.capacity)


def chain_graphs_for(
    head: Eagle3DraftModel, slots: DraftSlots, draft_to_target: torch.Tensor
) -> ChainGraphs | None:
    """Graphs for the chain on a CUDA device (unless turned off), else None."""
    if not graphs_enabled(draft_to_target.device):
        return None
    return ChainGraphs(head, slots, draft_to_target)
