"""Conversations an earlier run distilled: trained on again as the target's replies, never
regenerated, and left out when this run's split holds out what they came from."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from trainer.config import TrainConfig
from trainer.eagle.data import HELDOUT_FILE, REGENERATED_FILE, prepare_data
from trainer.eagle.distilled import read_distilled
from trainer.eagle.prepared import PreparedData
from trainer.models.tiny import build_tiny_target, build_tiny_tokenizer


def _prepare(config: TrainConfig, reports: list[tuple[str, int, int]] | None = None) -> PreparedData:
    return prepare_data(
        config,
        build_tiny_target("LlamaForCausalLM", vocab_size=259),
        build_tiny_tokenizer(),
        report=lambda stage, done, total: (reports if reports is not None else []).append(
            (stage, done, total)
        ),
        should_stop=lambda: False,
        regenerate_deadline=None,
    )


def _config(data: Path, out: Path, **overrides: Any) -> TrainConfig:
    settings: dict[str, Any] = {
        "regenerate": True,
        "regenerate_max_new_tokens": 6,
        "regenerate_batch_size": 4,
        "holdout_fraction": 0.0,
        "eval_fraction": 0.0,
    }
    return TrainConfig(model_dir=out / "model", data_paths=[data], out_dir=out, **(settings | overrides))


@pytest.mark.parametrize(("turns", "context_loss"), [("last", False), ("last", True), ("all", False)])
def test_distilled_records_are_trained_on_as_distilled_and_not_regenerated(
    chat_data: Path, tmp_path: Path, turns: str, context_loss: bool
) -> None:
    settings = {"regenerate_turns": turns, "context_loss": context_loss}
    first = _prepare(_config(chat_data, tmp_path / "first", max_conversations=10, **settings))
    cached = tmp_path / "first" / REGENERATED_FILE
    records = read_distilled([cached]).records
    assert len(records) == first.stats.regenerated_conversations == 10
    assert all((r.input_ids is not None) == (turns == "last") for r in records)

    reports: list[tuple[str, int, int]] = []
    second = _prepare(_config(chat_data, tmp_path / "second", distilled_paths=[cached], **settings), reports)

    # The budget went to the other 30 conversations only.
    assert {total for stage, _, total in reports if stage == "regenerating"} == {30}
    assert second.stats.regenerated_conversations == 30
    assert second.stats.distilled_reused == 10
    assert second.stats.distilled_reused_by_file == {REGENERATED_FILE: 10}
    assert second.stats.conversations_used == 40
    new_origins = {r.origin for r in read_distilled([tmp_path / "second" / REGENERATED_FILE]).records}
    assert len(new_origins) == 30
    assert not new_origins & {r.origin for r in records}
    # Each reused conversation is the sample the first run trained on: the same tokens and
    # the same loss mask (its reply, plus the context past the template's opening with
    # context_loss; every assistant turn with turns=all).
    trained = {tuple(s.input_ids): s.loss_mask for s in second.train}
    for sample in first.train:
        assert trained[tuple(sample.input_ids)] == sample.loss_mask
        assert 0 < sample.num_masked < len(sample.input_ids)


def test_records_of_conversations_this_run_holds_out_are_not_trained_on(
    chat_data: Path, tmp_path: Path
) -> None:
    _prepare(_config(chat_data, tmp_path / "first", max_conversations=20))
    cached = tmp_path / "first" / REGENERATED_FILE
    second = _prepare(
        _config(chat_data, tmp_path / "second", distilled_paths=[cached], holdout_fraction=0.4, seed=3)
    )
    assert second.stats.distilled_reused_heldout > 0
    assert second.stats.distilled_reused + second.stats.distilled_reused_heldout == 20
    tokenizer = build_tiny_tokenizer()
    heldout = (tmp_path / "second" / HELDOUT_FILE).read_text().splitlines()
    questions = {json.loads(line)["conversations"][0]["value"] for line in heldout}
    trained_text = {tokenizer.decode(s.input_ids) for s in second.train}
    assert not any(q in text for q in questions for text in trained_text)


def test_a_record_distilled_twice_is_read_once(chat_data: Path, tmp_path: Path) -> None:
    _prepare(_config(chat_data, tmp_path / "first", max_conversations=6))
    lines = (tmp_path / "first" / REGENERATED_FILE).read_text().splitlines()
    (tmp_path / "a.jsonl").write_text("\n".join(lines[:4]) + "\n")
    (tmp_path / "b.jsonl").write_text("\n".join(lines[2:]) + "\n")
    distilled = read_distilled([tmp_path / "b.jsonl", tmp_path / "a.jsonl"])
    assert len(distilled.records) == 6
    assert distilled.by_file == {"a.jsonl": 4, "b.jsonl": 2}


def test_distilled_paths_need_regeneration(chat_data: Path, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="distilled_paths needs regenerate"):
        TrainConfig(
            model_dir=tmp_path,
            data_paths=[chat_data],
            out_dir=tmp_path,
            distilled_paths=[chat_data],
            regenerate=False,
        )
