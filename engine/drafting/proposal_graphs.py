"""A greedy proposal -- the head's first forward over every row's new entries, then the chain
after it -- as one function, run eagerly or replayed as one CUDA graph.

A greedy proposal (``BatchDrafter``) is one padded forward ``[B, Q]`` that adds each row's
new entries and drafts its first token, then K-1 identical steps that feed each row's head
output back with the token it just drafted and take the argmax. ``greedy_proposal`` runs it
all with fixed shapes -- the rows, the width, the number of steps and the keys attended are
set before it starts, positions and each row's newest entry are device tensors, nothing is
read back -- so on a GPU the whole proposal is captured once per (rows, width, steps, keys)
bucket and replayed with one launch (``ProposalGraphs``): a small head's forward is a hundred
tiny kernels, launch-bound, and a proposal is K of them. The CPU runs the same function
eagerly, so every test of the drafter on the CPU runs the body the graphs capture.

Drafts never decide the output (the target verifies them), so a graph that cannot be captured
-- a head that reads values back, say -- costs only speed: the proposal then runs eagerly.
Sampled chains and P-EAGLE's mask slots run eagerly (``chain_step``), outside any graph.
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


@dataclass(frozen=True, slots=True)
class FirstInputs:
    """The first forward's padded batch ``[B, Q]`` on the device.

    ``features`` [B, Q, F]: the target features of each row's new entries, in the head's
    dtype, zero elsewhere. ``positions`` [B, Q]: where each entry goes (the pool's scratch
    position for padding). ``rows`` [B, 1]: each row's slot. ``last`` [B]: the column of each
    row's newest entry built from a feature. ``extra`` [B]: P-EAGLE mask slots after it."""

    ids: torch.Tensor
    features: torch.Tensor
    positions: torch.Tensor
    rows: torch.Tensor
    last: torch.Tensor
    extra: torch.Tensor


def greedy_proposal(
    head: Eagle3DraftModel,
    slots: DraftSlots,
    draft_to_target: torch.Tensor,
    inputs: FirstInputs,
    *,
    steps: int,
    key_length: int,
) -> torch.Tensor:
    """1 + ``steps`` greedy drafts [B, 1 + steps] (target ids): the first forward over
    ``inputs``, then the chain after each row's newest entry. Every forward attends over the
    first ``key_length`` keys (masked to each row's own past)."""
    ids, positions, rows, last = inputs.ids, inputs.positions, inputs.rows, inputs.last
    out = head.forward_slots(ids, head.fuse(inputs.features), slots.step(rows, positions, key_length))
    batch = torch.arange(ids.shape[0], device=ids.device)
    prenorm = out[batch, last]  # [B, H]
    first = to_target(draft_to_target, head.compute_logits(prenorm).float().argmax(-1))
    if not steps:
        return first[:, None]
    chain_positions = positions[batch, last][:, None]
    chain = greedy_chain(
        head,
        slots,
        draft_to_target,
        first,
        prenorm,
        rows,
        chain_positions,
        steps=steps,
        key_length=key_length,
    )
    return torch.cat([first[:, None], chain], dim=1)


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
    inputs: FirstInputs  # static buffers [R, ...]; ``extra`` unused
    drafts: torch.Tensor  # [R, 1 + steps], rewritten by each replay
    capacity: int  # the pool's capacity when captured: a grown pool is a new tensor


class ProposalGraphs:
    """``greedy_proposal`` captured once per (rows, width, steps, keys) bucket and replayed.
    Padding rows draft from the pool's spare slot, which no sequence holds. ``capture`` is a
    CUDA graph's unless given (the tests run the bookkeeping on a CPU with an eager stand-in)."""

    def __init__(
        self,
        head: Eagle3DraftModel,
        slots: DraftSlots,
        draft_to_target: torch.Tensor,
        capture: Capture | None = None,
    ) -> None:
        self.head, self.slots, self.draft_to_target = head, slots, draft_to_target
        self._capture_function = capture or cuda_graph_capture(torch.cuda.graph_pool_handle())
        self._graphs: dict[tuple[int, int, int, int], _Graph] = {}
        self.captures = 0
        self.broken = False  # set when a capture failed: proposals run eagerly from then on

    def keys_for(self, key_length: int) -> int:
        """The keys a replay attends to for ``key_length``; the pool is grown to hold them, so
        call this before laying out the first forward (its padding goes to the new scratch)."""
        keys = power_of_two_at_least(key_length, 64)
        self.slots.pool.ensure_positions(keys)
        return keys

    def run(self, inputs: FirstInputs, *, steps: int, keys: int) -> torch.Tensor:
        """``greedy_proposal``'s drafts [B, 1 + steps] from one replay; ``keys`` from ``keys_for``."""
        batch, width = inputs.ids.shape
        key = (min(self.slots.slots, power_of_two_at_least(batch, 8)), width, steps, keys)
        graph = self._graphs.get(key)
        if graph is None or graph.capacity != self.slots.pool.capacity:
            graph = self._graphs[key] = self._capture(*key, features=inputs.features)
        static = graph.inputs
        for kept, given in (
            (static.ids, inputs.ids),
            (static.features, inputs.features),
            (static.positions, inputs.positions),
            (static.rows, inputs.rows),
            (static.last, inputs.last),
        ):
            kept[:batch].copy_(given)
        # Rows past the batch draft from the spare slot, wherever an earlier, larger call's were.
        static.rows[batch:].fill_(self.slots.spare)
        static.positions[batch:].copy_(torch.arange(width, device=static.positions.device))
        static.last[batch:].fill_(0)
        graph.replay()
        return graph.drafts[:batch].clone()

    def _capture(self, rows: int, width: int, steps: int, keys: int, *, features: torch.Tensor) -> _Graph:
        device = self.draft_to_target.device
        # Until the first replay every row is padding: a warm-up writes the spare slot only.
        inputs = FirstInputs(
            ids=torch.zeros((rows, width), dtype=torch.long, device=device),
            features=features.new_zeros((rows, width, features.shape[-1])),
            positions=torch.arange(width, device=device).repeat(rows, 1),
            rows=torch.full((rows, 1), self.slots.spare, dtype=torch.long, device=device),
            last=torch.zeros(rows, dtype=torch.long, device=device),
            extra=torch.zeros(rows, dtype=torch.long, device=device),
        )

        def proposal() -> torch.Tensor:
            return greedy_proposal(
                self.head, self.slots, self.draft_to_target, inputs, steps=steps, key_length=keys
            )

        replay, drafts = self._capture_function(proposal)
        self.captures += 1
        logger.info(
            "captured a greedy proposal: %d rows of %d, %d chain steps, %d keys", rows, width, steps, keys
        )
        return _Graph(replay, inputs, drafts, self.slots.pool.capacity)


def proposal_graphs_for(
    head: Eagle3DraftModel, slots: DraftSlots, draft_to_target: torch.Tensor
) -> ProposalGraphs | None:
    """Graphs for greedy proposals on a CUDA device (unless turned off), else None."""
    if not graphs_enabled(draft_to_target.device):
        return None
    return ProposalGraphs(head, slots, draft_to_target)
