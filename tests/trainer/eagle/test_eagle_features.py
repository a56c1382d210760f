"""The target's training signal: cached features and the teacher restricted to the draft vocabulary."""

from __future__ import annotations

import pytest
import torch

from engine.capture import SUPPORTED_ARCHITECTURES
from trainer.eagle.features import FeatureCache, TargetFeatures, TargetTeacher, _compact
from trainer.eagle.ttt import teacher_positions, teacher_targets
from trainer.models.tiny import build_tiny_target

AUX = [2, 4, 5]


def draft_vocab(vocab: int, size: int, seed: int = 0) -> torch.Tensor:
    kept = torch.randperm(vocab, generator=torch.Generator().manual_seed(seed))[:size]
    t2d = torch.zeros(vocab, dtype=torch.bool)
    t2d[kept] = True
    return t2d


@pytest.mark.parametrize("architecture", SUPPORTED_ARCHITECTURES)
def test_float32_teacher_equals_full_logits_restricted_to_the_draft_vocab(architecture: str) -> None:
    target = build_tiny_target(architecture, vocab_size=300)
    t2d = draft_vocab(300, 60)
    # Include the target's most likely tokens so the argmax-in-vocabulary mask has hits.
    input_ids = torch.randint(3, 300, (2, 20))
    attention_mask = torch.ones_like(input_ids)
    teacher = TargetTeacher(
        target, AUX, draft_target_ids=torch.nonzero(t2d).flatten(), feature_dtype=torch.float32
    )
    features = teacher.features(input_ids, attention_mask)
    with torch.no_grad():
        out = target(input_ids, output_hidden_states=True)
    expected = teacher_targets(out.logits, t2d)
    actual = teacher.teacher(features, t2d)
    torch.testing.assert_close(actual.probs, expected.probs, atol=1e-5, rtol=1e-4)
    assert torch.equal(actual.argmax_draft_id, expected.argmax_draft_id)
    assert torch.equal(features.argmax_ids, out.logits.argmax(-1))
    torch.testing.assert_close(features.aux_hidden_states, torch.cat([out.hidden_states[i] for i in AUX], -1))


def test_teacher_only_computes_the_positions_the_loss_reads() -> None:
    target = build_tiny_target("LlamaForCausalLM", vocab_size=300)
    t2d = draft_vocab(300, 50)
    teacher = TargetTeacher(
        target, AUX, draft_target_ids=torch.nonzero(t2d).flatten(), feature_dtype=torch.float32
    )
    input_ids = torch.randint(3, 300, (1, 12))
    features = teacher.features(input_ids, torch.ones_like(input_ids))
    loss_mask = torch.tensor([[0, 0, 0, 0, 0, 1, 1, 1, 0, 0, 1, 1]])
    needed = teacher_positions(loss_mask)
    assert needed.tolist() == [
        [False, False, False, False, True, True, True, False, False, True, True, False]
    ]
    sparse = teacher.teacher(features, t2d, needed=needed)
    dense = teacher.teacher(features, t2d)
    assert torch.equal(sparse.probs[needed], dense.probs[needed])
    assert not sparse.probs[~needed].any()
    assert torch.equal(sparse.argmax_draft_id, dense.argmax_draft_id)
    # The full-vocabulary argmax, too, runs only where the loss reads it.
    partial = teacher.features(input_ids, torch.ones_like(input_ids), needed=needed)
    assert torch.equal(partial.argmax_ids[needed], features.argmax_ids[needed])
    assert not partial.argmax_ids[~needed].any()
    torch.testing.assert_close(partial.aux_hidden_states, features.aux_hidden_states)


def test_cached_features_are_compact_and_bfloat16_autocast_stays_close() -> None:
    target = build_tiny_target("Qwen2ForCausalLM", vocab_size=300)
    t2d = draft_vocab(300, 60)
    ids = torch.nonzero(t2d).flatten()
    input_ids = torch.randint(3, 300, (2, 16))
    exact = TargetTeacher(target, AUX, draft_target_ids=ids, feature_dtype=torch.float32).features(
        input_ids, torch.ones_like(input_ids)
    )
    fast = TargetTeacher(target, AUX, draft_target_ids=ids, autocast_bf16=True).features(
        input_ids, torch.ones_like(input_ids)
    )
    assert fast.aux_hidden_states.dtype == torch.bfloat16
    assert fast.final_hidden.dtype == torch.float16
    assert fast.nbytes < exact.nbytes / 1.9
    scale = exact.aux_hidden_states.abs().mean()
    assert (fast.aux_hidden_states.float() - exact.aux_hidden_states).abs().mean() < 0.05 * scale
    # The greedy next token rarely changes under bf16 matmuls.
    assert (fast.argmax_ids == exact.argmax_ids).float().mean() > 0.9


def test_values_beyond_float16_range_are_kept_in_float32() -> None:
    huge = torch.tensor([1.0, 1e6])
    assert _compact(huge, torch.float16).dtype == torch.float32
    assert _compact(torch.tensor([1.0, 2.0]), torch.float16).dtype == torch.float16


def _features(tokens: int) -> TargetFeatures:
    return TargetFeatures(
        aux_hidden_states=torch.zeros(1, tokens, 12),
        final_hidden=torch.zeros(1, tokens, 4),
        argmax_ids=torch.zeros(1, tokens, dtype=torch.long),
    )


def test_feature_cache_keeps_what_fits() -> None:
    one = _features(10)  # 10 * (12 + 4) * 4 + 10 * 8 = 720 bytes
    cache = FeatureCache(max_bytes=1500)
    assert cache.put("a", one)
    assert cache.put("b", one)
    assert not cache.put("c", one)
    assert "a" in cache
    assert "c" not in cache
    assert cache.get("b") is one
    assert cache.get("c") is None
    assert cache.bytes == 2 * one.nbytes == 1440
    assert not FeatureCache(max_bytes=0).put("a", one)
