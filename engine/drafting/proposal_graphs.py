"""A proposal -- the head's first forward over every row's new entries, then the chain after
it -- as one function, run eagerly or replayed as one CUDA graph.

A proposal (``BatchDrafter``) is one padded forward ``[B, Q]`` that adds each row's new
entries and drafts its first token, then K-1 identical steps that feed each row's head output
back with the token it just drafted. ``chain_proposal`` runs it all with fixed shapes -- the
rows, the width, the number of steps and the keys attended are set before it starts,
positions and each row's newest entry are device tensors, nothing is read back -- so on a GPU
the whole proposal is captured once per (rows, width, steps, keys, sampled) bucket and
replayed with one launch (``ProposalGraphs``): a small head's forward is a hundred tiny
kernels, launch-bound, and a proposal is K of them. Greedy rows take the argmax; sampled rows
draw at uniforms drawn from their own generators before the replay
(``engine.drafting.draft_choice``), so a sampled proposal is captured too, with each row's
temperature, top-p and uniforms among the graph's inputs. The CPU runs the same function
eagerly, so every test of the drafter on the CPU runs the body the graphs capture.

Drafts never decide the output (the target verifies them), so a graph that cannot be captured
-- a head that reads values back, say -- costs only speed: the proposal then runs eagerly.
P-EAGLE's mask slots run eagerly, outside any graph.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

import torch

from engine.cuda_graphs import (
    Capture,
    counted,
    cuda_graph_capture,
    graphs_enabled,
    power_of_two_at_least,
)
from engine.drafting.draft import to_target
from engine.drafting.draft_choice import DraftChoice, choose
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


@dataclass(frozen=True, slots=True)
class Drafts:
    """A proposal's drafts: ``tokens`` [B, K] (target ids) and, when any row samples, the
    distributions they were drawn from ``probs`` [B, K, V_draft]."""

    tokens: torch.Tensor
    probs: torch.Tensor | None

    @staticmethod
    def stacked(tokens: list[torch.Tensor], distributions: list[torch.Tensor | None]) -> Drafts:
        """Drafts from each step's tokens [B] and distributions [B, V] (None when greedy)."""
        drawn = [probs for probs in distributions if probs is not None]
        return Drafts(torch.stack(tokens, dim=1), torch.stack(drawn, dim=1) if drawn else None)


def chain_proposal(
    head: Eagle3DraftModel,
    slots: DraftSlots,
    draft_to_target: torch.Tensor,
    inputs: FirstInputs,
    choice: DraftChoice | None,
    *,
    steps: int,
    key_length: int,
) -> Drafts:
    """1 + ``steps`` drafts of every row, chosen as ``choice`` says (None: greedy): the first
    forward over ``inputs``, then the chain after each row's newest entry, each step feeding
    the head's output back with the token it just drafted. Every forward attends over the first
    ``key_length`` keys (masked to each row's own past)."""
    ids, positions, rows, last = inputs.ids, inputs.positions, inputs.rows, inputs.last
    out = head.forward_slots(ids, head.fuse(inputs.features), slots.step(rows, positions, key_length))
    batch = torch.arange(ids.shape[0], device=ids.device)
    prenorm = out[batch, last]  # [B, H]
    draft, probs = choose(head.compute_logits(prenorm), choice, 0)
    tokens, distributions = [to_target(draft_to_target, draft)], [probs]
    chain_positions = positions[batch, last][:, None]
    for step in range(1, steps + 1):
        chain_positions = chain_positions + 1
        prenorm, logits = chain_step(head, slots, tokens[-1], prenorm, rows, chain_positions, key_length)
        draft, probs = choose(logits, choice, step)
        tokens.append(to_target(draft_to_target, draft))
        distributions.append(probs)
    return Drafts.stacked(tokens, distributions)


def chain_step(  # noqa: PLR0917 - the chain's state, as chain_proposal keeps it
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
    choice: DraftChoice | None  # static buffers [R, ...] of a sampled bucket
    drafts: Drafts  # [R, 1 + steps, ...], rewritten by each replay
    capacity: int  # the pool's capacity when captured: a grown pool is a new tensor


class ProposalGraphs:
    """``chain_proposal`` captured once per (rows, width, steps, keys, sampled) bucket and
    replayed. Padding rows draft greedily from the pool's spare slot, which no sequence holds.
    ``capture`` is a CUDA graph's unless given (the tests run the bookkeeping on a CPU with an
    eager stand-in)."""

    def __init__(
        self,
        head: Eagle3DraftModel,
        slots: DraftSlots,
        draft_to_target: torch.Tensor,
        capture: Capture | None = None,
    ) -> None:
        self.head, self.slots, self.draft_to_target = head, slots, draft_to_target
        self._capture_function = counted(
            capture or cuda_graph_capture(torch.cuda.graph_pool_handle()), "draft"
        )
        self._graphs: dict[tuple[int, int, int, int, bool], _Graph] = {}
        self.captures = 0
        self.broken = False  # set when a capture failed: proposals run eagerly from then on

    def keys_for(self, key_length: int) -> int:
        """The keys a replay attends to for ``key_length``; the pool is grown to hold them, so
        call this before laying out the first forward (its padding goes to the new scratch)."""
        keys = power_of_two_at_least(key_length, 64)
        self.slots.pool.ensure_positions(keys)
        return keys

    def run(self, inputs: FirstInputs, choice: DraftChoice | None, *, steps: int, keys: int) -> Drafts:
        """``chain_proposal``'s drafts from one replay; ``keys`` from ``keys_for``."""
        batch, width = inputs.ids.shape
        rows = min(self.slots.slots, power_of_two_at_least(batch, 8))
        key = (rows, width, steps, keys, choice is not None)
        graph = self._graphs.get(key)
        if graph is None or graph.capacity != self.slots.pool.capacity:
            graph = self._graphs[key] = self._capture(key, inputs.features, choice)
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
        if graph.choice is not None and choice is not None:
            graph.choice.temperature[:batch].copy_(choice.temperature)
            graph.choice.top_p[:batch].copy_(choice.top_p)
            graph.choice.uniforms[:batch].copy_(choice.uniforms)
            graph.choice.temperature[batch:].fill_(0.0)  # padding rows take the argmax
        graph.replay()
        probs = graph.drafts.probs
        return Drafts(graph.drafts.tokens[:batch].clone(), None if probs is None else probs[:batch].clone())

    def _capture(
        self, key: tuple[int, int, int, int, bool], features: torch.Tensor, choice: DraftChoice | None
    ) -> _Graph:
        rows, width, steps, keys, _ = key  # the last: whether ``choice`` is given
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
        static_choice = None
        if choice is not None:
            static_choice = DraftChoice(
                temperature=choice.temperature.new_zeros(rows),
                top_p=choice.top_p.new_ones(rows),
                uniforms=choice.uniforms.new_zeros((rows, choice.uniforms.shape[1])),
            )

        def proposal() -> Drafts:
            return chain_proposal(
                self.head,
                self.slots,
                self.draft_to_target,
                inputs,
                static_choice,
                steps=steps,
                key_length=keys,
            )

        replay, drafts = self._capture_function(proposal)
        self.captures += 1
        logger.info(
            "captured a %s proposal: %d rows of %d, %d chain steps, %d keys",
            "greedy" if static_choice is None else "sampled",
            rows,
            width,
            steps,
            keys,
        )
        return _Graph(replay, inputs, static_choice, drafts, self.slots.pool.capacity)


def proposal_graphs_for(
    head: Eagle3DraftModel, slots: DraftSlots, draft_to_target: torch.Tensor
) -> ProposalGraphs | None:
    """Graphs for proposals on a CUDA device (unless turned off), else None."""
    if not graphs_enabled(draft_to_target.device):
        return None
    return ProposalGraphs(head, slots, draft_to_target)
