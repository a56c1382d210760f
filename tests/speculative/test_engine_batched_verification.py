"""Verification of a whole batch on the device, greedy and sampled, read back in one host sync."""

from __future__ import annotations

from collections import Counter

import pytest
import torch

from engine import sampling
from engine.dispatched_ops import DispatchedOps
from engine.sampling import sample
from speculative.verification import (
    greedy_verdicts,
    read_verdicts,
    sampled_verdicts,
    verify_greedy,
    verify_greedy_rows,
    verify_sampled,
)
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


@pytest.fixture(params=[False, True], ids=["row by row", "packed"])
def packed(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> bool:
    """Rows padded as a CPU pads them, and packed and gathered as a GPU does."""
    monkeypatch.setattr(sampling, "PACK_ROWS_ON_CPU", request.param)
    return bool(request.param)


@pytest.mark.usefixtures("packed")
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


def _sampled_row(generator: torch.Generator, drafts: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Drafts drawn from a draft distribution q [K, V] and the target's p [K+1, V], both near
    one shared distribution, as a head's are near its target's: some drafts are accepted and
    some rejected, depending on the uniforms."""
    shared = 2.0 * torch.randn(drafts + 1, VOCAB, generator=generator)
    p = torch.softmax(shared + 0.8 * torch.randn(drafts + 1, VOCAB, generator=generator), dim=-1)
    q = torch.softmax(shared[:drafts] + 0.8 * torch.randn(drafts, VOCAB, generator=generator), dim=-1)
    ids = sample(q, generator) if drafts else torch.empty(0, dtype=torch.long)
    return ids, q, p


@pytest.mark.usefixtures("packed")
def test_each_sampled_rows_verdict_is_that_row_verified_alone() -> None:
    generator = torch.Generator().manual_seed(2)
    rows = [_sampled_row(generator, drafts) for drafts in (0, 3, 1, 4, 2, 3, 0, 4)]
    seeds = range(30, 30 + len(rows))

    batched = read_verdicts(
        sampled_verdicts(
            [ids for ids, _, _ in rows],
            [q for _, q, _ in rows],
            [p for _, _, p in rows],
            [torch.Generator().manual_seed(seed) for seed in seeds],
        )
    )
    alone = [
        verify_sampled(ids, q, p, torch.Generator().manual_seed(seed))
        for (ids, q, p), seed in zip(rows, seeds, strict=True)
    ]

    assert batched == alone
    # A row without drafts draws its token from p[0] with its generator, as plain sampling does.
    (_, _, p_first), (_, _, p_last) = rows[0], rows[-2]
    assert batched[0].next_token == int(sample(p_first[0], torch.Generator().manual_seed(30)))
    assert batched[-2].next_token == int(sample(p_last[0], torch.Generator().manual_seed(36)))
    accepted = [verdict.accepted for verdict in batched]
    assert any(0 < count < len(ids) for count, (ids, _, _) in zip(accepted, rows, strict=True))


def test_greedy_and_sampled_rows_of_a_batch_cost_one_host_read(monkeypatch: pytest.MonkeyPatch) -> None:
    generator = torch.Generator().manual_seed(3)
    greedy_rows = [_row(generator, drafts, drafts // 2) for drafts in (0, 2, 4, 4)]
    sampled_rows = [_sampled_row(generator, drafts) for drafts in (0, 1, 3, 4, 4)]

    with counting_host_reads(monkeypatch) as reads:
        verdicts = read_verdicts(
            greedy_verdicts([ids for ids, _ in greedy_rows], [logits for _, logits in greedy_rows]),
            sampled_verdicts(
                [ids for ids, _, _ in sampled_rows],
                [q for _, q, _ in sampled_rows],
                [p for _, _, p in sampled_rows],
                [torch.Generator().manual_seed(row) for row in range(len(sampled_rows))],
            ),
        )
    with counting_host_reads(monkeypatch) as per_row:
        for row, (ids, q, p) in enumerate(sampled_rows):
            verify_sampled(ids, q, p, torch.Generator().manual_seed(row))

    assert reads.count == 1
    assert per_row.count == len(sampled_rows)
    assert len(verdicts) == len(greedy_rows) + len(sampled_rows)
    assert verdicts[: len(greedy_rows)] == [verify_greedy(ids, logits) for ids, logits in greedy_rows]


def test_sampled_rows_that_do_not_fit_are_refused() -> None:
    ids, q, p = _sampled_row(torch.Generator().manual_seed(4), 3)
    with pytest.raises(ValueError, match=r"row 0: 3 drafts need 4 logits, got 3"):
        sampled_verdicts([ids], [q], [p[:3]], [torch.Generator()])
    with pytest.raises(ValueError, match="1 rows of drafts, 2 of draft distributions and 1 generators"):
        sampled_verdicts([ids], [q, q], [p], [torch.Generator()])
    assert read_verdicts(sampled_verdicts([], [], [], [])) == []


def test_sampled_verification_dispatches_the_same_ops_whatever_the_batch_but_its_draws(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """No Python per row: beyond each row's one draw of its uniforms from its own generator
    and the views that index them, 8 rows dispatch exactly the operators 2 rows do (the rows
    it is handed as a list are padded by one gather, not a copy each, as on a GPU)."""
    monkeypatch.setattr(sampling, "PACK_ROWS_ON_CPU", True)
    generator = torch.Generator().manual_seed(5)
    rows = [_sampled_row(generator, drafts) for drafts in (0, 3, 1, 4, 2, 3, 0, 4)]
    per_row = {"aten.uniform_", "aten.select", "aten.slice", "aten.view"}
    dispatched = {}
    for batch in (2, 8):
        chosen = rows[:batch]
        with DispatchedOps() as ops:
            sampled_verdicts(
                [ids for ids, _, _ in chosen],
                [q for _, q, _ in chosen],
                [p for _, _, p in chosen],
                [torch.Generator().manual_seed(row) for row in range(batch)],
            )
        dispatched[batch] = Counter(ops.names)

    assert dispatched[8]["aten.uniform_"] == 8
    two, eight = ({op: n for op, n in dispatched[b].items() if op not in per_row} for b in (2, 8))
    assert eight == two


def test_greedy_verification_dispatches_the_same_ops_whatever_the_batch(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """8 greedy rows, handed as lists of different lengths, cost the operators 2 rows do (rows
    packed, as on a GPU)."""
    monkeypatch.setattr(sampling, "PACK_ROWS_ON_CPU", True)
    generator = torch.Generator().manual_seed(6)
    rows = [_row(generator, drafts, drafts // 2) for drafts in (0, 3, 1, 4, 2, 3, 0, 4)]
    dispatched = {}
    for batch in (2, 8):
        chosen = rows[:batch]
        with DispatchedOps() as ops:
            greedy_verdicts([ids for ids, _ in chosen], [logits for _, logits in chosen])
        dispatched[batch] = Counter(ops.names)

    assert dispatched[8] == dispatched[2]
