"""``benchmark(config)`` on a tiny real target and head: every configuration, the same prompts."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from tests.worker.tiny_inputs import sharegpt_jsonl, write_tiny_head
from trainer.benchmark import BenchmarkConfig, BenchmarkConfiguration, benchmark
from trainer.models.tiny import write_tiny_target


@pytest.fixture(autouse=True)
def _one_thread() -> Iterator[None]:
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


@pytest.fixture(scope="module")
def target_and_head(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("benchmark")
    target = write_tiny_target("LlamaForCausalLM", root / "target")
    # The byte-level tokenizer has 259 ids; the head may propose the lowest 128.
    return target, write_tiny_head(target, root / "head", draft_vocab_size=128)


def _config(target: Path, head: Path, prompts: Path, **overrides: object) -> BenchmarkConfig:
    return BenchmarkConfig(
        model_dir=target,
        prompt_paths=[prompts],
        configurations=[
            BenchmarkConfiguration(name="No EAGLE"),
            BenchmarkConfiguration(name="Trained EAGLE", head_dir=head),
        ],
        max_prompts=3,
        max_new_tokens=12,
        **overrides,
    )


def test_every_configuration_decodes_the_same_prompts(
    target_and_head: tuple[Path, Path], tmp_path: Path
) -> None:
    target, head = target_and_head
    prompts = tmp_path / "heldout.jsonl"
    prompts.write_text(sharegpt_jsonl(5))

    report = benchmark(_config(target, head, prompts))

    assert report.prompts == 3
    assert report.prompts_offered == 5
    assert [row.configuration for row in report.rows] == ["No EAGLE", "Trained EAGLE"]
    plain, speculative = report.row("No EAGLE"), report.row("Trained EAGLE")
    assert plain.metrics["requests"] == speculative.metrics["requests"] == 3
    assert plain.metrics["acceptance_length"] is None
    assert speculative.metrics["acceptance_length"] >= 1.0
    assert speculative.metrics["verify_steps"] > 0
    # Greedy speculative decoding is lossless: the same tokens as plain decoding.
    assert speculative.identical_outputs == 3
    assert plain.speedup_vs_no_eagle == pytest.approx(1.0)
    assert speculative.speedup_vs_no_eagle is not None
    assert json.loads(report.model_dump_json())["concurrency_levels"] == [1]


def test_a_time_budget_keeps_every_configuration_on_the_same_prompts(
    target_and_head: tuple[Path, Path], tmp_path: Path
) -> None:
    target, head = target_and_head
    prompts = tmp_path / "heldout.jsonl"
    prompts.write_text(sharegpt_jsonl(5))
    report = benchmark(_config(target, head, prompts, time_budget_seconds=1e-6))
    assert report.prompts == 1
    assert [row.metrics["requests"] for row in report.rows] == [1, 1]


def test_a_stop_request_ends_the_run_early(target_and_head: tuple[Path, Path], tmp_path: Path) -> None:
    target, head = target_and_head
    prompts = tmp_path / "heldout.jsonl"
    prompts.write_text(sharegpt_jsonl(5))
    report = benchmark(_config(target, head, prompts), should_stop=lambda: True)
    assert report.stopped
    assert report.prompts == 0


def test_prompts_without_a_user_turn_are_an_error(target_and_head: tuple[Path, Path], tmp_path: Path) -> None:
    target, head = target_and_head
    prompts = tmp_path / "completions.jsonl"
    prompts.write_text(json.dumps({"messages": [{"role": "assistant", "content": "hi"}]}) + "\n")
    with pytest.raises(ValueError, match="no prompts: none of the 1 conversations"):
        benchmark(_config(target, head, prompts))
