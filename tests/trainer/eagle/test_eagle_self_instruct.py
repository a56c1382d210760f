"""Self-instruct: the target writes user prompts; broken, repeated and looping ones are dropped."""

from __future__ import annotations

import random
import typing
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from trainer.config import TrainConfig
from trainer.data.schema import Conversation, Message
from trainer.data.tokenize import render_chat, user_turn_prefix
from trainer.device import bf16_matmuls_native
from trainer.eagle.data import prepare_data, with_self_instruct
from trainer.eagle.distilled import generation_settings
from trainer.eagle.prepared import DataStats
from trainer.eagle.prompt_openings import (
    CHAT_OPENINGS,
    CHAT_SHARE,
    OPENINGS_BY_MODE,
    TASK_OPENINGS,
    draw_openings,
    openings_for,
    task_openings,
)
from trainer.eagle.self_instruct import SOURCE, SelfInstructResult, drop_reason, synthesize_prompts
from trainer.models.tiny import build_tiny_target, build_tiny_tokenizer


def test_the_prefix_is_the_template_up_to_where_the_user_writes() -> None:
    tokenizer = build_tiny_tokenizer()
    prefix = user_turn_prefix(tokenizer)
    assert prefix.endswith("<|im_start|>user\n")
    rendered = render_chat(tokenizer, [{"role": "user", "content": "hello"}], add_generation_prompt=False)
    assert rendered.startswith(prefix + "hello")


@pytest.mark.parametrize(
    ("text", "cut", "reason"),
    [
        ("How do I bake rye bread at home?", True, "truncated"),
        ("  ", False, "empty"),
        ("Hi there", False, "empty"),
        ("Tell me more. Tell me more. Tell me more. Tell me more.", False, "looping"),
        ("What is this?" + "!" * 20, False, "looping"),
    ],
)
def test_prompts_no_user_sends_are_dropped_with_their_reason(text: str, cut: bool, reason: str) -> None:
    assert drop_reason(text, cut=cut, seen=set()) == reason


def test_a_prompt_is_kept_once_whatever_its_case_and_spacing() -> None:
    seen: set[str] = set()
    assert drop_reason("How do I bake rye bread?", cut=False, seen=seen) is None
    assert drop_reason("how do I  bake rye\nbread?", cut=False, seen=seen) == "duplicate"


def test_an_opening_the_target_did_not_continue_is_dropped_as_empty() -> None:
    opening = "Write a Python function that"
    assert drop_reason(opening, cut=False, seen=set(), opening=opening) == "empty"
    assert drop_reason(opening + " adds two numbers.", cut=False, seen=set(), opening=opening) is None


def test_task_openings_cover_many_kinds_and_leave_some_prompts_open() -> None:
    kinds = {kind for kind, _ in TASK_OPENINGS}
    assert {"code", "math", "writing", "free"} <= kinds
    openings = task_openings()
    # The open share keeps the model's own choices; no single kind dominates.
    assert 0.1 < openings.count("") / len(openings) < 0.3
    assert all(len(block) / len(openings) <= 0.2 for _, block in TASK_OPENINGS)
    drawn = draw_openings(openings, 400, random.Random(0))
    assert len(set(drawn)) > len(set(openings)) * 0.8
    assert draw_openings((), 3, random.Random(0)) == ["", "", ""]


def test_tasks_and_chat_opens_a_third_of_prompts_like_conversation_and_keeps_every_task() -> None:
    mixed = openings_for("tasks_and_chat")
    chat_share = sum(opening in CHAT_OPENINGS for opening in mixed) / len(mixed)
    assert abs(chat_share - CHAT_SHARE) < 0.05
    assert set(task_openings()) | set(CHAT_OPENINGS) == set(mixed)
    # Task kinds keep their weights relative to each other.
    tasks = task_openings()
    assert mixed.count("") / mixed.count("Solve for x:") == tasks.count("") / tasks.count("Solve for x:")
    assert openings_for("tasks") == tasks
    assert openings_for("none") == []
    with pytest.raises(ValueError, match="unknown self-instruct openings 'small-talk'"):
        openings_for("small-talk")


def test_chat_opens_every_prompt_like_conversation() -> None:
    chat = openings_for("chat")
    assert sorted(chat) == sorted(CHAT_OPENINGS)
    assert not set(chat) & set(task_openings())


def test_every_mode_the_config_accepts_has_its_openings() -> None:
    accepted = typing.get_args(TrainConfig.model_fields["self_instruct_openings"].annotation)
    assert set(accepted) == set(OPENINGS_BY_MODE)


def test_the_openings_mode_is_part_of_the_distillation_cache_key() -> None:
    # A cache written with one mix of prompts must not answer a run that asks for another.
    tasks = TrainConfig(
        model_dir=Path("m"),
        out_dir=Path("run"),
        regenerate=True,
        self_instruct_conversations=8,
        self_instruct_openings="tasks",
    )
    mixed = tasks.model_copy(update={"self_instruct_openings": "tasks_and_chat"})
    assert generation_settings(tasks) != generation_settings(mixed)


def test_greedy_sampling_is_refused() -> None:
    with pytest.raises(ValueError, match="temperature > 0"):
        synthesize_prompts(None, build_tiny_tokenizer(), 4, temperature=0.0)  # type: ignore[arg-type]


@pytest.mark.slow
def test_smollm2_writes_distinct_user_prompts_that_distillation_answers(
    smollm2_dir: Path, tmp_path: Path
) -> None:
    tokenizer = AutoTokenizer.from_pretrained(smollm2_dir)
    # The dtype a job's generator takes here: bf16 only where the CPU multiplies it natively
    # (on an AVX2-only CPU bf16 ran this test in 110 s, emulated).
    dtype = torch.bfloat16 if bf16_matmuls_native(torch.device("cpu")) else torch.float32
    model = AutoModelForCausalLM.from_pretrained(smollm2_dir, dtype=dtype)
    torch.manual_seed(0)
    result = synthesize_prompts(model, tokenizer, 6, max_prompt_tokens=48, batch_size=8)
    assert 0 < len(result.conversations) <= 6
    assert result.generated == len(result.conversations) + sum(result.dropped.values())
    texts = [c.messages[0].content for c in result.conversations]
    assert len(set(texts)) == len(texts)
    assert all(c.source == SOURCE and [m.role for m in c.messages] == ["user"] for c in result.conversations)
    assert all(len(text.split()) >= 3 for text in texts)

    # With task openings each kept prompt begins with an opening from the list and goes on.
    torch.manual_seed(0)
    opened = synthesize_prompts(
        model, tokenizer, 6, max_prompt_tokens=48, batch_size=8, openings=["Write a Python function that"]
    )
    assert opened.opened == len(opened.conversations) > 0
    for conversation in opened.conversations:
        text = conversation.messages[0].content
        assert text.startswith("Write a Python function that")
        assert len(text.split()) > 5
    assert opened.summary(temperature=1.0, top_p=0.95, max_prompt_tokens=48, openings="tasks")[
        "kept_with_opening"
    ] == len(opened.conversations)

    # Without any data file: the target's own prompts, answered by the target, are the data.
    config = TrainConfig(
        model_dir=smollm2_dir,
        out_dir=tmp_path / "run",
        regenerate=True,
        self_instruct_conversations=4,
        self_instruct_max_prompt_tokens=48,
        regenerate_max_new_tokens=12,
        regenerate_batch_size=8,
        eval_fraction=0.0,
    )
    stages: list[str] = []
    data = prepare_data(
        config,
        model,
        tokenizer,
        report=lambda stage, done, total: stages.append(stage),
        should_stop=lambda: False,
        regenerate_deadline=None,
    )
    assert data.stats.self_instruct is not None
    kept = data.stats.self_instruct["kept"]
    assert isinstance(kept, int)
    assert 0 < kept <= 4
    assert data.stats.self_instruct["temperature"] == 1.0
    assert data.stats.regenerated_conversations == kept
    assert len(data.train) == kept
    assert all(sample.source == SOURCE and sample.num_masked > 0 for sample in data.train)
    assert "writing_prompts" in stages
    assert stages.index("writing_prompts") < stages.index("regenerating")


def test_a_config_needs_data_or_self_instruct_and_self_instruct_needs_regeneration(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="no training data"):
        TrainConfig(model_dir=tmp_path, out_dir=tmp_path, regenerate=False)
    with pytest.raises(ValueError, match="self_instruct_conversations needs regenerate"):
        TrainConfig(model_dir=tmp_path, out_dir=tmp_path, self_instruct_conversations=10, regenerate=False)


def test_the_default_recipe_distils_and_writes_prompts_for_its_budget_when_there_is_no_data(
    tmp_path: Path,
) -> None:
    data = tmp_path / "chats.jsonl"
    without_data = TrainConfig(model_dir=tmp_path, out_dir=tmp_path, time_budget_minutes=30)
    assert (without_data.regenerate, without_data.regenerate_max_new_tokens) == (True, 128)
    assert without_data.self_instruct_conversations == 1000
    assert (
        TrainConfig(model_dir=tmp_path, out_dir=tmp_path, time_budget_minutes=15).self_instruct_conversations
        == 500
    )
    assert TrainConfig(model_dir=tmp_path, out_dir=tmp_path).self_instruct_conversations == 1000
    # The user's own data is trained on as it is asked, regenerated, with no prompts mixed in.
    with_data = TrainConfig(model_dir=tmp_path, out_dir=tmp_path, data_paths=[data], time_budget_minutes=30)
    assert (with_data.regenerate, with_data.self_instruct_conversations) == (True, 0)
    explicit = TrainConfig(model_dir=tmp_path, out_dir=tmp_path, self_instruct_conversations=7)
    assert explicit.self_instruct_conversations == 7


def test_the_targets_own_prompts_are_distilled_before_the_data(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Writing the prompts was paid for: a budget-limited distillation answers them first."""
    written = [Conversation([Message("user", f"Write a haiku about {n}.")], source=SOURCE) for n in range(3)]
    data = [Conversation([Message("user", f"hi {n}"), Message("assistant", "hello")]) for n in range(50)]

    def fake_synthesize(*args: object, **kwargs: object) -> SelfInstructResult:
        return SelfInstructResult(conversations=list(written), generated=3)

    monkeypatch.setattr("trainer.eagle.prompt_stream.synthesize_prompts", fake_synthesize)
    config = TrainConfig(
        model_dir=tmp_path, out_dir=tmp_path, data_paths=[tmp_path / "d.jsonl"], self_instruct_conversations=3
    )
    order = with_self_instruct(
        config,
        build_tiny_target("LlamaForCausalLM", vocab_size=259),
        build_tiny_tokenizer(),
        data,
        DataStats(),
        report=lambda stage, done, total: None,
        should_stop=lambda: False,
        answered=frozenset(),
    )
    assert order == [*written, *data]


def _prompt_writing_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, deadline: float | None
) -> tuple[list[Conversation], DataStats, list[int]]:
    """A run asked for 50 prompts whose writer costs 1 s a prompt and whose distillation 3 s a
    reply, on a fake clock; chunks (and so rounds of prompts) of 8. Returns the prompts
    written, the run's stats, and the size of every round asked of the writer."""
    now = [0.0]
    written: list[Conversation] = []
    rounds: list[int] = []

    def one_second_a_prompt(
        *args: object, should_stop: Callable[[], bool], progress: Callable[[int], None], **kwargs: object
    ) -> SelfInstructResult:
        count = args[2]
        assert isinstance(count, int)
        rounds.append(count)
        result = SelfInstructResult(conversations=[])
        while len(result.conversations) < count and not should_stop():
            now[0] += 1.0
            prompt = Conversation([Message("user", f"Name a prime above {len(written)}.")], source=SOURCE)
            written.append(prompt)
            result.conversations.append(prompt)
            result.generated += 1
            progress(len(result.conversations))
        result.stopped = len(result.conversations) < count
        return result

    replies = [0]

    def three_seconds_a_reply(stage: str, done: int, total: int) -> None:
        if stage == "regenerating" and done > replies[0]:
            now[0] += 3.0 * (done - replies[0])
            replies[0] = done

    monkeypatch.setattr("trainer.eagle.prompt_stream.synthesize_prompts", one_second_a_prompt)
    config = TrainConfig(
        model_dir=tmp_path,
        out_dir=tmp_path,
        self_instruct_conversations=50,
        regenerate_max_new_tokens=2,
        regenerate_batch_size=1,
        holdout_fraction=0.0,
        eval_fraction=0.0,
    )
    data = prepare_data(
        config,
        build_tiny_target("LlamaForCausalLM", vocab_size=259),
        build_tiny_tokenizer(),
        report=three_seconds_a_reply,
        should_stop=lambda: False,
        regenerate_deadline=deadline,
        clock=lambda: now[0],
    )
    return written, data.stats, rounds


def test_under_a_budget_prompts_are_written_as_distillation_reaches_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Written all at once for a fixed share of the budget, prompts went unanswered whenever a
    reply cost more than the share assumed (here: 20 written in a third of 60 s, 13 answered).
    Written a chunk at a time, only the round the budget ends in can be left unanswered."""
    written, stats, rounds = _prompt_writing_run(tmp_path, monkeypatch, deadline=60.0)

    # Round 1: 8 prompts (8 s), 8 replies (32 s); round 2: 8 prompts (40 s), replies until 60 s.
    assert rounds == [8, 8]
    assert len(written) == 16
    assert stats.self_instruct is not None
    assert stats.self_instruct["kept"] == 16
    assert 14 <= stats.regenerated_conversations < 16
    assert stats.regeneration_stopped


def test_without_a_budget_every_prompt_asked_for_is_written_and_answered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    written, stats, rounds = _prompt_writing_run(tmp_path, monkeypatch, deadline=None)

    assert rounds == [8, 8, 8, 8, 8, 8, 2]
    assert len(written) == 50 == stats.regenerated_conversations
    assert not stats.regeneration_stopped
