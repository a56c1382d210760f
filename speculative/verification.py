"""Deciding which drafted tokens the target accepts.

Both rules are lossless. Greedy: a draft is kept while it equals the target's argmax,
then the target's own argmax follows (the "bonus" token), so the output is exactly what
plain greedy decoding would produce. Sampling: the speculative-sampling rule of Leviathan
et al. / Chen et al. (2023): accept draft x with probability min(1, p(x)/q(x)); at the
first rejection draw from norm(max(p - q, 0)); if every draft is accepted draw the bonus
from p. Every emitted token is then distributed exactly as the target's p.

Each rule decides a whole batch on the device (``greedy_verdicts``, ``sampled_verdicts``)
and ``read_verdicts`` reads every row's outcome back in one host sync: on a GPU a step's
verification then waits for the device once, however many rows it has.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch.nn.utils.rnn import pad_sequence

from engine.sampling import draw_at, packs_rows
from engine.transfers import CopiesQueued, int_tables_to, to_host


@dataclass(frozen=True, slots=True)
class Verdict:
    """Outcome of one verification: the first ``accepted`` drafts are kept, then ``next_token``."""

    accepted: int
    next_token: int


def verify_greedy(draft_ids: torch.Tensor, target_logits: torch.Tensor) -> Verdict:
    """``draft_ids`` [K] target-vocabulary ids; ``target_logits`` [K+1, V] at the pending
    token and each draft. One host sync: a batch of one row of ``verify_greedy_rows``."""
    return verify_greedy_rows([draft_ids], [target_logits])[0]


def verify_greedy_rows(
    draft_ids: Sequence[torch.Tensor], target_logits: Sequence[torch.Tensor]
) -> list[Verdict]:
    """Greedy verification of every row of a batch at once, with one host sync for all
    (``greedy_verdicts``, read back)."""
    return read_verdicts(greedy_verdicts(draft_ids, target_logits))


def greedy_verdicts(draft_ids: Sequence[torch.Tensor], target_logits: Sequence[torch.Tensor]) -> torch.Tensor:
    """Greedy verification of every row of a batch on the device: [R, 2] (accepted, next token).

    Row ``r`` drafted ``draft_ids[r]`` [K_r] (K_r may be 0: plain decoding's next token) and
    the target scored ``target_logits[r]`` [K_r+1, V]. A row accepts the leading run of drafts
    that equal the target's argmax, then takes the target's argmax after them. Verifying row
    by row would read two numbers back per row, each a device-to-host sync that stalls a GPU's
    queue; here nothing is read until ``read_verdicts``."""
    _check_rows(draft_ids, target_logits)
    if not draft_ids:
        return torch.empty(0, 2, dtype=torch.long)
    layout = _BatchLayout.of(draft_ids, target_logits[0].device)
    targets = padded(target_logits, layout.target_at, lambda logits: logits.argmax(dim=-1))  # [R, K+1]
    if not layout.longest:
        return torch.stack([torch.zeros_like(layout.drafted), targets[:, 0]], dim=1)
    drafts = padded(draft_ids, layout.draft_at).to(targets.dtype)  # [R, K]
    # Whatever a padded position holds, only matches within a row's drafts count.
    accepted = ((targets[:, : layout.longest] == drafts) & layout.real()).long().cumprod(dim=1).sum(dim=1)
    next_tokens = targets.gather(1, accepted.unsqueeze(1)).squeeze(1)
    return torch.stack([accepted, next_tokens], dim=1)


def verify_sampled(
    draft_ids: torch.Tensor,
    draft_probs: torch.Tensor,
    target_probs: torch.Tensor,
    generator: torch.Generator,
) -> Verdict:
    """Speculative sampling over K drafts.

    ``draft_ids`` [K] were drawn from ``draft_probs`` [K, V] (zero outside the draft
    vocabulary); ``target_probs`` [K+1, V] is the target's distribution at the pending
    token and after each draft, already tempered and top-p filtered. One host sync: a batch
    of one row of ``sampled_verdicts``.
    """
    return read_verdicts(sampled_verdicts([draft_ids], [draft_probs], [target_probs], [generator]))[0]


def sampled_verdicts(
    draft_ids: Sequence[torch.Tensor],
    draft_probs: Sequence[torch.Tensor],
    target_probs: Sequence[torch.Tensor],
    generators: Sequence[torch.Generator],
) -> torch.Tensor:
    """Speculative sampling of every row of a batch on the device: [R, 2] (accepted, next token).

    Row ``r`` is ``verify_sampled``'s arguments; K_r may be 0 (plain sampling: the token is
    drawn from ``target_probs[r][0]``, ``draft_probs[r]`` is [0, V]). Each row draws K_r + 1
    uniforms from its own generator in one call -- K_r acceptance tests, then its token
    (``engine.sampling.draw_at``) -- as a row verified alone draws them, so a seeded request
    samples the same tokens whatever else is in the batch. Then the whole batch is decided in
    one set of operations over the rows padded to the longest, with no Python per row, and
    nothing is read back: which distribution the last token comes from is chosen on the device.
    """
    _check_rows(draft_ids, target_probs)
    if not (len(draft_ids) == len(draft_probs) == len(generators)):
        raise ValueError(
            f"{len(draft_ids)} rows of drafts, {len(draft_probs)} of draft distributions "
            f"and {len(generators)} generators"
        )
    if not draft_ids:
        return torch.empty(0, 2, dtype=torch.long)
    device = target_probs[0].device
    layout = _BatchLayout.of(draft_ids, device)
    longest, drafted = layout.longest, layout.drafted
    draws = torch.zeros(len(draft_ids), longest + 1, dtype=torch.float32, device=device)
    for row, (ids, generator) in enumerate(zip(draft_ids, generators, strict=True)):
        draws[row, : ids.shape[0] + 1].uniform_(generator=generator)
    batch = torch.arange(len(draft_ids), device=device)
    p = padded(target_probs, layout.target_at)  # [R, K+1, V]
    accepted = torch.zeros_like(drafted)
    q_next = torch.zeros_like(p[:, 0])
    if longest:
        q = padded(draft_probs, layout.draft_at)  # [R, K, V]
        ids = padded(draft_ids, layout.draft_at)[..., None]  # [R, K, 1]
        p_draft, q_draft = p[:, :longest].gather(2, ids)[..., 0], q.gather(2, ids)[..., 0]
        # u < p/q written without the division: q > 0 for a drawn token, and p = 0 never
        # accepts. A padded position, whatever it holds, never accepts.
        kept = (draws[:, :longest] * q_draft < p_draft) & layout.real()
        accepted = kept.long().cumprod(dim=1).sum(dim=1)
        # Past a row's last draft there is no q, and p itself is the law: that row's last
        # draft's q, zeroed, stands in for it.
        within = accepted < drafted
        q_next = q[batch, accepted.clamp(max=longest - 1)] * within[:, None]
    p_next = p[batch, accepted]  # [R, V]
    residual = (p_next - q_next).clamp_(min=0.0)
    mass = residual.sum(dim=-1)
    # Every draft accepted (or none drafted): p. p == q up to rounding leaves no residual
    # mass: p is the law too.
    from_p = (accepted >= drafted) | (mass <= 0.0)
    distribution = torch.where(
        from_p[:, None], p_next, residual / torch.where(from_p, torch.ones_like(mass), mass)[:, None]
    )
    token = draw_at(distribution, draws[batch, drafted])
    return torch.stack([accepted, token], dim=1)


@dataclass(frozen=True, slots=True)
class _BatchLayout:
    """A batch's rows on the device: each row's draft count and, where rows are packed (a GPU,
    ``engine.sampling.packs_rows``), where each padded position of the targets' K_r+1 and the
    drafts' K_r entries reads from (``gather_index``); None where rows are padded one by one."""

    longest: int  # the most drafts any row has
    drafted: torch.Tensor  # [R]
    target_at: torch.Tensor | None
    draft_at: torch.Tensor | None

    @classmethod
    def of(cls, draft_ids: Sequence[torch.Tensor], device: torch.device) -> _BatchLayout:
        counts = [int(ids.shape[0]) for ids in draft_ids]
        longest = max(counts)
        # One pinned copy for all tables: a plain copy would stall the device.
        if not packs_rows(device):
            (drafted,) = int_tables_to(device, counts)
            return cls(longest, drafted, None, None)
        drafted, target_at, draft_at = int_tables_to(
            device, counts, gather_index([n + 1 for n in counts], longest + 1), gather_index(counts, longest)
        )
        return cls(longest, drafted, target_at, draft_at)

    def real(self) -> torch.Tensor:
        """[R, longest]: which padded draft positions hold one of the row's drafts."""
        return torch.arange(self.longest, device=self.drafted.device)[None, :] < self.drafted[:, None]


def gather_index(counts: Sequence[int], width: int) -> np.ndarray:
    """Where each of ``width`` padded positions of each row reads from the rows packed end to
    end (row ``r`` holds ``counts[r]`` entries): its own entry, or past its end its last one
    (row 0's first for an empty row). Only positions within a row are ever read unmasked."""
    lengths = np.asarray(counts, dtype=np.int64)
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    within = np.minimum(np.arange(width)[None, :], np.maximum(lengths - 1, 0)[:, None])
    return np.where(lengths[:, None] > 0, starts[:, None] + within, 0)


def padded(
    rows: Sequence[torch.Tensor],
    at: torch.Tensor | None,
    transform: Callable[[torch.Tensor], torch.Tensor] | None = None,
) -> torch.Tensor:
    """``rows`` [n_r, ...] (``transform``-ed, row-wise) as a padded batch [R, width, ...]. On a
    GPU, packed end to end and gathered once (``gather_index`` on the device as ``at``):
    ``pad_sequence`` copies each row on its own, a kernel launch per row. A CPU launches
    nothing, and there packing two 6 MB copies of a batch's distributions cost more (page
    faults) than it saved: with ``at`` None, ``pad_sequence`` (``engine.sampling.packs_rows``)."""
    if at is None:
        return pad_sequence([row if transform is None else transform(row) for row in rows], batch_first=True)
    packed = torch.cat(list(rows))
    packed = packed if transform is None else transform(packed)
    return packed.index_select(0, at).view(len(rows), -1, *packed.shape[1:])


def read_verdicts(*verdicts: torch.Tensor) -> list[Verdict]:
    """The verdicts of every [R, 2] tensor given, in order, read back in one host sync."""
    return read_verdicts_and_drafts(verdicts, [])[0]


@dataclass(frozen=True, slots=True)
class VerdictsCopy:
    """Verdict pairs and draft ids on their way to the host (``queue_verdicts_and_drafts``)."""

    values: torch.Tensor  # [2 * pairs + drafts] in host memory once ``ready`` has been waited on
    ready: CopiesQueued
    pairs: int

    def read(self) -> tuple[list[Verdict], list[int]]:
        """The verdicts in order and the draft ids, once the copy has run: on a GPU this waits
        for the kernels queued before the copy only, not for any queued since."""
        self.ready.wait()
        values: list[int] = self.values.tolist()
        read = [Verdict(accepted=values[2 * i], next_token=values[2 * i + 1]) for i in range(self.pairs)]
        return read, values[2 * self.pairs :]


def queue_verdicts_and_drafts(
    verdicts: Sequence[torch.Tensor], draft_ids: Sequence[torch.Tensor]
) -> VerdictsCopy:
    """The verdicts of every [R, 2] tensor of ``verdicts`` and every id of ``draft_ids``,
    concatenated, queued for copying to the host in one copy."""
    # Operators per tensor of ``verdicts`` (at most two), none per row of drafts: a step's
    # launches must not grow with its batch.
    parts = [rows.reshape(-1).to(torch.long) for rows in verdicts if rows.shape[0] > 0]
    drafted = [ids for ids in draft_ids if ids.shape[0] > 0]
    if drafted:
        parts.append(torch.cat(drafted).reshape(-1).to(torch.long))
    pairs = sum(int(rows.shape[0]) for rows in verdicts)
    if not parts:
        return VerdictsCopy(torch.zeros(0, dtype=torch.long), CopiesQueued(torch.device("cpu")), pairs)
    values = torch.cat(parts)
    return VerdictsCopy(to_host(values), CopiesQueued(values.device), pairs)


def read_verdicts_and_drafts(
    verdicts: Sequence[torch.Tensor], draft_ids: Sequence[torch.Tensor]
) -> tuple[list[Verdict], list[int]]:
    """The verdicts of every [R, 2] tensor of ``verdicts`` and every id of ``draft_ids``,
    concatenated, in one host sync (a serving step's one read)."""
    return queue_verdicts_and_drafts(verdicts, draft_ids).read()


def read_verdict_and_drafts(verdict: torch.Tensor, draft_ids: torch.Tensor) -> tuple[Verdict, list[int]]:
    """One row's verdict [1, 2] and the drafts it accepts, of ``draft_ids`` [K], in one host
    sync: read apart, the accepted drafts would cost the batch-1 decoder a second sync a round."""
    (read,), drafted = read_verdicts_and_drafts([verdict.reshape(1, 2)], [draft_ids])
    return read, drafted[: read.accepted]


def _check_rows(draft_ids: Sequence[torch.Tensor], scores: Sequence[torch.Tensor]) -> None:
    """Each row scores its K drafts and the position after them: K + 1 rows of logits or probs."""
    if len(draft_ids) != len(scores):
        raise ValueError(f"{len(draft_ids)} rows of drafts but {len(scores)} of logits")
    for row, (drafts, logits) in enumerate(zip(draft_ids, scores, strict=True)):
        count = drafts.shape[0]
        if logits.shape[0] != count + 1:
            raise ValueError(f"row {row}: {count} drafts need {count + 1} logits, got {logits.shape[0]}")
