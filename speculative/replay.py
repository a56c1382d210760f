"""A draft head that proposes a known continuation, to measure the engine's ceiling.

``ReplayHead`` runs a real head's layer and output projection, so drafting costs what
it costs with a trained head of that shape, and then replaces the logits with ones that
point at the token the target is known to produce next (its plain greedy output,
computed beforehand). Every draft is then accepted unless told otherwise: the speedup
measured with it is what the engine delivers at tau = K + 1. It says nothing about any
trained head's quality and must never be reported as one.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

import torch

from engine.heads.model import DraftKVCache, Eagle3DraftModel

_CERTAIN = 30.0  # logit margin that makes softmax put all its mass on one token


class ReplayHead(Eagle3DraftModel):
    """Drafts ``reference[p + 2]`` from its entry at position ``p``.

    ``reference`` is prompt + the target's greedy output. Predicted positions in
    ``wrong_at`` get a different token. Tokens outside the head's draft vocabulary cannot
    be proposed, so they are missed as a trained head would miss them.
    """

    reference: list[int]
    wrong_at: set[int]
    _draft_of: list[int]
    # Position of each sequence's newest entry, in the order forwarded; one position
    # stands for every row (a tree's nodes of one depth share it).
    _last_positions: list[int]

    @classmethod
    def from_head(
        cls, head: Eagle3DraftModel, reference: Sequence[int] = (), wrong_at: Collection[int] = ()
    ) -> ReplayHead:
        replay = cls(head.config)
        replay.load_state_dict(head.state_dict())
        replay.reference = list(reference)
        replay.wrong_at = set(wrong_at)
        replay._last_positions = [0]
        d2t = replay.get_buffer("d2t")
        targets = replay.draft_to_target_ids(torch.arange(len(d2t), device=d2t.device))
        # Draft id of every target id, -1 where the draft vocabulary lacks it.
        draft_of = torch.full((head.config.vocab_size,), -1, dtype=torch.long, device=d2t.device)
        draft_of[targets] = torch.arange(len(d2t), device=d2t.device)
        replay._draft_of = draft_of.tolist()
        return replay.eval()

    def forward(
        self,
        input_ids: torch.Tensor,
        hidden: torch.Tensor,
        position_ids: torch.Tensor,
        cache: DraftKVCache,
        attention_mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        self._last_positions = [int(position_ids[0, -1])]
        return super().forward(input_ids, hidden, position_ids, cache, attention_mask)

    def forward_packed(
        self,
        input_ids: torch.Tensor,
        hidden: torch.Tensor,
        position_ids: torch.Tensor,
        caches: Sequence[DraftKVCache],
        lengths: Sequence[int],
    ) -> torch.Tensor:
        ends = torch.tensor(lengths, device=position_ids.device).cumsum(0) - 1
        self._last_positions = [int(position) for position in position_ids[0, ends]]
        return super().forward_packed(input_ids, hidden, position_ids, caches, lengths)

    def compute_logits(self, prenorm_hidden: torch.Tensor) -> torch.Tensor:
        """One row of logits per sequence last forwarded (all of them replay ``reference``)."""
        real = super().compute_logits(prenorm_hidden)  # paid for, as with a trained head
        logits = torch.full_like(real, -_CERTAIN)
        rows = logits.view(-1, logits.shape[-1])
        positions = self._last_positions
        if len(positions) == 1:
            positions = positions * rows.shape[0]
        for row, position in zip(rows, positions, strict=True):
            predicted = position + 2
            token = self.reference[predicted] if predicted < len(self.reference) else 0
            choice = max(self._draft_of[token], 0)
            if predicted in self.wrong_at:
                choice = (choice + 1) % self.config.draft_vocab_size
            row[choice] = _CERTAIN
        return logits
