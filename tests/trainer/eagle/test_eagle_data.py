"""A run's samples: hold-out, regeneration order, tokenisation, eval split and reuse on resume."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from transformers import AutoTokenizer

from trainer.config import TrainConfig
from trainer.data.schema import Conversation, Message
from trainer.eagle.context_loss import fixed_opening
from trainer.eagle.data import HELDOUT_FILE, prepare_data
from trainer.eagle.distillation import regeneration_order
from trainer.eagle.prepared import PreparedData, data_fingerprint, load_prepared, save_prepared
from trainer.models.tiny import build_tiny_target, build_tiny_tokenizer


def make_config(data: Path, out: Path, **overrides: Any) -> TrainConfig:
    # Preparation is under test; regeneration only where a test asks for it.
    settings: dict[str, Any] = {"regenerate": False, **overrides}
    return TrainConfig(model_dir=out / "model", data_paths=[data], out_dir=out, **settings)


def conversation(question: str, *answers: str) -> Conversation:
    messages = [Message("user", question)]
    for answer in answers:
        messages += [Message("assistant", answer), Message("user", "and?")]
    return Conversation(messages=messages[:-1] if answers else messages, source=question[:10])


def test_holdout_goes_to_a_file_and_eval_samples_are_split_off(chat_data: Path, tmp_path: Path) -> None:
    config = make_config(chat_data, tmp_path / "run", holdout_fraction=0.2, eval_fraction=0.1)
    tokenizer = build_tiny_tokenizer()
    stages: list[str] = []
    data = prepare_data(
        config,
        None,  # type: ignore[arg-type]  # no regeneration, so the target is never used
        tokenizer,
        report=lambda stage, done, total: stages.append(stage),
        should_stop=lambda: False,
        regenerate_deadline=None,
    )
    heldout = (tmp_path / "run" / HELDOUT_FILE).read_text().splitlines()
    assert data.stats.conversations_heldout == len(heldout) > 0
    assert data.stats.train_samples + data.stats.eval_samples + len(heldout) == 40
    assert data.stats.eval_samples == max(1, int(0.1 * (40 - len(heldout))))
    assert stages == ["loading_data", "tokenizing"]
    heldout_questions = {json.loads(line)["conversations"][0]["value"] for line in heldout}
    trained_text = {tokenizer.decode(s.input_ids) for s in data.train + data.eval}
    assert not any(q in text for q in heldout_questions for text in trained_text)


def test_prepared_samples_are_reused_only_for_the_same_settings(chat_data: Path, tmp_path: Path) -> None:
    config = make_config(chat_data, tmp_path / "run")
    data = prepare_data(
        config,
        None,  # type: ignore[arg-type]
        build_tiny_tokenizer(),
        report=lambda *_: None,
        should_stop=lambda: False,
        regenerate_deadline=None,
    )
    fingerprint = data_fingerprint(config)
    save_prepared(tmp_path / "run", data, fingerprint)
    again = load_prepared(tmp_path / "run", fingerprint)
    assert again is not None
    assert [s.input_ids for s in again.train] == [s.input_ids for s in data.train]
    assert [s.loss_mask for s in again.eval] == [s.loss_mask for s in data.eval]
    assert again.stats == data.stats
    other = data_fingerprint(make_config(chat_data, tmp_path / "run", max_length=64))
    assert other != fingerprint
    with pytest.raises(ValueError, match="prepared data of a run with different data settings"):
        load_prepared(tmp_path / "run", other)
    assert load_prepared(tmp_path / "elsewhere", fingerprint) is None


def test_regeneration_order_cuts_turns_drops_long_prompts_and_sorts_by_length(tmp_path: Path) -> None:
    config = make_config(
        tmp_path / "x.jsonl",
        tmp_path,
        max_length=200,
        regenerate_max_new_tokens=60,
        regenerate_max_turns=1,
    )
    tokenizer = build_tiny_tokenizer()
    conversations = [
        conversation("a" * 50, "first", "second"),
        conversation("b" * 10),
        conversation("c" * 170),  # its prompt leaves no room for a 60-token answer in 200
        conversation("d" * 30, "only"),
    ] + [conversation("e" * n) for n in range(20, 10, -1)]
    ordered = regeneration_order(config, tokenizer, conversations)
    assert len(ordered) == len(conversations) - 1
    assert not any(c.messages[0].content.startswith("c") for c in ordered)
    # Cut after the first answer.
    assert [m.content for m in ordered_by_first(ordered, "a").messages] == ["a" * 50, "first"]
    lengths = [len(c.messages[0].content) for c in ordered]
    assert lengths == sorted(lengths)


def ordered_by_first(conversations: list[Conversation], letter: str) -> Conversation:
    return next(c for c in conversations if c.messages[0].content.startswith(letter))


def test_the_smollm2_template_is_measured_with_its_system_prompt(smollm2_dir: Path, tmp_path: Path) -> None:
    tokenizer = AutoTokenizer.from_pretrained(smollm2_dir)
    config = make_config(tmp_path / "x.jsonl", tmp_path, max_length=36, regenerate_max_new_tokens=8)
    # SmolLM2's template adds a default system prompt: "hi" is a 31-token prompt.
    assert regeneration_order(config, tokenizer, [conversation("hi")]) == []
    config = make_config(tmp_path / "x.jsonl", tmp_path, max_length=80, regenerate_max_new_tokens=8)
    assert len(regeneration_order(config, tokenizer, [conversation("hi")])) == 1


@pytest.mark.parametrize("turns", ["last", "all"])
def test_regeneration_runs_in_chunks_and_stops_between_them(
    chat_data: Path, tmp_path: Path, turns: str
) -> None:
    target = build_tiny_target("LlamaForCausalLM", vocab_size=259)
    config = make_config(
        chat_data,
        tmp_path / "run",
        regenerate=True,
        regenerate_turns=turns,
        regenerate_batch_size=1,  # chunks of 8 conversations
        regenerate_max_new_tokens=4,
        max_conversations=12,
        holdout_fraction=0.0,
        eval_fraction=0.0,
    )
    reports: list[tuple[str, int, int]] = []
    data = prepare_data(
        config,
        target,
        build_tiny_tokenizer(),
        report=lambda stage, done, total: reports.append((stage, done, total)),
        should_stop=lambda: False,
        regenerate_deadline=None,
    )
    progress = [done for stage, done, total in reports if stage == "regenerating"]
    # 0 as regeneration starts (the first batch takes a while), then one per conversation.
    assert progress == list(range(13))
    assert all(t == 12 for s, _, t in reports if s == "regenerating")
    assert data.stats.regenerated_conversations == 12
    assert not data.stats.regeneration_stopped
    assert data.stats.regeneration_mode == "greedy"
    assert data.stats.regenerated_tokens > 0

    def prepared_with(*, stop: bool, deadline: float | None) -> PreparedData:
        return prepare_data(
            config,
            target,
            build_tiny_tokenizer(),
            report=lambda *_: None,
            should_stop=lambda: stop,
            regenerate_deadline=deadline,
        )

    # A deadline already passed (a budget too small for one batch): the first reply is still
    # written, so training has a sample, and the stats say regeneration was cut short.
    late = prepared_with(stop=False, deadline=0.0)
    assert 1 <= late.stats.regenerated_conversations < 12
    assert late.stats.regeneration_stopped
    assert late.train

    # A stop the user asked for ends regeneration at once, first batch or not.
    stopped = prepared_with(stop=True, deadline=None)
    assert stopped.stats.regenerated_conversations == 0
    assert stopped.stats.regeneration_stopped
    assert stopped.train == []


def test_fingerprint_follows_contents_not_paths(chat_data: Path, tmp_path: Path) -> None:
    """A retried job that downloads the same inputs elsewhere still resumes."""
    copy = tmp_path / "elsewhere" / "chat.jsonl"
    copy.parent.mkdir()
    copy.write_bytes(chat_data.read_bytes())
    assert data_fingerprint(make_config(chat_data, tmp_path / "a")) == data_fingerprint(
        make_config(copy, tmp_path / "b")
    )
    copy.write_text(chat_data.read_text() + chat_data.read_text().splitlines()[0] + "\n")
    assert data_fingerprint(make_config(chat_data, tmp_path / "a")) != data_fingerprint(
        make_config(copy, tmp_path / "b")
    )


def test_context_loss_on_data_as_written_covers_every_position_past_the_opening(
    chat_data: Path, tmp_path: Path
) -> None:
    tokenizer = build_tiny_tokenizer()

    def prepared(context_loss: bool) -> list[tuple[list[int], list[int]]]:
        config = make_config(
            chat_data, tmp_path / str(context_loss), eval_fraction=0.0, context_loss=context_loss
        )
        data = prepare_data(
            config,
            None,  # type: ignore[arg-type]  # no regeneration, so the target is never used
            tokenizer,
            report=lambda *_: None,
            should_stop=lambda: False,
            regenerate_deadline=None,
        )
        return sorted((s.input_ids, s.loss_mask) for s in data.train)

    assistant_only, everywhere = prepared(context_loss=False), prepared(context_loss=True)
    assert [ids for ids, _ in assistant_only] == [ids for ids, _ in everywhere]
    opening = len(fixed_opening(tokenizer))
    for (ids, assistant_mask), (_, mask) in zip(assistant_only, everywhere, strict=True):
        assert mask == [0] * opening + [1] * (len(ids) - opening)
        # The other speaker's turns are learned too, the assistant's as before.
        assert sum(mask) > sum(assistant_mask) > 0
        assert all(m >= a for m, a in zip(mask, assistant_mask, strict=True))
    # Prepared samples of one setting are never reused by a run with the other.
    assert data_fingerprint(make_config(chat_data, tmp_path / "a", context_loss=True)) != data_fingerprint(
        make_config(chat_data, tmp_path / "a", context_loss=False)
    )


def test_context_loss_defaults_on_for_data_as_written_and_off_for_distilled_replies(
    chat_data: Path, tmp_path: Path
) -> None:
    assert make_config(chat_data, tmp_path).context_loss  # make_config turns regeneration off
    assert not make_config(chat_data, tmp_path, regenerate=True).context_loss
    assert not make_config(chat_data, tmp_path, context_loss=False).context_loss
    assert make_config(chat_data, tmp_path, regenerate=True, context_loss=True).context_loss
