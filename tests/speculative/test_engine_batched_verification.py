"""Greedy verification of a whole batch on the device, read back in one host sync."""

from __future__ import annotations

import pytest
import torch

from speculative.verification import verify_greedy, verify_greedy_rows
from tests.fixtures.host_syncs import counting_host_reads

VOCAB = 50


def _row(generator: torch.Generator, drafts: int, accept: int) -> tuple[torch.Tensor, torch.Tensor]:
    """A row whose first ``accept`` drafts equal the target's argmax and whose next one does not."""
    logits = torch.randn(drafts + 1, VOCAB, generator=generator)
    argmax = logits.argmax(dim=-1)
    ids = argmax[:drafts].clone()
    if accept < drafts:
        ids[accept] = (argmax[accept] + 1) % VOCAB
    return ids, logits


def test_each_rows_verdict_is_verify_greedys() -> None:
    generator = torch.Generator().manual_seed(0)
    # (drafts, accepted): nothing drafted (plain decoding), none, some and all accepted.
    shapes = [(0, 0), (4, 0), (4, 2), (4, 4), (1, 1), (3, 1), (6, 5)]
    rows = [_row(generator, drafts, accept) for drafts, accept in shapes]

    verdicts = verify_greedy_rows([ids for ids, _ in rows], [logits for _, logits in rows])

    assert verdicts == [verify_greedy(ids, logits) for ids, logits in rows]
    assert [verdict.accepted for verdict in verdicts] == [accept for _, accept in shapes]
    for (_, logits), verdict in zip(rows, verdicts, strict=True):
        assert verdict.next_token == int(logits[verdict.accepted].argmax())


def test_the_whole_batch_costs_one_host_read(monkeypatch: pytest.MonkeyPatch) -> None:
    generator = torch.Generator().manual_seed(1)
    rows = [_row(generator, drafts, drafts // 2) for drafts in (0, 1, 2, 3, 4, 4, 4, 4)]

    with counting_host_reads(monkeypatch) as reads:
        verify_greedy_rows([ids for ids, _ in rows], [logits for _, logits in rows])
    with counting_host_reads(monkeypatch) as per_row:
        for ids, logits in rows:
            verify_greedy(ids, logits)

    assert reads.count == 1
    assert per_row.count == len(rows)  # a row verified alone costs one read too


def test_logits_that_do_not_fit_the_drafts_are_refused_by_row() -> None:
    ids = torch.tensor([1, 2, 3])
    with pytest.raises(ValueError, match=r"row 1: 3 drafts need 4 logits, got 3"):
        verify_greedy_rows(
            [torch.tensor([], dtype=torch.long), ids], [torch.zeros(1, VOCAB), torch.zeros(3, VOCAB)]
        )
    with pytest.raises(ValueError, match="2 rows of drafts but 1 of logits"):
        verify_greedy_rows([ids, ids], [torch.zeros(4, VOCAB)])
    assert verify_greedy_rows([], []) == []
