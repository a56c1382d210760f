"""Draft chains for many sequences at once: one head forward per chain step for the batch.

``Drafter.propose`` runs the head once per draft token for one sequence. In the serving
engine that is ``K`` small forwards per sequence per step, and the head's per-call cost
(a dozen kernels over one row) multiplied by the batch size. Here every sequence's new
entries go through the head in one packed forward (``Eagle3DraftModel.forward_packed``:
each sequence attends to its own draft cache only), then each chain step drafts the next
token of every sequence still drafting in one forward over one row per sequence.

A P-EAGLE head needs no chain steps: each sequence's row also carries its K-1 mask
slots, and that one packed forward gives every draft of every sequence.

Each sequence gets the tokens and distributions ``Drafter.propose`` would give it alone,
and its cache ends at the same length: entries built from target features stay, the
chain's own are dropped.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from engine.heads.model import Eagle3DraftModel
from engine.heads.peagle import PEagleDraftModel
from speculative.draft import Drafter, Proposal
from speculative.sampling import SamplingParams


@dataclass(frozen=True, slots=True)
class DraftRequest:
    """What one sequence asks of the batch: as ``Drafter.propose``'s arguments."""

    drafter: Drafter
    aux_hidden_states: torch.Tensor  # [n, 3H] features of the drafter's next n positions
    next_token_ids: torch.Tensor  # [n] the tokens one position later
    num_tokens: int
    params: SamplingParams
    generator: torch.Generator | None


def propose_batch(head: Eagle3DraftModel, requests: Sequence[DraftRequest]) -> list[Proposal]:
    """A draft chain for every request, batching the head's forwards across them."""
    if not requests:
        return []
    if any(request.drafter.head is not head for request in requests):
        raise ValueError("every request's drafter must run the head given")
    if any(request.num_tokens < 1 for request in requests):
        raise ValueError("every request must ask for at least 1 draft token")
    if isinstance(head, PEagleDraftModel):
        return _propose_parallel_batch(head, requests)
    caches = [request.drafter.cache for request in requests]
    lengths = [int(request.next_token_ids.shape[0]) for request in requests]
    committed = [cache.length + length for cache, length in zip(caches, lengths, strict=True)]
    device = requests[0].next_token_ids.device
    positions = torch.cat(
        [torch.arange(cache.length, end, device=device) for cache, end in zip(caches, committed, strict=True)]
    )
    hidden = head.fuse(torch.cat([request.aux_hidden_states for request in requests]).unsqueeze(0))
    ids = torch.cat([request.next_token_ids for request in requests]).unsqueeze(0)
    out = head.forward_packed(ids, hidden, positions.unsqueeze(0), caches, lengths)
    last_rows = torch.tensor(lengths, device=device).cumsum(0) - 1
    prenorm = out[0, last_rows]  # [B, H]: each sequence's newest entry

    drafted: list[list[torch.Tensor]] = [[] for _ in requests]
    probs: list[list[torch.Tensor]] = [[] for _ in requests]
    live = list(range(len(requests)))  # sequences still drafting, in the rows of ``prenorm``
    step = 0
    while True:
        logits = head.compute_logits(prenorm)
        for row, index in enumerate(live):
            request = requests[index]
            token = request.drafter.choose(logits[row], request.params, request.generator, probs[index])
            drafted[index].append(token)
        keep = [row for row, index in enumerate(live) if len(drafted[index]) < requests[index].num_tokens]
        if not keep:
            break
        live = [live[row] for row in keep]
        # The chain feeds each head output back with the token it just drafted.
        tokens = torch.stack([drafted[index][-1] for index in live]).unsqueeze(0)
        chain_positions = torch.tensor([[committed[index] + step for index in live]], device=device)
        live_caches = [caches[index] for index in live]
        prenorm = head.forward_packed(
            tokens, prenorm[keep].unsqueeze(0), chain_positions, live_caches, [1] * len(live)
        )[0]
        step += 1
    for cache, length in zip(caches, committed, strict=True):
        cache.crop(length)
    return [
        Proposal(token_ids=torch.stack(tokens), probs=torch.stack(rows) if rows else None)
        for tokens, rows in zip(drafted, probs, strict=True)
    ]


def _propose_parallel_batch(head: PEagleDraftModel, requests: Sequence[DraftRequest]) -> list[Proposal]:
    """P-EAGLE: every sequence's new entries and its K-1 mask slots in one packed forward."""
    caches = [request.drafter.cache for request in requests]
    new = [int(request.next_token_ids.shape[0]) for request in requests]
    slots = [request.num_tokens - 1 for request in requests]
    device = requests[0].next_token_ids.device
    ids: list[torch.Tensor] = []
    hidden: list[torch.Tensor] = []
    positions: list[torch.Tensor] = []
    for request, cache, count, masks in zip(requests, caches, new, slots, strict=True):
        mask_ids, mask_hidden = head.mask_inputs(masks, dtype=request.aux_hidden_states.dtype)
        ids += [request.next_token_ids, mask_ids.to(device)]
        hidden += [head.fuse(request.aux_hidden_states), mask_hidden]
        positions.append(torch.arange(cache.length, cache.length + count + masks, device=device))
    committed = [cache.length + count for cache, count in zip(caches, new, strict=True)]
    lengths = [count + masks for count, masks in zip(new, slots, strict=True)]
    out = head.forward_packed(
        torch.cat(ids).unsqueeze(0),
        torch.cat(hidden).unsqueeze(0),
        torch.cat(positions).unsqueeze(0),
        caches,
        lengths,
    )[0]
    # Each sequence's drafts come from its last real entry and its mask slots.
    ends = torch.tensor(lengths, device=device).cumsum(0).tolist()
    rows = torch.cat(
        [torch.arange(end - masks - 1, end, device=device) for end, masks in zip(ends, slots, strict=True)]
    )
    logits = head.compute_logits(out[rows])
    for cache, length in zip(caches, committed, strict=True):
        cache.crop(length)
    proposals: list[Proposal] = []
    start = 0
    for request in requests:
        probs: list[torch.Tensor] = []
        tokens = [
            request.drafter.choose(row, request.params, request.generator, probs)
            for row in logits[start : start + request.num_tokens]
        ]
        start += request.num_tokens
        proposals.append(Proposal(token_ids=torch.stack(tokens), probs=torch.stack(probs) if probs else None))
    return proposals
