"""The target writes the final reply of each conversation; the earlier turns stay as given."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from transformers import PreTrainedModel, PreTrainedTokenizerFast
from transformers.generation.configuration_utils import CompileConfig

from trainer.data.schema import Conversation, Message
from trainer.data.tokenize import user_turn_prefix
from trainer.eagle import context_loss
from trainer.eagle.continuation import (
    Context,
    ContinuationResult,
    _EnoughRowsFinished,
    context_of,
    continue_conversations,
    generate_replies,
)
from trainer.eagle.features import TargetTeacher
from trainer.eagle.generation_features import collate_features
from trainer.eagle.ttt import teacher_positions
from trainer.models.tiny import build_tiny_target, build_tiny_tokenizer


@pytest.fixture(scope="module")
def tokenizer() -> PreTrainedTokenizerFast:
    return build_tiny_tokenizer()


def chat(*turns: tuple[str, str]) -> Conversation:
    return Conversation(messages=[Message(role, text) for role, text in turns], source="test:1")  # type: ignore[arg-type]


def test_context_ends_before_the_last_reply(tokenizer: PreTrainedTokenizerFast) -> None:
    conversation = chat(("user", "q1"), ("assistant", "a1"), ("user", "q2"), ("assistant", "a2"))
    context = context_of(conversation, tokenizer, max_prompt_tokens=1000)
    assert context is not None
    assert [m.content for m in context.messages] == ["q1", "a1", "q2"]
    rendered = tokenizer.decode(context.prompt_ids)
    assert rendered.endswith("<|im_start|>user\nq2<|im_end|>\n<|im_start|>assistant\n")
    # No reply recorded: the whole conversation is the context.
    assert context_of(chat(("user", "only")), tokenizer, max_prompt_tokens=1000) is not None


def test_long_context_loses_its_oldest_exchanges_but_keeps_the_system_prompt(
    tokenizer: PreTrainedTokenizerFast,
) -> None:
    conversation = chat(
        ("system", "be brief"),
        ("user", "x" * 60),
        ("assistant", "y" * 60),
        ("user", "last question"),
        ("assistant", "old answer"),
    )
    context = context_of(conversation, tokenizer, max_prompt_tokens=80)
    assert context is not None
    assert [m.role for m in context.messages] == ["system", "user"]
    assert context.messages[-1].content == "last question"
    assert len(context.prompt_ids) <= 80
    assert context_of(conversation, tokenizer, max_prompt_tokens=10) is None


def test_contexts_that_do_not_end_with_a_user_turn_are_skipped(tokenizer: PreTrainedTokenizerFast) -> None:
    assert context_of(chat(("assistant", "hello")), tokenizer, max_prompt_tokens=100) is None
    assert context_of(chat(("system", "s"), ("assistant", "hi")), tokenizer, max_prompt_tokens=100) is None


def test_replies_are_the_targets_greedy_continuations(
    tokenizer: PreTrainedTokenizerFast, tmp_path: Path
) -> None:
    target = build_tiny_target("Qwen2ForCausalLM", vocab_size=len(tokenizer))
    conversations = [
        chat(("user", "first question"), ("assistant", "human answer")),
        chat(("user", "hi"), ("assistant", "hello"), ("user", "second question here")),
        chat(("user", "q"), ("assistant", "a"), ("user", "third"), ("assistant", "replaced")),
    ]
    contexts = [context_of(c, tokenizer, max_prompt_tokens=200) for c in conversations]
    assert all(c is not None for c in contexts)
    done: list[int] = []
    result = continue_conversations(
        target, tokenizer, [c for c in contexts if c], max_new_tokens=6, batch_size=2, progress=done.append
    )
    # Counted as each row ends (continuous batching: a finished row's place is taken at once).
    assert done == [1, 2, 3]
    assert len(result.conversations) == 3
    assert not result.stopped
    assert [m.content for m in result.conversations[2].messages[:3]] == ["q", "a", "third"]
    replies = [c.messages[-1] for c in result.conversations]
    assert all(m.role == "assistant" for m in replies)
    # Greedy and batched like single prompts: the same reply as generating alone.
    alone = continue_conversations(target, tokenizer, [contexts[1]], max_new_tokens=6, batch_size=1)  # type: ignore[list-item]
    assert alone.conversations[0].messages[-1] == replies[1]
    assert result.generated_tokens >= 3


def test_should_stop_ends_between_batches(tokenizer: PreTrainedTokenizerFast) -> None:
    target = build_tiny_target("LlamaForCausalLM", vocab_size=len(tokenizer))
    contexts = [
        context_of(chat(("user", f"question {i}")), tokenizer, max_prompt_tokens=200) for i in range(5)
    ]
    calls: list[int] = []
    result = continue_conversations(
        target,
        tokenizer,
        [c for c in contexts if c],
        max_new_tokens=3,
        batch_size=2,
        should_stop=lambda: len(calls) >= 1,
        progress=calls.append,
    )
    assert result.stopped
    assert len(result.conversations) == 2


def test_samples_are_the_generated_ids_with_the_loss_on_the_reply_alone(
    tokenizer: PreTrainedTokenizerFast,
) -> None:
    target = build_tiny_target("LlamaForCausalLM", vocab_size=len(tokenizer))
    context = context_of(
        chat(("user", "q1"), ("assistant", "human words"), ("user", "q2")), tokenizer, max_prompt_tokens=200
    )
    assert context is not None
    result = continue_conversations(target, tokenizer, [context], max_new_tokens=5, batch_size=1)
    sample = result.samples[0]
    prompt = len(context.prompt_ids)
    assert sample.input_ids[:prompt] == context.prompt_ids
    # The earlier (human) assistant turn is context, never a loss position.
    assert sample.loss_mask == [0] * prompt + [1] * (len(sample.input_ids) - prompt)
    reply = sample.input_ids[prompt:]
    assert result.generated_tokens == len(reply) >= 1
    # The ids are exactly what greedy generation produced (no decode/re-tokenise round trip).
    generated = target.generate(  # type: ignore[operator]
        torch.tensor([context.prompt_ids]), do_sample=False, max_new_tokens=5, pad_token_id=0
    )[0, prompt:].tolist()
    assert reply == generated[: len(reply)]


@pytest.mark.parametrize("architecture", ["LlamaForCausalLM", "Qwen3ForCausalLM"])
def test_features_recorded_while_generating_equal_a_separate_target_pass(
    tokenizer: PreTrainedTokenizerFast, architecture: str
) -> None:
    target = build_tiny_target(architecture, vocab_size=len(tokenizer))
    contexts = [
        context_of(chat(("user", "a much longer first question here")), tokenizer, max_prompt_tokens=200),
        context_of(chat(("user", "hi")), tokenizer, max_prompt_tokens=200),
    ]
    aux = [1, 2, 3]
    result = continue_conversations(
        target,
        tokenizer,
        [c for c in contexts if c],
        max_new_tokens=6,
        batch_size=2,  # one left-padded batch: the short prompt's features start after its padding
        feature_layers=aux,
        feature_dtypes=(torch.float32, torch.float32),
    )
    for sample in result.samples:
        recorded = sample.features
        assert recorded is not None
        ids = torch.tensor([sample.input_ids])
        t2d = torch.ones(len(tokenizer), dtype=torch.bool)
        teacher = TargetTeacher(
            target, aux, draft_target_ids=torch.arange(len(tokenizer)), feature_dtype=torch.float32
        )
        needed = teacher_positions(torch.tensor([sample.loss_mask]))
        expected = teacher.features(ids, torch.ones_like(ids), needed=needed)
        # The last token is never fed back during generation, and no loss reads its features.
        torch.testing.assert_close(
            recorded.aux_hidden_states[:-1], expected.aux_hidden_states[0, :-1], atol=1e-4, rtol=1e-4
        )
        torch.testing.assert_close(
            recorded.final_hidden[:-1], expected.final_hidden[0, :-1], atol=1e-4, rtol=1e-4
        )
        assert torch.equal(recorded.argmax_ids, expected.argmax_ids[0])
        batch = collate_features([sample], [0], len(sample.input_ids) + 2)
        assert batch is not None
        assert batch.aux_hidden_states.shape[:2] == (1, len(sample.input_ids) + 2)
        assert torch.equal(
            teacher.teacher(batch, t2d).argmax_draft_id[0, : len(sample.input_ids)], recorded.argmax_ids
        )


def test_a_batch_ends_once_enough_rows_have_ended_their_reply() -> None:
    stop = 2
    criteria = _EnoughRowsFinished([stop], rows=4, fraction=0.75)
    step = torch.tensor([[5, stop], [5, 7], [5, 8], [5, 9]])
    assert not criteria(step, None).any()  # type: ignore[arg-type]
    # A row's end is remembered while the others keep generating.
    step = torch.tensor([[5, stop, 0], [5, 7, stop], [5, 8, 1], [5, 9, 1]])
    assert not criteria(step, None).any()  # type: ignore[arg-type]
    step = torch.tensor([[5, stop, 0, 0], [5, 7, stop, 0], [5, 8, 1, stop], [5, 9, 1, 1]])
    assert criteria(step, None).all()  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="finish_fraction"):
        _EnoughRowsFinished([stop], rows=4, fraction=0.0)


AUX_LAYERS = [1, 2, 3]


def _continued_with_context_loss(
    target: PreTrainedModel, tokenizer: PreTrainedTokenizerFast
) -> tuple[Context, ContinuationResult]:
    """One conversation with its own system prompt, continued with its context labelled."""
    conversation = chat(("system", "be brief"), ("user", "a question"), ("assistant", "x"), ("user", "more"))
    context = context_of(conversation, tokenizer, max_prompt_tokens=200)
    assert context is not None
    result = continue_conversations(
        target,
        tokenizer,
        [context],
        max_new_tokens=4,
        batch_size=1,
        feature_layers=AUX_LAYERS,
        feature_dtypes=(torch.float32, torch.float32),
        context_loss=True,
    )
    return context, result


def test_context_loss_labels_the_context_past_the_templates_opening(
    tokenizer: PreTrainedTokenizerFast,
) -> None:
    target = build_tiny_target("LlamaForCausalLM", vocab_size=len(tokenizer))
    aux = AUX_LAYERS
    context, result = _continued_with_context_loss(target, tokenizer)
    sample = result.samples[0]
    prompt = len(context.prompt_ids)
    # The template's fixed opening carries no loss; the rest does. This conversation has its own
    # system prompt, so only the opening's first tokens ("<|im_start|>system\n") are shared.
    opening = tokenizer(user_turn_prefix(tokenizer), add_special_tokens=False)["input_ids"]
    shared = next(i for i, (a, b) in enumerate(zip(context.prompt_ids, opening, strict=False)) if a != b)
    assert 0 < shared < prompt
    assert sample.loss_mask == [0] * shared + [1] * (len(sample.input_ids) - shared)
    # Every context position is labelled with the target's own greedy next token.
    ids = torch.tensor([sample.input_ids])
    teacher = TargetTeacher(
        target, aux, draft_target_ids=torch.arange(len(tokenizer)), feature_dtype=torch.float32
    )
    expected = teacher.features(ids, torch.ones_like(ids)).argmax_ids[0]
    assert sample.features is not None
    assert torch.equal(sample.features.argmax_ids[: len(sample.input_ids) - 1], expected[:-1])
    # Without it, the context is not learned.
    plain = continue_conversations(target, tokenizer, [context], max_new_tokens=4, batch_size=1)
    assert plain.samples[0].loss_mask[:prompt] == [0] * prompt
    # Without recorded features only the mask is set: the training pass labels those positions.
    unrecorded = continue_conversations(
        target, tokenizer, [context], max_new_tokens=4, batch_size=1, context_loss=True
    )
    assert unrecorded.samples[0].loss_mask == sample.loss_mask
    assert unrecorded.samples[0].features is None


class _CountingHead(torch.nn.Module):
    """The target's lm_head, recording how many positions each call labels."""

    def __init__(self, head: torch.nn.Linear) -> None:
        super().__init__()
        self.head = head
        self.weight = head.weight
        self.rows: list[int] = []

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        self.rows.append(hidden.shape[0])
        logits: torch.Tensor = self.head(hidden)
        return logits


def test_a_chunks_contexts_are_labelled_in_full_slabs_across_replies(
    tokenizer: PreTrainedTokenizerFast, monkeypatch: pytest.MonkeyPatch
) -> None:
    # One lm_head call per slab of positions, not one per reply (and one read-back): on a GPU a
    # chunk of 2,048 replies made 2,048 small calls and waited on each.
    target = build_tiny_target("LlamaForCausalLM", vocab_size=len(tokenizer))
    contexts = [
        context_of(
            chat(("user", "a question " * (1 + 2 * i)), ("assistant", "x"), ("user", "more")),
            tokenizer,
            max_prompt_tokens=200,
        )
        for i in range(3)
    ]
    assert all(context is not None for context in contexts)
    head = _CountingHead(target.get_output_embeddings())  # type: ignore[no-untyped-call]
    monkeypatch.setattr(context_loss, "output_head", lambda model: head)
    monkeypatch.setattr(context_loss, "LABEL_POSITIONS_PER_CALL", 7)
    result = continue_conversations(
        target,
        tokenizer,
        [context for context in contexts if context is not None],
        max_new_tokens=4,
        batch_size=3,
        feature_layers=AUX_LAYERS,
        feature_dtypes=(torch.float32, torch.float32),
        context_loss=True,
    )
    labelled = sum(len(context.prompt_ids) - 1 for context in contexts if context is not None)
    assert labelled > 3 * 7
    assert head.rows == [7] * (labelled // 7) + ([labelled % 7] if labelled % 7 else [])
    teacher = TargetTeacher(
        target, AUX_LAYERS, draft_target_ids=torch.arange(len(tokenizer)), feature_dtype=torch.float32
    )
    for context, sample in zip(contexts, result.samples, strict=True):
        assert context is not None
        assert sample.features is not None
        ids = torch.tensor([sample.input_ids])
        expected = teacher.features(ids, torch.ones_like(ids)).argmax_ids[0]
        last = len(context.prompt_ids) - 1
        assert torch.equal(sample.features.argmax_ids[:last], expected[:last])


class _HeadOnAnotherDevice(torch.nn.Module):
    """The target's lm_head as a GPU holds it: on another device than the recorded features,
    which are kept in host memory. The meta device stands in for the GPU; the head records
    where its input was and answers token 0 everywhere, on the host."""

    def __init__(self, head: torch.nn.Linear) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(head.weight.detach().to("meta"), requires_grad=False)
        self.input_devices: list[torch.device] = []

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        self.input_devices.append(hidden.device)
        return torch.zeros((hidden.shape[0], self.weight.shape[0]))


def test_context_labels_are_computed_on_the_lm_heads_device(
    tokenizer: PreTrainedTokenizerFast, monkeypatch: pytest.MonkeyPatch
) -> None:
    # On a GPU, a host tensor into the CUDA lm_head raises (tensors on different devices).
    target = build_tiny_target("LlamaForCausalLM", vocab_size=len(tokenizer))
    head = _HeadOnAnotherDevice(target.get_output_embeddings())  # type: ignore[no-untyped-call]
    monkeypatch.setattr(context_loss, "output_head", lambda model: head)
    context, result = _continued_with_context_loss(target, tokenizer)
    assert head.input_devices == [torch.device("meta")]
    features = result.samples[0].features
    assert features is not None
    assert features.argmax_ids.device.type == "cpu"
    assert not features.argmax_ids[: len(context.prompt_ids) - 1].any()


def test_fixed_batches_are_generated_without_compiling_the_forward(
    tokenizer: PreTrainedTokenizerFast, monkeypatch: pytest.MonkeyPatch
) -> None:
    # On a GPU, transformers' generate compiles the forward of a static-cache generation
    # ("reduce-overhead": CUDA graphs, recompiled per batch shape), and the recorder's hooks
    # would keep graph outputs the next step overwrites. Its device test is what this CPU run
    # imitates with _compile_all_devices.
    target = build_tiny_target("LlamaForCausalLM", vocab_size=len(tokenizer))
    compile_config = CompileConfig()
    compile_config._compile_all_devices = True  # type: ignore[assignment]
    target.generation_config.compile_config = compile_config

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("generate compiled the target's forward")

    monkeypatch.setattr(torch, "compile", refuse)
    replies = generate_replies(
        target,
        [[5, 6, 7], [8, 9]],
        stop_ids=[1],
        pad_id=0,
        max_new_tokens=3,
        temperature=0.0,
        top_p=1.0,
    )
    assert len(replies) == 2
