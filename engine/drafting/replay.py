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

from engine.heads.draft_slots import HeadSlotStep
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
    # After a forward over a batch of slots: its output rows and their positions, to find
    # the rows ``compute_logits`` is handed among them.
    _rows: torch.Tensor | None
    _row_positions: list[int]

    @classmethod
    def from_head(
        cls, head: Eagle3DraftModel, reference: Sequence[int] = (), wrong_at: Collection[int] = ()
    ) -> ReplayHead:
        replay = cls(head.config)
        replay.load_state_dict(head.state_dict())
        replay.reference = list(reference)
        replay.wrong_at = set(wrong_at)
        replay._last_positions, replay._rows = [0], None
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
        self._last_positions, self._rows = [int(position_ids[0, -1])], None
        return super().forward(input_ids, hidden, position_ids, cache, attention_mask)

    def forward_slots(
        self, input_ids: torch.Tensor, hidden: torch.Tensor, step: HeadSlotStep
    ) -> torch.Tensor:
        out = super().forward_slots(input_ids, hidden, step)
        self._rows, self._row_positions = out.reshape(-1, out.shape[-1]), step.positions.reshape(-1).tolist()
        return out

    def compute_logits(self, prenorm_hidden: torch.Tensor) -> torch.Tensor:
        """One row of logits per drafting row (all of them replay ``reference``)."""
        real = super().compute_logits(prenorm_hidden)  # paid for, as with a trained head
        if self._rows is not None:
            # Rows taken out of a batched forward's output: find each one's position there.
            flat = prenorm_hidden.reshape(-1, prenorm_hidden.shape[-1])
            matches = (flat[:, None, :] == self._rows[None, :, :]).all(-1).int().argmax(-1)
            self._last_positions = [self._row_positions[int(index)] for index in matches]
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
