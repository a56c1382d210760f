"""``python -m trainer eval`` end to end on a tiny target with SmolLM2's tokenizer and chat template."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

from engine.heads.export import RUN_HEAD_DIRNAME, export_head
from speculative.evaluation import chat_prompts
from tests.speculative.engine_doubles import random_head
from trainer.cli import USAGE_ERROR, main
from trainer.data.schema import Conversation, Message

RECORDS = [
    {
        "messages": [
            {"role": "user", "content": "Hi! How are you?"},
            {"role": "assistant", "content": "Fine."},
        ]
    },
    {"messages": [{"role": "user", "content": "Name a colour."}, {"role": "assistant", "content": "Blue"}]},
    {
        "messages": [
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": "Write a haiku about rain."},
            {"role": "assistant", "content": "Drops fall."},
            {"role": "user", "content": "Another one."},
            {"role": "assistant", "content": "Puddles form."},
        ]
    },
]


@pytest.fixture(scope="module")
def model_and_head(smollm2_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A tiny random Llama (SmolLM2's vocabulary, so its tokenizer applies) and an untrained head."""
    tokenizer = AutoTokenizer.from_pretrained(smollm2_dir)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=6,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=512,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        tie_word_embeddings=True,
    )
    torch.manual_seed(0)
    target = LlamaForCausalLM(config).eval()
    root = tmp_path_factory.mktemp("eval")
    target.save_pretrained(root / "model")
    tokenizer.save_pretrained(root / "model")
    export_head(random_head(target), root / "head")
    export_head(random_head(target, variant="peagle"), root / "peagle-head")
    return root / "model", root / "head"


@pytest.mark.parametrize("head_name", ["head", "peagle-head"])
def test_eval_writes_the_report(
    model_and_head: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str], head_name: str
) -> None:
    model, head = model_and_head
    head = head.with_name(head_name)  # an EAGLE-3 head, or a P-EAGLE one
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text("".join(json.dumps(record) + "\n" for record in RECORDS))
    out = tmp_path / "report" / "eval.json"

    code = main(
        [
            *("eval", "--model", str(model), "--head", str(head), "--prompts", str(prompts), "--k", "3"),
            *("--max-new-tokens", "12", "--json", str(out), "--threads", "1"),
        ]
    )

    assert code == 0
    report = json.loads(out.read_text())
    assert report["prompts"] == 3
    assert report["identical_outputs"] == 3
    assert report["token_agreement"] == 1.0  # bit-exact on CPU: every plain token, in order
    assert report["k"] == 3
    assert len(report["acceptance_by_position"]) == 3
    assert report["tau"] == pytest.approx(1 + sum(report["acceptance_by_position"]), abs=1e-9)
    assert report["tokens_per_s_plain"] > 0
    assert report["tokens_per_s_spec"] > 0
    assert report["speedup"] == pytest.approx(report["tokens_per_s_spec"] / report["tokens_per_s_plain"])
    assert report["tokens_plain"] == report["tokens_spec"] <= 3 * 12
    printed = capsys.readouterr().out
    assert "speedup" in printed
    assert "decode-only bound" in printed


def test_eval_rejects_bad_input(
    model_and_head: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model, head = model_and_head
    only_answers = tmp_path / "answers.jsonl"
    only_answers.write_text(json.dumps({"messages": [{"role": "assistant", "content": "Hello"}]}) + "\n")
    base = ["eval", "--model", str(model), "--head", str(head)]

    assert main([*base, "--prompts", str(only_answers)]) == USAGE_ERROR
    assert f"--prompts {only_answers}: no record has a user turn" in capsys.readouterr().err

    assert main([*base, "--prompts", str(only_answers), "--k", "0"]) == USAGE_ERROR
    assert "--k must be at least 1, got 0" in capsys.readouterr().err

    missing = tmp_path / "nowhere"
    assert main(["eval", "--model", str(missing), "--head", str(head), "--prompts", str(only_answers)]) == 2
    assert f"--model {missing}: not a directory" in capsys.readouterr().err


def test_eval_takes_the_out_directory_of_a_training_run(
    model_and_head: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model, head = model_and_head
    run = tmp_path / "run"  # as `trainer train --out run` leaves it: the head in run/eagle_model
    shutil.copytree(head, run / RUN_HEAD_DIRNAME)
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text(json.dumps(RECORDS[1]) + "\n")
    base = ["eval", "--model", str(model), "--prompts", str(prompts), "--k", "2", "--max-new-tokens", "4"]

    assert main([*base, "--head", str(run), "--threads", "1"]) == 0
    assert "speedup" in capsys.readouterr().out

    assert main([*base, "--head", str(tmp_path)]) == USAGE_ERROR
    error = capsys.readouterr().err
    assert str(tmp_path / "config.json") in error
    assert str(tmp_path / RUN_HEAD_DIRNAME / "config.json") in error


def test_chat_prompts_stop_before_the_last_answer(smollm2_dir: Path) -> None:
    tokenizer = AutoTokenizer.from_pretrained(smollm2_dir)
    conversations = [
        Conversation(messages=[Message(role=m["role"], content=m["content"]) for m in r["messages"]])
        for r in RECORDS
    ]
    conversations.append(Conversation(messages=[Message(role="assistant", content="Nothing was asked.")]))

    prompts = chat_prompts(tokenizer, conversations)

    assert len(prompts) == 3  # the answer-only conversation has no prompt
    text = tokenizer.decode(prompts[2])
    assert text.startswith("<|im_start|>system\nYou are terse.")
    assert "Another one.<|im_end|>" in text
    assert "Puddles form." not in text
    assert text.endswith("<|im_start|>assistant\n")
