"""The EAGLE-3 head proposing a chain of draft tokens from its own KV cache (a P-EAGLE
head: all of them from one forward).

Cache layout: entry ``p`` holds (fused target feature of token p, embedding of token
p+1) at position p and predicts token p+2. Only entries built from real target features
stay in the cache between rounds; the chain's own entries are dropped after each
proposal, and the accepted positions come back next round with the target's features
(as vLLM's EAGLE-3 proposer does).

A P-EAGLE head (``PEagleDraftModel``) drafts without a chain: the forward that adds the
new entries also carries K-1 mask slots after them, and the last entry plus the mask
slots give the K draft distributions at once. The mask slots are dropped like the chain's
entries.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import torch

from engine.drafting.draft_choice import DraftChoice, choose, draft_choice, on_target_vocabulary
from engine.heads.model import DraftKVCache, Eagle3DraftModel
from engine.heads.peagle import PEagleDraftModel
from engine.sampling import SamplingParams


@dataclass(frozen=True, slots=True)
class Proposal:
    token_ids: torch.Tensor  # [K] target-vocabulary ids
    probs: torch.Tensor | None  # [K, V_target] draft distributions (sampling only), 0 outside the draft vocab


class Drafter:
    """Runs ``head`` for one sequence (batch 1)."""

    def __init__(self, head: Eagle3DraftModel, target_vocab_size: int) -> None:
        self.head = head
        self.target_vocab_size = target_vocab_size
        # Target id of every draft id, precomputed once: target_id = draft_id + d2t[draft_id].
        self.draft_to_target = draft_to_target_table(head)
        self._cache: DraftKVCache | None = None

    @contextmanager
    def session(self) -> Iterator[Drafter]:
        self._cache = DraftKVCache()
        try:
            yield self
        finally:
            self._cache = None

    @property
    def cache(self) -> DraftKVCache:
        return self._require_cache()

    @property
    def length(self) -> int:
        """Entries built from target features."""
        return self._require_cache().length

    def propose(
        self,
        aux_hidden_states: torch.Tensor,
        next_token_ids: torch.Tensor | Sequence[int],
        *,
        num_tokens: int,
        params: SamplingParams,
        generator: torch.Generator | None,
    ) -> Proposal:
        """Add entries for the new target features, then draft ``num_tokens`` tokens.

        ``aux_hidden_states`` [n, 3H] are the features of positions ``length ..
        length+n-1``; ``next_token_ids`` [n] the tokens one position later (the last one
        is the token the target has not processed yet), on the device or the host.
        """
        if num_tokens < 1:
            raise ValueError(f"num_tokens must be at least 1, got {num_tokens}")
        if not isinstance(next_token_ids, torch.Tensor):
            next_token_ids = torch.tensor(next_token_ids, dtype=torch.long, device=aux_hidden_states.device)
        if isinstance(self.head, PEagleDraftModel):
            return self._propose_parallel(
                self.head,
                aux_hidden_states,
                next_token_ids,
                num_tokens=num_tokens,
                params=params,
                generator=generator,
            )
        cache = self._require_cache()
        choice = self.choice(params, generator, num_tokens)
        prenorm, committed = self.commit(aux_hidden_states, next_token_ids)
        tokens: list[torch.Tensor] = []
        token_probs: list[torch.Tensor] = []
        for step in range(num_tokens):
            logits = self.head.compute_logits(prenorm)[0, 0]
            token = self.choose(logits, choice, step, token_probs)
            tokens.append(token)
            if step + 1 < num_tokens:
                # The chain feeds the head's own output back with the token it just drafted.
                position = torch.tensor([[committed + step]], device=next_token_ids.device)
                prenorm = self.head(token.view(1, 1), prenorm, position, cache)
        cache.crop(committed)
        return Proposal(
            token_ids=torch.stack(tokens),
            probs=torch.stack(token_probs) if token_probs else None,
        )

    def _propose_parallel(
        self,
        head: PEagleDraftModel,
        aux_hidden_states: torch.Tensor,
        next_token_ids: torch.Tensor,
        *,
        num_tokens: int,
        params: SamplingParams,
        generator: torch.Generator | None,
    ) -> Proposal:
        """P-EAGLE: the new entries and ``num_tokens - 1`` mask slots in one head forward."""
        cache = self._require_cache()
        choice = self.choice(params, generator, num_tokens)
        new = int(next_token_ids.shape[0])
        committed = cache.length + new
        features = in_head_dtype(head, aux_hidden_states)
        mask_ids, mask_hidden = head.mask_inputs(num_tokens - 1, dtype=features.dtype)
        ids = torch.cat([next_token_ids, mask_ids.to(next_token_ids.device)]).unsqueeze(0)
        hidden = torch.cat([head.fuse(features), mask_hidden]).unsqueeze(0)
        positions = torch.arange(cache.length, committed + num_tokens - 1, device=next_token_ids.device)
        prenorm = head(ids, hidden, positions.unsqueeze(0), cache)[0, new - 1 :]
        cache.crop(committed)
        logits = head.compute_logits(prenorm)
        token_probs: list[torch.Tensor] = []
        tokens = [self.choose(row, choice, step, token_probs) for step, row in enumerate(logits)]
        return Proposal(
            token_ids=torch.stack(tokens),
            probs=torch.stack(token_probs) if token_probs else None,
        )

    def commit(
        self, aux_hidden_states: torch.Tensor, next_token_ids: torch.Tensor
    ) -> tuple[torch.Tensor, int]:
        """Cache entries for the new target features: (the last entry's output [1, 1, H],
        the number of committed entries). Draft entries added after this are dropped with
        ``cache.crop(committed)`` once the proposal is made."""
        cache = self._require_cache()
        committed = cache.length + next_token_ids.shape[0]
        positions = torch.arange(cache.length, committed, device=next_token_ids.device).unsqueeze(0)
        hidden = self.head.fuse(in_head_dtype(self.head, aux_hidden_states).unsqueeze(0))
        prenorm = self.head(next_token_ids.unsqueeze(0), hidden, positions, cache)[:, -1:]
        return prenorm, committed

    def choice(
        self, params: SamplingParams, generator: torch.Generator | None, num_tokens: int
    ) -> DraftChoice | None:
        """How this proposal chooses its ``num_tokens`` drafts; a sampled one draws its uniforms
        here, as a batch's row does (``engine.drafting.draft_choice``)."""
        return draft_choice(
            [params],
            [generator],
            [num_tokens],
            steps=num_tokens,
            device=self.draft_to_target.device,
        )

    def choose(
        self,
        logits: torch.Tensor,
        choice: DraftChoice | None,
        step: int,
        token_probs: list[torch.Tensor],
    ) -> torch.Tensor:
        """Draft ``step``'s token from ``logits`` [V] as a 0-d target id; records its
        distribution over the target vocabulary when sampling."""
        token, probs = choose(logits[None], choice, step)
        if probs is not None:
            token_probs.append(on_target_vocabulary(probs[0], self.draft_to_target, self.target_vocab_size))
        return to_target(self.draft_to_target, token[0])

    def _require_cache(self) -> DraftKVCache:
        if self._cache is None:
            raise RuntimeError("Drafter used outside session()")
        return self._cache


def draft_to_target_table(head: Eagle3DraftModel) -> torch.Tensor:
    """The target id of every draft id, computed once: target_id = draft_id + d2t[draft_id]."""
    d2t = head.get_buffer("d2t")
    return head.draft_to_target_ids(torch.arange(len(d2t), device=d2t.device))


def in_head_dtype(head: Eagle3DraftModel, features: torch.Tensor) -> torch.Tensor:
    """The target's ``features`` in the dtype ``head`` drafts in, which may differ from the
    target's (``engine.heads.draft_precision``)."""
    return features.to(head.dtype)


def to_target(draft_to_target: torch.Tensor, draft_ids: torch.Tensor) -> torch.Tensor:
    """Target ids of draft ids (any shape), on the device: indexing with a 0-d tensor reads it
    back to the host first (a sync per drafted token on a GPU), ``index_select`` does not."""
    return draft_to_target.index_select(0, draft_ids.reshape(-1)).reshape(draft_ids.shape)
