"""Self-distillation on a tiny random Llama with SmolLM2's tokenizer."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from transformers import LlamaForCausalLM, PreTrainedTokenizerBase

from trainer.data import Conversation, Message
from trainer.data.regenerate import regenerate_conversations

CONVERSATIONS = [
    Conversation(
        [
            Message("user", "What is 2+2?"),
            Message("assistant", "five"),
            Message("user", "Sure?"),
            Message("assistant", "yes"),
        ],
        source="f:1",
    ),
    Conversation([Message("system", "Be kind."), Message("user", "Name a color.")], source="f:2"),
    Conversation([Message("user", "Hi"), Message("assistant", "Hello")], source="f:3"),
]


def _greedy_answer(
    model: LlamaForCausalLM, tokenizer: PreTrainedTokenizerBase, messages: list[Message], max_new_tokens: int
) -> str:
    text: Any = tokenizer.apply_chat_template(
        [{"role": m.role, "content": m.content} for m in messages], tokenize=False, add_generation_prompt=True
    )
    ids = tokenizer(text, add_special_tokens=False, return_tensors="pt")["input_ids"]
    with torch.inference_mode():
        out = model.generate(  # type: ignore[misc]  # transformers annotates self as a Protocol
            ids, max_new_tokens=max_new_tokens, do_sample=False, pad_token_id=tokenizer.pad_token_id
        )
    new = out[0, ids.shape[1] :].tolist()
    if tokenizer.eos_token_id in new:
        new = new[: new.index(tokenizer.eos_token_id)]
    return str(tokenizer.decode(new, skip_special_tokens=True))


def test_greedy_replaces_every_answer_conditioned_on_the_regenerated_prefix(
    tiny_llama: LlamaForCausalLM, smollm2_tokenizer: PreTrainedTokenizerBase
) -> None:
    updates: list[tuple[int, int]] = []
    result = regenerate_conversations(
        tiny_llama,
        smollm2_tokenizer,
        CONVERSATIONS,
        max_new_tokens=6,
        batch_size=1,
        progress=lambda done, total: updates.append((done, total)),
    )
    assert result.mode == "greedy"
    assert [c.source for c in result.conversations] == ["f:1", "f:2", "f:3"]
    assert [[m.role for m in c.messages] for c in result.conversations] == [
        ["user", "assistant", "user", "assistant"],
        ["system", "user", "assistant"],  # no answer recorded: one is generated
        ["user", "assistant"],
    ]
    first = result.conversations[0].messages
    # User turns are untouched; each answer is what the model itself says given the prefix so far.
    assert (first[0].content, first[2].content) == ("What is 2+2?", "Sure?")
    assert first[1].content == _greedy_answer(tiny_llama, smollm2_tokenizer, first[:1], 6)
    assert first[3].content == _greedy_answer(tiny_llama, smollm2_tokenizer, first[:3], 6)
    assert first[1].content != "five"
    assert updates == [(1, 4), (2, 4), (3, 4), (4, 4)]
    assert result.responses == 4
    assert 4 <= result.generated_tokens <= 4 * 6
    assert result.seconds > 0


def test_greedy_is_deterministic(
    tiny_llama: LlamaForCausalLM, smollm2_tokenizer: PreTrainedTokenizerBase
) -> None:
    one = regenerate_conversations(
        tiny_llama, smollm2_tokenizer, CONVERSATIONS, max_new_tokens=5, batch_size=3
    )
    two = regenerate_conversations(
        tiny_llama, smollm2_tokenizer, CONVERSATIONS, max_new_tokens=5, batch_size=3
    )
    assert one.conversations == two.conversations
    assert one.generated_tokens == two.generated_tokens


def test_sampling_follows_the_seed_and_is_recorded(
    tiny_llama: LlamaForCausalLM, smollm2_tokenizer: PreTrainedTokenizerBase
) -> None:
    def run(seed: int) -> list[Conversation]:
        result = regenerate_conversations(
            tiny_llama,
            smollm2_tokenizer,
            CONVERSATIONS,
            temperature=0.8,
            top_p=0.9,
            max_new_tokens=5,
            seed=seed,
        )
        assert result.mode == "sampled(temperature=0.8, top_p=0.9)"
        return result.conversations

    caller_state = torch.get_rng_state()
    assert run(1) == run(1)
    assert run(1) != run(2)
    assert torch.equal(torch.get_rng_state(), caller_state)  # the caller's random stream is untouched


def test_should_stop_returns_only_finished_conversations(
    tiny_llama: LlamaForCausalLM, smollm2_tokenizer: PreTrainedTokenizerBase
) -> None:
    calls = {"n": 0}

    def stop_after_two_batches() -> bool:
        calls["n"] += 1
        return calls["n"] > 2

    result = regenerate_conversations(
        tiny_llama,
        smollm2_tokenizer,
        CONVERSATIONS,
        max_new_tokens=3,
        batch_size=1,
        should_stop=stop_after_two_batches,
    )
    assert result.stopped
    # Two responses: both of f:1's answers; f:2 and f:3 were never started.
    assert [c.source for c in result.conversations] == ["f:1"]
    assert result.responses == 2


def test_rejects_bad_arguments(
    tiny_llama: LlamaForCausalLM, smollm2_tokenizer: PreTrainedTokenizerBase
) -> None:
    with pytest.raises(ValueError, match="temperature must be >= 0"):
        regenerate_conversations(tiny_llama, smollm2_tokenizer, CONVERSATIONS, temperature=-1)
    with pytest.raises(ValueError, match=r"top_p must be in \(0, 1\]"):
        regenerate_conversations(tiny_llama, smollm2_tokenizer, CONVERSATIONS, top_p=0)
    with pytest.raises(ValueError, match="leaves no room"):
        regenerate_conversations(tiny_llama, smollm2_tokenizer, CONVERSATIONS, max_new_tokens=512)
    with pytest.raises(ValueError, match="f:9: no user or assistant turn"):
        regenerate_conversations(
            tiny_llama, smollm2_tokenizer, [Conversation([Message("system", "s")], "f:9")]
        )
