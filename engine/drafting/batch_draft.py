"""Draft chains for a whole serving batch: one head forward per chain step, one pool.

``Drafter.propose`` runs the head once per draft token for one sequence, over a cache of its
own. The serving engine drafts for every sequence of its batch at once instead: each
sequence holds a slot of one key/value pool (``engine.heads.draft_slots``), and

1. one forward over the padded batch ``[B, Q]`` adds every sequence's new entries (the
   target features it has not seen yet) and gives each its first draft;
2. each further chain step feeds every sequence's head output back with the token it just
   drafted, one row per sequence, in one forward.

So a step costs the same number of head forwards and attention calls whatever the batch
size, and no Python runs per sequence between them: every row's draft is chosen and mapped to
the target vocabulary on the device (``engine.drafting.draft_choice``: greedy rows take their
argmax, sampled rows draw at uniforms from their own generators). Every sequence runs the
longest chain asked for and keeps the drafts it asked for (fewer near its ``max_new_tokens``);
a sampled row draws uniforms for only those, so a seeded request draws what it would draw
alone. A P-EAGLE head needs no chain steps: each row also carries its K-1 mask
slots, and the one forward gives every draft.

The chain's entries are never committed: the next proposal writes the accepted positions
over them. Drafts equal ``Drafter.propose``'s up to the last bits of the attention (another
kernel shape), which can change a near-tie; the target's verification keeps the output exact
either way.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import torch

from engine.cuda_graphs import GRAPHED_WIDTH
from engine.drafting.draft import Proposal, draft_to_target_table, in_head_dtype, to_target
from engine.drafting.draft_choice import DraftChoice, choose, draft_choice, on_target_vocabulary
from engine.drafting.proposal_graphs import Drafts, FirstInputs, chain_proposal, proposal_graphs_for
from engine.heads.draft_slots import DraftSlots
from engine.heads.model import Eagle3DraftModel
from engine.heads.peagle import PEagleDraftModel
from engine.sampling import SamplingParams
from engine.transfers import int_tables_to

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class DraftRequest:
    """What one sequence asks of the batch: as ``Drafter.propose``'s arguments, with its slot."""

    slot: int
    aux_hidden_states: torch.Tensor  # [n, F] features of the slot's next n positions
    next_token_ids: list[int]  # the n tokens one position later, on the host (one copy for all)
    num_tokens: int
    params: SamplingParams
    generator: torch.Generator | None


@dataclass(frozen=True, slots=True)
class _Layout:
    """Where each sequence's entries go in the padded first forward (host side)."""

    width: int  # Q: the widest row
    starts: list[int]  # committed entries of each slot before this proposal
    new: list[int]  # entries built from target features, per row
    extra: list[int]  # P-EAGLE mask slots after them, per row
    longest_chain: int  # the most drafts any row asks for

    @property
    def committed(self) -> list[int]:
        return [start + new for start, new in zip(self.starts, self.new, strict=True)]


class BatchDrafter:
    """Runs ``head`` for up to ``max_sequences`` sequences, each in a slot of one pool."""

    def __init__(self, head: Eagle3DraftModel, target_vocab_size: int, max_sequences: int) -> None:
        self.head = head
        self.target_vocab_size = target_vocab_size
        self.draft_to_target = draft_to_target_table(head)
        self.slots = DraftSlots(max_sequences, self.draft_to_target.device)
        self._graphs = proposal_graphs_for(head, self.slots, self.draft_to_target)

    def propose(self, requests: Sequence[DraftRequest]) -> list[Proposal]:
        """Add each request's entries to its slot, then draft its ``num_tokens`` tokens."""
        if not requests:
            return []
        if any(request.num_tokens < 1 for request in requests):
            raise ValueError("every request must ask for at least 1 draft token")
        if len({request.slot for request in requests}) < len(requests):
            raise ValueError("two requests share a draft slot")
        parallel = isinstance(self.head, PEagleDraftModel)
        layout = self._layout(requests, parallel)
        choice = draft_choice(
            [request.params for request in requests],
            [request.generator for request in requests],
            [request.num_tokens for request in requests],
            steps=layout.longest_chain,
            device=self.draft_to_target.device,
        )
        drafts = (self._parallel if parallel else self._chain)(requests, layout, choice)
        for request, length in zip(requests, layout.committed, strict=True):
            self.slots.commit(request.slot, length)
        sampled = self._sampled_probabilities(requests, drafts.probs)
        return [
            Proposal(token_ids=drafts.tokens[row, : request.num_tokens], probs=sampled.get(row))
            for row, request in enumerate(requests)
        ]

    def _sampled_probabilities(
        self, requests: Sequence[DraftRequest], probs: torch.Tensor | None
    ) -> dict[int, torch.Tensor]:
        """Each sampling row's draft distributions on the target vocabulary [num_tokens, V],
        by row. Only those rows are mapped: a greedy row's distributions are never read, and
        mapping all of a mixed batch of 8 rows wrote ~6 MB a step (49k-token target, K=4)."""
        rows = [row for row, request in enumerate(requests) if not request.params.greedy]
        if probs is None or not rows:
            return {}
        if len(rows) < len(requests):
            (index,) = int_tables_to(probs.device, rows)
            probs = probs.index_select(0, index)
        mapped = on_target_vocabulary(probs, self.draft_to_target, self.target_vocab_size)
        return {row: mapped[at, : requests[row].num_tokens] for at, row in enumerate(rows)}

    def _chain(self, requests: Sequence[DraftRequest], layout: _Layout, choice: DraftChoice | None) -> Drafts:
        """Every row's drafts (``chain_proposal``): one graph replay on a GPU, the same function
        eagerly elsewhere, for a joining prompt's entries, or when capture failed."""
        steps = layout.longest_chain - 1
        key_length = max(layout.committed) + steps
        # A proposal of a prompt's worth of new entries (a sequence joining) runs eagerly.
        if self._graphs is not None and not self._graphs.broken and layout.width <= GRAPHED_WIDTH:
            try:
                keys = self._graphs.keys_for(key_length)
                return self._graphs.run(self._first_inputs(requests, layout), choice, steps=steps, keys=keys)
            except RuntimeError:
                logger.exception("capturing a proposal failed; drafting eagerly from now on")
                self._graphs.broken = True
        inputs = self._first_inputs(requests, layout)
        return chain_proposal(
            self.head, self.slots, self.draft_to_target, inputs, choice, steps=steps, key_length=key_length
        )

    def _parallel(
        self, requests: Sequence[DraftRequest], layout: _Layout, choice: DraftChoice | None
    ) -> Drafts:
        """A P-EAGLE head's drafts, all from one forward: each row's newest entry and the mask
        slots after it give its K distributions."""
        if not isinstance(self.head, PEagleDraftModel):
            raise TypeError("parallel drafting needs a P-EAGLE head")
        inputs = self._first_inputs(requests, layout)
        hidden = self.head.fuse(inputs.features)  # [B, Q, H]
        ids = inputs.ids
        if any(layout.extra):
            cells = torch.arange(layout.width, device=hidden.device)[None, :]
            newest = inputs.last[:, None]
            masked = (cells > newest) & (cells <= newest + inputs.extra[:, None])
            mask_ids, mask_hidden = self.head.mask_inputs(1, dtype=hidden.dtype)
            hidden = torch.where(masked[..., None], mask_hidden[0], hidden)
            ids = torch.where(masked, mask_ids[0], inputs.ids)
        key_length = max(
            start + new + extra
            for start, new, extra in zip(layout.starts, layout.new, layout.extra, strict=True)
        )
        out = self.head.forward_slots(ids, hidden, self.slots.step(inputs.rows, inputs.positions, key_length))
        batch = torch.arange(len(requests), device=out.device)
        offsets = torch.arange(layout.longest_chain, device=out.device)
        columns = inputs.last[:, None] + torch.minimum(offsets[None, :], inputs.extra[:, None])
        logits = self.head.compute_logits(out[batch[:, None], columns])  # [B, K, V]
        tokens: list[torch.Tensor] = []
        distributions: list[torch.Tensor | None] = []
        for step in range(layout.longest_chain):
            draft, probs = choose(logits[:, step], choice, step)
            tokens.append(to_target(self.draft_to_target, draft))
            distributions.append(probs)
        return Drafts.stacked(tokens, distributions)

    def _layout(self, requests: Sequence[DraftRequest], parallel: bool) -> _Layout:
        starts = [self.slots.length(request.slot) for request in requests]
        new = [len(request.next_token_ids) for request in requests]
        extra = [request.num_tokens - 1 if parallel else 0 for request in requests]
        longest_chain = max(request.num_tokens for request in requests)
        layout = _Layout(
            width=max(n + e for n, e in zip(new, extra, strict=True)),
            starts=starts,
            new=new,
            extra=extra,
            longest_chain=longest_chain,
        )
        # The chain writes past the committed entries; the pool grows before any write.
        furthest = max(
            [s + n + e for s, n, e in zip(starts, new, extra, strict=True)]
            + [max(layout.committed) + longest_chain - 1]
        )
        self.slots.pool.ensure_positions(furthest)
        return layout

    def _first_inputs(self, requests: Sequence[DraftRequest], layout: _Layout) -> FirstInputs:
        """The padded batch of the first forward: every row's new entries (and, after them, the
        cells of its P-EAGLE mask slots, whose inputs the caller puts in)."""
        batch, width = len(requests), layout.width
        # The layout on the host, copied to the device in one transfer with the new token ids:
        # the row and column of each feature entry, the position of every cell of the padded
        # batch (the pool's scratch for padding), each row's slot, newest entry and mask count.
        entry_rows: list[int] = []
        entry_columns: list[int] = []
        grid = [self.slots.pool.scratch] * (batch * width)
        for row, (start, new, masks) in enumerate(zip(layout.starts, layout.new, layout.extra, strict=True)):
            entry_rows += [row] * new
            entry_columns += range(new)
            for column in range(new + masks):
                grid[row * width + column] = start + column
        slots = [request.slot for request in requests]
        newest = [new - 1 for new in layout.new]
        new_ids = [token for request in requests for token in request.next_token_ids]
        (new_ids_on_device, rows_of_entries, columns_of_entries, cells, rows, last, mask_counts) = (
            int_tables_to(
                self.slots.device, new_ids, entry_rows, entry_columns, grid, slots, newest, layout.extra
            )
        )
        entries = in_head_dtype(self.head, torch.cat([request.aux_hidden_states for request in requests]))
        features = entries.new_zeros(batch, width, entries.shape[-1])
        features[rows_of_entries, columns_of_entries] = entries
        ids = torch.zeros(batch, width, dtype=torch.long, device=entries.device)
        ids[rows_of_entries, columns_of_entries] = new_ids_on_device
        return FirstInputs(ids, features, cells.view(batch, width), rows.view(batch, 1), last, mask_counts)


class SlotDrafter:
    """``Drafter``'s interface for one sequence, on a one-slot ``BatchDrafter``: the slot-pool
    decoder's drafter (batch-1 decoding on a GPU), so its chain writes in place and keeps the
    same operators every step, as the serving engine's does."""

    def __init__(self, head: Eagle3DraftModel, target_vocab_size: int) -> None:
        self._batch = BatchDrafter(head, target_vocab_size, max_sequences=1)
        self._slot: int | None = None

    @contextmanager
    def session(self) -> Iterator[SlotDrafter]:
        self._slot = self._batch.slots.acquire()
        try:
            yield self
        finally:
            self._batch.slots.release(self._slot)
            self._slot = None

    @property
    def length(self) -> int:
        """Entries built from target features."""
        return self._batch.slots.length(self._require_slot())

    def propose(
        self,
        aux_hidden_states: torch.Tensor,
        next_token_ids: Sequence[int],
        *,
        num_tokens: int,
        params: SamplingParams,
        generator: torch.Generator | None,
    ) -> Proposal:
        """As ``Drafter.propose``, with the next token ids on the host."""
        request = DraftRequest(
            self._require_slot(), aux_hidden_states, list(next_token_ids), num_tokens, params, generator
        )
        return self._batch.propose([request])[0]

    def _require_slot(self) -> int:
        if self._slot is None:
            raise RuntimeError("SlotDrafter used outside session()")
        return self._slot
