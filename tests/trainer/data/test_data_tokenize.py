"""Loss masks on assistant tokens, checked token by token on SmolLM2's ChatML template."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from transformers import PreTrainedTokenizerBase

from trainer.data import Conversation, Message
from trainer.data.tokenize import (
    ChatTemplateError,
    tokenize_conversation,
    tokenize_conversations,
    uses_generation_blocks,
)

SMOLLM_SYSTEM = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"

# SmolLM2's own template with {% generation %} around what the assistant produces.
CHATML_WITH_GENERATION = (
    "{% for message in messages %}"
    "{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\\n" + SMOLLM_SYSTEM + "<|im_end|>\\n' }}"
    "{% endif %}"
    "{% if message['role'] == 'assistant' %}"
    "{{ '<|im_start|>assistant\\n' }}"
    "{% generation %}{{ message['content'] + '<|im_end|>' }}{% endgeneration %}"
    "{{ '\\n' }}"
    "{% else %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)

TWO_TURNS = Conversation(
    messages=[
        Message("user", "Hi there"),
        Message("assistant", "Hello! How can I help?"),
        Message("user", "Tell me a joke"),
        Message("assistant", "No."),
    ],
    source="test:1",
)


def _pieces(tokenizer: PreTrainedTokenizerBase, ids: list[int]) -> list[str]:
    return [str(tokenizer.decode([i])) for i in ids]


def test_chatml_mask_token_by_token(smollm2_tokenizer: PreTrainedTokenizerBase) -> None:
    sample = tokenize_conversation(smollm2_tokenizer, TWO_TURNS, max_length=4096)
    pieces = _pieces(smollm2_tokenizer, sample.input_ids)
    masked = [p for p, bit in zip(pieces, sample.loss_mask, strict=True) if bit]
    # Exactly the two answers and their <|im_end|>; no header, no newline after <|im_end|>.
    assert masked == ["Hello", "!", " How", " can", " I", " help", "?", "<|im_end|>", "No", ".", "<|im_end|>"]

    expected_text = (
        f"<|im_start|>system\n{SMOLLM_SYSTEM}<|im_end|>\n"
        "<|im_start|>user\nHi there<|im_end|>\n"
        "<|im_start|>assistant\nHello! How can I help?<|im_end|>\n"
        "<|im_start|>user\nTell me a joke<|im_end|>\n"
        "<|im_start|>assistant\nNo.<|im_end|>\n"
    )
    assert "".join(pieces) == expected_text
    # Each masked run starts right after "<|im_start|>assistant\n" and ends on <|im_end|>.
    runs: list[tuple[int, int]] = []
    for index, bit in enumerate(sample.loss_mask):
        if bit and (index == 0 or not sample.loss_mask[index - 1]):
            runs.append((index, index))
        if bit:
            runs[-1] = (runs[-1][0], index)
    assert len(runs) == 2
    for start, end in runs:
        assert "".join(pieces[start - 4 : start]) == "<|im_start|>assistant\n"
        assert pieces[end] == "<|im_end|>"
        assert pieces[end + 1] == "\n"
    rendered: Any = smollm2_tokenizer.apply_chat_template(TWO_TURNS.as_dicts(), tokenize=True)
    assert sample.input_ids == rendered["input_ids"]
    assert not sample.truncated


def test_generation_block_template_gives_the_same_mask(smollm2_tokenizer: PreTrainedTokenizerBase) -> None:
    assert not uses_generation_blocks(smollm2_tokenizer)
    marked = copy.deepcopy(smollm2_tokenizer)
    marked.chat_template = CHATML_WITH_GENERATION
    assert uses_generation_blocks(marked)
    conversation = Conversation(
        messages=[
            Message("system", "Be terse."),
            Message("user", "Name three primes."),
            Message("assistant", "2, 3, 5\n"),
            Message("user", "And the next?"),
            Message("assistant", "7"),
        ]
    )
    by_generation = tokenize_conversation(marked, conversation, max_length=512)
    by_prefixes = tokenize_conversation(smollm2_tokenizer, conversation, max_length=512)
    assert by_generation.input_ids == by_prefixes.input_ids
    assert by_generation.loss_mask == by_prefixes.loss_mask
    assert by_prefixes.num_masked == len(smollm2_tokenizer("2, 3, 5\n7")["input_ids"]) + 2


def test_conversation_starting_with_the_assistant_uses_the_content_search(
    smollm2_tokenizer: PreTrainedTokenizerBase,
) -> None:
    # With no leading system turn the template injects one, so the empty prefix rendered
    # with a generation prompt is not a prefix of the whole text.
    conversation = Conversation([Message("assistant", "Welcome!"), Message("user", "Thanks")])
    sample = tokenize_conversation(smollm2_tokenizer, conversation, max_length=512)
    masked = [
        p
        for p, bit in zip(_pieces(smollm2_tokenizer, sample.input_ids), sample.loss_mask, strict=True)
        if bit
    ]
    assert masked == ["Welcome", "!", "<|im_end|>"]


def test_template_that_rewrites_earlier_turns_falls_back_to_content_search(
    smollm2_tokenizer: PreTrainedTokenizerBase,
) -> None:
    # Like reasoning templates that drop old thoughts: the last assistant turn is shown
    # with a marker earlier turns lose, so prefixes are not prefixes of the full text.
    rewriting = copy.deepcopy(smollm2_tokenizer)
    rewriting.chat_template = (
        "{% for message in messages %}"
        "{{ '<|im_start|>' + message['role'] + '\\n' }}"
        "{% if message['role'] == 'assistant' and loop.last %}{{ '[final] ' }}{% endif %}"
        "{{ message['content'] | trim }}{{ '<|im_end|>\\n' }}"
        "{% endfor %}"
        "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
    )
    conversation = Conversation(
        [
            Message("user", "a"),
            Message("assistant", "  first answer  "),
            Message("user", "b"),
            Message("assistant", "second answer"),
        ]
    )
    sample = tokenize_conversation(rewriting, conversation, max_length=512)
    masked = [p for p, bit in zip(_pieces(rewriting, sample.input_ids), sample.loss_mask, strict=True) if bit]
    # The prefix-diff covers "[final] " on the last turn: the model writes it after the header.
    assert "".join(masked) == "first answer<|im_end|>[final] second answer<|im_end|>"


def test_truncation_keeps_the_mask_aligned(smollm2_tokenizer: PreTrainedTokenizerBase) -> None:
    full = tokenize_conversation(smollm2_tokenizer, TWO_TURNS, max_length=4096)
    cut = tokenize_conversation(smollm2_tokenizer, TWO_TURNS, max_length=40)
    assert cut.truncated
    assert len(cut.input_ids) == len(cut.loss_mask) == 40
    assert cut.input_ids == full.input_ids[:40]
    assert cut.loss_mask == full.loss_mask[:40]


def test_tokenize_conversations_drops_and_counts_samples_without_targets(
    smollm2_tokenizer: PreTrainedTokenizerBase,
) -> None:
    prompt_only = Conversation([Message("user", "Anyone there?")], source="p:1")
    answer_past_the_limit = Conversation(
        [Message("user", "word " * 200), Message("assistant", "late answer")], source="p:2"
    )
    updates: list[tuple[int, int]] = []
    result = tokenize_conversations(
        smollm2_tokenizer,
        [TWO_TURNS, prompt_only, answer_past_the_limit],
        max_length=100,
        progress=lambda done, total: updates.append((done, total)),
    )
    assert updates == [(3, 3)]
    assert [s.source for s in result] == ["test:1"]
    assert result.dropped_no_masked_tokens == 2
    assert result.dropped_template_errors == 0


def test_template_errors_are_counted_and_a_missing_template_is_an_error(
    smollm2_tokenizer: PreTrainedTokenizerBase,
) -> None:
    strict = copy.deepcopy(smollm2_tokenizer)
    strict.chat_template = (
        "{% for m in messages %}{% if m['role'] == 'system' %}"
        "{{ raise_exception('System role not supported') }}{% endif %}"
        "{{ '<|im_start|>' + m['role'] + '\\n' + m['content'] + '<|im_end|>\\n' }}{% endfor %}"
    )
    with_system = Conversation(
        [Message("system", "s"), Message("user", "u"), Message("assistant", "a")], "f:7"
    )
    result = tokenize_conversations(strict, [with_system, TWO_TURNS], max_length=256)
    assert len(result) == 1
    assert result.dropped_template_errors == 1
    assert result.first_error is not None
    assert result.first_error.startswith("f:7: chat template failed: System role not supported")

    bare = copy.deepcopy(smollm2_tokenizer)
    bare.chat_template = None
    with pytest.raises(ChatTemplateError, match="has no chat template"):
        tokenize_conversation(bare, TWO_TURNS, max_length=10)
    with pytest.raises(ValueError, match="max_length must be at least 1"):
        tokenize_conversation(smollm2_tokenizer, TWO_TURNS, max_length=0)
