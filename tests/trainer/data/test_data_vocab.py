"""Draft vocabulary: ranking, filling, the d2t/t2d mappings and coverage."""

from __future__ import annotations

import pytest
import torch
from transformers import PreTrainedTokenizerBase

from trainer.data import Conversation, Message
from trainer.data.tokenize import TokenizedConversation, tokenize_conversations
from trainer.data.vocab import build_draft_vocab


def _sample(ids: list[int], mask: list[int]) -> TokenizedConversation:
    return TokenizedConversation(input_ids=ids, loss_mask=mask, source="s")


def test_ranks_masked_tokens_only_with_ties_to_the_lower_id() -> None:
    # Unmasked 9 is the most frequent token overall but must not outrank masked ones.
    samples = [
        _sample([9, 9, 9, 9, 4, 4, 6, 6, 2], [0, 0, 0, 0, 1, 1, 1, 1, 1]),
        _sample([9, 7, 2], [0, 1, 1]),
    ]
    vocab = build_draft_vocab(samples, draft_vocab_size=3, target_vocab_size=10)
    # Counts among masked: 2->2, 4->2, 6->2, 7->1. Top three by count, ties to lower id: 2, 4, 6.
    assert vocab.target_ids.tolist() == [2, 4, 6]
    assert vocab.d2t.tolist() == [2, 3, 4]
    assert vocab.d2t.dtype == torch.int64
    assert vocab.t2d.dtype == torch.bool
    assert vocab.t2d.nonzero().flatten().tolist() == [2, 4, 6]
    assert vocab.masked_tokens == 7
    assert vocab.coverage == pytest.approx(6 / 7)


def test_fills_with_unmasked_tokens_then_lowest_ids_to_the_exact_size() -> None:
    samples = [_sample([8, 8, 8, 5, 5, 3, 1], [0, 0, 0, 0, 0, 1, 1])]
    vocab = build_draft_vocab(samples, draft_vocab_size=6, target_vocab_size=12)
    # Masked: 1, 3. Then unmasked by frequency: 8, 5. Then lowest unused ids: 0, 2.
    assert vocab.target_ids.tolist() == [0, 1, 2, 3, 5, 8]
    assert vocab.draft_vocab_size == 6
    assert int(vocab.t2d.sum()) == 6
    assert vocab.coverage == 1.0


def test_mapping_round_trips_between_id_spaces() -> None:
    generator = torch.Generator().manual_seed(0)
    ids = torch.randint(0, 500, (2000,), generator=generator).tolist()
    mask = (torch.rand(2000, generator=generator) > 0.3).long().tolist()
    vocab = build_draft_vocab([_sample(ids, mask)], draft_vocab_size=64, target_vocab_size=500)
    draft_ids = torch.arange(64)
    target_ids = draft_ids + vocab.d2t[draft_ids]
    assert torch.equal(target_ids, vocab.t2d.nonzero().flatten())
    assert bool((target_ids[1:] > target_ids[:-1]).all())
    assert vocab.t2d.numel() == 500


def test_on_real_tokenised_data(smollm2_tokenizer: PreTrainedTokenizerBase) -> None:
    conversations = [
        Conversation([Message("user", f"Count to {n}"), Message("assistant", ", ".join(map(str, range(n))))])
        for n in range(1, 30)
    ]
    samples = tokenize_conversations(smollm2_tokenizer, conversations, max_length=512)
    vocab = build_draft_vocab(samples, draft_vocab_size=256, target_vocab_size=len(smollm2_tokenizer))
    im_end = smollm2_tokenizer.convert_tokens_to_ids("<|im_end|>")
    assert bool(vocab.t2d[im_end])  # every answer ends with it
    assert vocab.coverage == 1.0  # few distinct answer tokens: all fit


def test_validates_sizes_and_ids() -> None:
    sample = _sample([1, 2], [1, 1])
    with pytest.raises(
        ValueError, match="draft_vocab_size must be between 1 and the target vocabulary size 10"
    ):
        build_draft_vocab([sample], draft_vocab_size=11, target_vocab_size=10)
    with pytest.raises(ValueError, match="token id 12 is outside the target vocabulary"):
        build_draft_vocab([_sample([12], [1])], draft_vocab_size=2, target_vocab_size=10)
    with pytest.raises(ValueError, match="no loss-masked tokens"):
        build_draft_vocab([_sample([1, 2], [0, 0])], draft_vocab_size=2, target_vocab_size=10)
    with pytest.raises(ValueError, match="differ in length"):
        build_draft_vocab([_sample([1, 2], [1])], draft_vocab_size=2, target_vocab_size=10)
