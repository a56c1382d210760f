"""Grouped-query attention with the query's groups folded into its length (what a GPU runs,
so that SDPA's memory-efficient kernel takes the mask) attends as SDPA's own GQA does."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from engine import grouped_attention as grouped
from engine import slot_attention
from engine.generation import generate_batched
from engine.grouped_attention import fold_mask, folds_query_groups, grouped_attention
from engine.sampling import SamplingParams
from engine.slot_attention import visible_keys
from tests.engine.test_engine_batch_draft import _rounds
from trainer.models.tiny import build_tiny_target

VOCAB = 96
GREEDY = SamplingParams(temperature=0.0, top_p=1.0)
NEVER = VOCAB + 1
PROMPTS = [[5, 17, 33, 8], [40, 2, 71], [9, 9, 12, 60, 61, 3], [25], [30, 31, 32, 33, 34], [7, 7]]


def _inputs(
    batch: int, heads: int, kv_heads: int, queries: int, keys: int, *, seed: int = 0
) -> tuple[Any, ...]:
    generator = torch.Generator().manual_seed(seed)
    query = torch.randn(batch, heads, queries, 16, generator=generator)
    key = torch.randn(batch, kv_heads, keys, 16, generator=generator)
    value = torch.randn(batch, kv_heads, keys, 16, generator=generator)
    # Each row at its own position, its queries consecutive: rows of different lengths.
    last = torch.randint(queries, keys - 1, (batch, 1), generator=generator)
    positions = last - torch.arange(queries - 1, -1, -1).view(1, queries)
    return query, key, value, positions


@pytest.mark.parametrize(("heads", "kv_heads"), [(9, 3), (4, 2), (4, 1), (4, 4)])
@pytest.mark.parametrize("queries", [1, 4])
@pytest.mark.parametrize("window", [None, 5])
def test_folded_groups_attend_as_sdpa_gqa_does(
    heads: int, kv_heads: int, queries: int, window: int | None
) -> None:
    query, key, value, positions = _inputs(3, heads, kv_heads, queries, 24)
    mask = visible_keys(positions, 24, window)
    assert not mask.all(), "precondition: the mask hides keys"
    expected = torch.nn.functional.scaled_dot_product_attention(
        query, key, value, attn_mask=mask, scale=0.3, enable_gqa=True
    )
    folded = grouped_attention(query, key, value, mask, 0.3, fold=True)
    kept = grouped_attention(query, key, value, mask, 0.3, fold=False)
    torch.testing.assert_close(folded, expected, atol=1e-6, rtol=1e-5)
    assert torch.equal(kept, expected)
    premade = grouped_attention(
        query, key, value, mask, 0.3, fold=True, folded_mask=fold_mask(mask, heads // kv_heads)
    )
    assert torch.equal(premade, folded)


def test_a_folded_call_hands_sdpa_equal_heads_and_no_gqa(monkeypatch: pytest.MonkeyPatch) -> None:
    # What lets a GPU's memory-efficient kernel run: no enable_gqa, key heads = query heads.
    calls: list[tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...], bool]] = []
    original = torch.nn.functional.scaled_dot_product_attention

    def spying(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, **kwargs: Any) -> torch.Tensor:
        shape = tuple(kwargs["attn_mask"].shape)
        calls.append((tuple(query.shape), tuple(key.shape), shape, bool(kwargs.get("enable_gqa", False))))
        return original(query, key, value, **kwargs)

    monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention", spying)
    query, key, value, positions = _inputs(2, 6, 2, 4, 16)
    out = grouped_attention(query, key, value, visible_keys(positions, 16), None, fold=True)
    assert out.shape == (2, 6, 4, 16)
    assert calls == [((2, 2, 12, 16), (2, 2, 16, 16), (2, 1, 12, 16), False)]


def test_a_folded_call_takes_the_cuda_kernels_transposed_output(monkeypatch: pytest.MonkeyPatch) -> None:
    # CUDA's memory-efficient (and flash) kernels allocate their output as [B, Q, heads, D] and
    # return it transposed to [B, heads, Q, D]; a CPU's SDPA returns it contiguous. The same
    # values in the GPU's strides must unfold into the query's heads as well.
    original = torch.nn.functional.scaled_dot_product_attention

    def gpu_strides(
        query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, **kwargs: Any
    ) -> torch.Tensor:
        return original(query, key, value, **kwargs).transpose(1, 2).contiguous().transpose(1, 2)

    query, key, value, positions = _inputs(3, 9, 3, 4, 24)
    mask = visible_keys(positions, 24)
    expected = grouped_attention(query, key, value, mask, 0.3, fold=True)
    monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention", gpu_strides)
    assert not gpu_strides(query[:, :3], key, value, attn_mask=mask, scale=0.3).is_contiguous()
    assert torch.equal(grouped_attention(query, key, value, mask, 0.3, fold=True), expected)


def test_only_a_cpu_keeps_sdpa_gqa_and_uneven_groups_are_refused() -> None:
    assert not folds_query_groups(torch.device("cpu"))
    assert folds_query_groups(torch.device("cuda"))
    query, key, value, positions = _inputs(1, 5, 2, 1, 8)
    with pytest.raises(ValueError, match="5 query heads do not group over 2"):
        grouped_attention(query, key, value, visible_keys(positions, 8), None, fold=True)


@pytest.mark.parametrize("architecture", ["LlamaForCausalLM", "Qwen3ForCausalLM"])
def test_distillation_with_folded_groups_writes_the_same_replies(
    architecture: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = build_tiny_target(architecture, vocab_size=VOCAB)
    options: dict[str, Any] = {"stop_ids": [NEVER], "max_new_tokens": 8, "batch_size": 4, "sampling": GREEDY}
    kept, _ = generate_batched(model, PROMPTS, **options)
    folds: list[int] = []
    layer_calls: list[bool] = []

    def counting_folds(mask: torch.Tensor, groups: int) -> torch.Tensor:
        folds.append(groups)
        return fold_mask(mask, groups)

    def counting_layers(*args: Any, **kwargs: Any) -> torch.Tensor:
        layer_calls.append(kwargs["folded_mask"] is not None)
        return grouped_attention(*args, **kwargs)

    monkeypatch.setattr(slot_attention, "folds_query_groups", lambda device: True)
    monkeypatch.setattr(slot_attention, "fold_mask", counting_folds)
    monkeypatch.setattr(slot_attention, "grouped_attention", counting_layers)
    folded, _ = generate_batched(model, PROMPTS, **options)
    assert [r.tokens for r in folded if r is not None] == [r.tokens for r in kept if r is not None]
    # Every layer attends with a folded mask, folded once per forward for all the layers.
    groups = model.config.num_attention_heads // model.config.num_key_value_heads
    assert folds
    assert set(folds) == {groups}
    assert all(layer_calls)
    assert len(layer_calls) == len(folds) * model.config.num_hidden_layers


def test_a_batch_drafts_the_same_chains_with_folded_groups(monkeypatch: pytest.MonkeyPatch) -> None:
    kept, kept_lengths = _rounds(GREEDY, batched=True)
    monkeypatch.setattr(grouped, "folds_query_groups", lambda device: True)
    folded, folded_lengths = _rounds(GREEDY, batched=True)
    assert folded_lengths == kept_lengths
    for one, other in zip(kept, folded, strict=True):
        assert [p.token_ids.tolist() for p in one] == [p.token_ids.tolist() for p in other]
