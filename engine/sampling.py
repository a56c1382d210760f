"""Turning logits into the distribution a token is drawn from (temperature, top-p), and
drawing from it: one definition for every caller (distillation and prompt writing, the
draft heads, speculative sampling).

Greedy decoding is temperature 0: it never builds a distribution, it takes the argmax.
The same transform is applied to the target's and the draft's logits; speculative
sampling stays exact for any draft distribution, so reshaping the draft the same way
only raises acceptance. Nothing here reads a tensor back to the host on a GPU.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import torch

from engine.transfers import float_tables_to


@dataclass(frozen=True, slots=True)
class SamplingParams:
    """How the next token is chosen: greedy when ``temperature`` is 0."""

    temperature: float = 0.0
    top_p: float = 1.0

    def __post_init__(self) -> None:
        if not self.temperature >= 0.0:
            raise ValueError(f"temperature must be >= 0, got {self.temperature}")
        if not 0.0 < self.top_p <= 1.0:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0


def probabilities(logits: torch.Tensor, params: SamplingParams) -> torch.Tensor:
    """Softmax of ``logits / temperature`` over the last axis, restricted to the top-p nucleus.

    Computed in float32 whatever the model dtype, so probabilities of low-precision models
    still sum to one closely enough for exact rejection sampling.
    """
    if params.greedy:
        raise ValueError("greedy decoding (temperature 0) has no sampling distribution")
    probs = _tempered(logits, params)
    if params.top_p < 1.0:
        probs = _top_p_filter(probs, params.top_p)
    return probs


def _tempered(logits: torch.Tensor, params: SamplingParams) -> torch.Tensor:
    """Softmax of ``logits / temperature`` in float32, before any top-p cut."""
    return torch.softmax(logits.float() / params.temperature, dim=-1)


def row_probabilities(logits: torch.Tensor, temperature: torch.Tensor, top_p: torch.Tensor) -> torch.Tensor:
    """``probabilities`` of every row of ``logits`` [R, V] with each row's own ``temperature``
    and ``top_p`` [R] (on the device; rows of temperature 0 get a distribution at temperature 1,
    which a greedy caller ignores). A row with top_p 1 is not cut, as ``probabilities`` leaves
    it, so each row's distribution is the one ``probabilities`` gives it alone."""
    scale = torch.where(temperature > 0, temperature, torch.ones_like(temperature))
    probs = torch.softmax(logits.float() / scale[:, None], dim=-1)
    cut = top_p < 1.0
    if probs.device.type == "cpu":
        # A read costs nothing on a CPU, and rows left whole need no search for their nucleus.
        rows = cut.nonzero().squeeze(-1)
        if rows.numel() == probs.shape[0]:
            # Every row cut (the usual sampled batch): no gather and scatter of the rows, which
            # cost ~5 ms for 32 rows of a 49k vocabulary, as much as their nucleus search.
            return _top_p_filter(probs, top_p)
        if rows.numel():
            probs[rows] = _top_p_filter(probs[rows], top_p[rows])
        return probs
    return torch.where(cut[:, None], _top_p_filter(probs, top_p), probs)


# A CPU launches nothing, and a row's few 49k-token distributions stay in its cache where 8
# rows packed (6 MB a tensor) do not: packed, 8 rows of 4 positions took 10.6-17.1 ms against
# 7.3-8.4 row by row (medians of 300 alternating calls, one thread, AVX512 EPYC, 2026-12-05).
PACK_ROWS_ON_CPU = False


def packs_rows(device: torch.device) -> bool:
    """Whether a batch's rows of different lengths are packed into one tensor and handled in one
    set of operations (on a GPU: the same launches for any batch) or one by one (on a CPU)."""
    return device.type != "cpu" or PACK_ROWS_ON_CPU


def rows_probabilities(rows: Sequence[torch.Tensor], params: Sequence[SamplingParams]) -> list[torch.Tensor]:
    """``probabilities`` of each of ``rows`` [n_r, V] with its own ``params[r]``, all rows in one
    set of operations (``row_probabilities`` over them packed end to end): on a GPU a sampled
    batch's target distributions cost the same kernels for 8 sequences as for 1. A CPU takes
    them row by row (``PACK_ROWS_ON_CPU``)."""
    if len(rows) != len(params):
        raise ValueError(f"{len(rows)} rows of logits but {len(params)} sampling settings")
    if any(setting.greedy for setting in params):
        raise ValueError("greedy decoding (temperature 0) has no sampling distribution")
    if not rows:
        return []
    if not packs_rows(rows[0].device):
        return [probabilities(logits, setting) for logits, setting in zip(rows, params, strict=True)]
    lengths = [int(logits.shape[0]) for logits in rows]
    positions = [setting for setting, n in zip(params, lengths, strict=True) for _ in range(n)]
    temperature, top_p = float_tables_to(
        rows[0].device,
        [setting.temperature for setting in positions],
        [setting.top_p for setting in positions],
    )
    return list(torch.split(row_probabilities(torch.cat(list(rows)), temperature, top_p), lengths))


def _top_p_filter(probs: torch.Tensor, top_p: float | torch.Tensor) -> torch.Tensor:
    """Keep the smallest set of most likely tokens whose mass reaches ``top_p`` (one for every
    row, or each row's own [R]); renormalise."""
    rows = probs.reshape(-1, probs.shape[-1])
    kept = torch.zeros_like(rows)
    for index, ids, nucleus in _nuclei(rows, top_p):
        if index is None:
            kept.scatter_(-1, ids, nucleus)
        else:
            kept[index] = torch.zeros_like(rows[index]).scatter_(-1, ids, nucleus)
    return (kept / kept.sum(dim=-1, keepdim=True)).reshape(probs.shape)


# On a CPU, sorting every row of a large vocabulary dominated a sampled step: for 48 rows of
# SmolLM2's 49,152 tokens the sort took ~170 ms and a draw over whole rows ~70 ms, against
# ~100 ms for the model's forward (AVX512 EPYC, one thread). A nucleus usually lies among the
# most likely few hundred tokens (SmolLM2 writing prompts at temperature 1, top-p 0.95: 256
# tokens held it at about 60-90 % of positions, 4,096 at 90 %), so a CPU looks there first with
# a top-k and takes a wider one, and at last the sort, only for the rows whose candidates hold
# less than top_p. A GPU sorts fast, and telling rows apart would need a host sync: it sorts.
CPU_CANDIDATE_TIERS = (256, 4096)


def _nuclei(
    rows: torch.Tensor, top_p: float | torch.Tensor
) -> Iterator[tuple[torch.Tensor | None, torch.Tensor, torch.Tensor]]:
    """Each row's top-p nucleus among its most likely tokens, exactly as a full sort finds it:
    (the rows' indices, None for all rows; the candidates' ids, most likely first; their
    probabilities with the tokens outside the nucleus zeroed). Every row comes once.
    ``top_p``: one for every row, or each row's own [R]."""
    vocab = rows.shape[-1]
    tiers = [k for k in CPU_CANDIDATE_TIERS if k < vocab] if rows.device.type == "cpu" else []
    # Each row's top_p as a column, so a tier's rows take theirs with the same index as their
    # probabilities (a float32 tensor of the value compares as the Python float does).
    limits = (
        top_p if isinstance(top_p, torch.Tensor) else torch.full((rows.shape[0],), top_p, device=rows.device)
    )
    limits = limits[:, None]
    pending: torch.Tensor | None = None
    for k in [*tiers, vocab]:
        part, cut = (rows, limits) if pending is None else (rows[pending], limits[pending])
        top, ids = part.sort(dim=-1, descending=True) if k == vocab else part.topk(k, dim=-1)
        mass = top.cumsum(dim=-1)
        # A token stays if the mass strictly before it is below top_p, so the top one always stays.
        nucleus = top.masked_fill(mass - top >= cut, 0.0)
        if k == vocab:
            yield pending, ids, nucleus
            return
        # Where the candidates reach top_p, every token beyond them has at least that much before it.
        reached = mass[:, -1] >= cut[:, 0]
        index = reached.nonzero().squeeze(-1) if pending is None else pending[reached]
        if index.numel():
            yield index, ids[reached], nucleus[reached]
        pending = (~reached).nonzero().squeeze(-1) if pending is None else pending[~reached]
        if not pending.numel():
            return


def sample(probs: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """One draw per row of ``probs`` [..., V] -> ids [...], at uniforms from ``generator``
    (``draw_at``): every seeded draw in the engine -- plain decoding, drafting, verification
    -- consumes its generator this way, so a row drawn alone or in a batch, eagerly or in a
    CUDA graph with its uniforms drawn beforehand, gets the same token."""
    flat = probs.reshape(-1, probs.shape[-1])
    uniforms = torch.rand(flat.shape[0], generator=generator, device=flat.device)
    return draw_at(flat, uniforms).reshape(probs.shape[:-1])


def draw_at(probs: torch.Tensor, uniforms: torch.Tensor) -> torch.Tensor:
    """One draw from each row of ``probs`` [R, V] at ``uniforms`` [R] in [0, 1): the first
    token whose cumulative mass exceeds u times the row's total (inverting the distribution's
    cumulative sum). Rounding can put that point at the total itself, past every token; the
    draw is then the last token of positive mass, so a token of zero mass (one a top-p cut
    removed: a flat stretch of the sum) is never drawn."""
    cumulative = probs.cumsum(-1)
    drawn = torch.searchsorted(cumulative, (uniforms * cumulative[:, -1])[:, None], right=True)[:, 0]
    columns = torch.arange(probs.shape[-1], device=probs.device)
    last_positive = torch.where(probs > 0, columns, 0).amax(-1)
    return torch.minimum(drawn, last_positive)


def sample_tokens(logits: torch.Tensor, params: SamplingParams) -> torch.Tensor:
    """One token per row of ``logits`` [R, V] from ``probabilities`` (torch's global generator:
    the batched generators' rows share one stream)."""
    if params.top_p == 1.0 or logits.device.type != "cpu":
        return torch.multinomial(probabilities(logits, params), num_samples=1).squeeze(-1)
    # On a CPU, drawn among each row's candidates: a draw over whole rows costs a third of a step.
    probs = _tempered(logits, params)
    tokens = torch.empty(probs.shape[0], dtype=torch.long, device=probs.device)
    for index, ids, nucleus in _nuclei(probs, params.top_p):
        drawn = ids.gather(-1, torch.multinomial(nucleus, num_samples=1)).squeeze(-1)
        if index is None:
            return drawn
        tokens[index] = drawn
    return tokens


def next_tokens(logits: torch.Tensor, params: SamplingParams) -> tuple[torch.Tensor, torch.Tensor]:
    """The greedy choice and the chosen token of each row (the same tensor when greedy)."""
    greedy = logits.argmax(-1)
    return greedy, greedy if params.greedy else sample_tokens(logits, params)
