"""The draft head's vocabulary: the target tokens the head may propose.

EAGLE-3 keeps the N target tokens that are most frequent among the tokens the head is
trained to predict (the loss-masked ones), and maps between the two id spaces with
``d2t`` (``target_id = draft_id + d2t[draft_id]``) and ``t2d`` (a bool mask over the
target vocabulary).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import torch

from trainer.data.tokenize import TokenizedConversation


@dataclass(frozen=True, slots=True)
class DraftVocab:
    d2t: torch.Tensor  # int64 [N]: offset from draft id to target id
    t2d: torch.Tensor  # bool [target_vocab_size]: which target ids are in the draft vocabulary
    coverage: float  # fraction of masked training tokens that fall inside the draft vocabulary
    masked_tokens: int  # masked training tokens counted

    @property
    def draft_vocab_size(self) -> int:
        return int(self.d2t.numel())

    @property
    def target_ids(self) -> torch.Tensor:
        """The target id of each draft id, ascending."""
        return torch.arange(self.draft_vocab_size, dtype=torch.int64) + self.d2t


def build_draft_vocab(
    samples: Iterable[TokenizedConversation], *, draft_vocab_size: int, target_vocab_size: int
) -> DraftVocab:
    """Pick the ``draft_vocab_size`` target ids the head will be able to propose.

    Ranking is by frequency among loss-masked tokens, ties broken by the lower id. If
    the data has fewer distinct masked tokens than that, the rest is filled with the
    most frequent unmasked tokens and then the lowest unused ids, so the size is exact.
    """
    if target_vocab_size < 1:
        raise ValueError(f"target_vocab_size must be positive, got {target_vocab_size}")
    if not 1 <= draft_vocab_size <= target_vocab_size:
        raise ValueError(
            f"draft_vocab_size must be between 1 and the target vocabulary size {target_vocab_size}, "
            f"got {draft_vocab_size}"
        )
    masked_counts, unmasked_counts = _count_tokens(samples, target_vocab_size)
    masked_tokens = int(masked_counts.sum())
    if masked_tokens == 0:
        raise ValueError("no loss-masked tokens in the samples: cannot rank a draft vocabulary")

    chosen = _top_ids(masked_counts, draft_vocab_size)
    if chosen.numel() < draft_vocab_size:
        taken = torch.zeros(target_vocab_size, dtype=torch.bool)
        taken[chosen] = True
        fill = _top_ids(unmasked_counts.masked_fill(taken, 0), draft_vocab_size - chosen.numel())
        taken[fill] = True
        rest = (~taken).nonzero().flatten()[: draft_vocab_size - chosen.numel() - fill.numel()]
        chosen = torch.cat([chosen, fill, rest])

    used = torch.sort(chosen).values
    t2d = torch.zeros(target_vocab_size, dtype=torch.bool)
    t2d[used] = True
    d2t = used - torch.arange(draft_vocab_size, dtype=torch.int64)
    coverage = float(masked_counts[used].sum()) / masked_tokens
    return DraftVocab(d2t=d2t, t2d=t2d, coverage=coverage, masked_tokens=masked_tokens)


def _count_tokens(
    samples: Iterable[TokenizedConversation], target_vocab_size: int
) -> tuple[torch.Tensor, torch.Tensor]:
    masked = torch.zeros(target_vocab_size, dtype=torch.int64)
    unmasked = torch.zeros(target_vocab_size, dtype=torch.int64)
    for sample in samples:
        if len(sample.input_ids) != len(sample.loss_mask):
            raise ValueError(
                f"{sample.source or 'sample'}: input_ids and loss_mask differ in length "
                f"({len(sample.input_ids)} vs {len(sample.loss_mask)})"
            )
        if not sample.input_ids:
            continue
        ids = torch.tensor(sample.input_ids, dtype=torch.int64)
        mask = torch.tensor(sample.loss_mask, dtype=torch.bool)
        if int(ids.min()) < 0 or int(ids.max()) >= target_vocab_size:
            bad = int(ids.max()) if int(ids.max()) >= target_vocab_size else int(ids.min())
            raise ValueError(
                f"{sample.source or 'sample'}: token id {bad} is outside the target vocabulary "
                f"(size {target_vocab_size})"
            )
        masked += torch.bincount(ids[mask], minlength=target_vocab_size)
        unmasked += torch.bincount(ids[~mask], minlength=target_vocab_size)
    return masked, unmasked


def _top_ids(counts: torch.Tensor, limit: int) -> torch.Tensor:
    """Ids with a non-zero count, most frequent first, ties to the lower id; at most ``limit``."""
    present = counts.nonzero().flatten()
    # A stable sort on the descending count keeps ids ascending within a tie.
    order = torch.sort(counts[present], descending=True, stable=True).indices
    return present[order][:limit]
