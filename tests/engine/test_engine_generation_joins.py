"""When prompts join the slot pool's continuous batching: on a GPU, in batches.

A prefill is an eager forward (no decode graph covers a prompt's width), launch-bound on a GPU
at several times a replayed decode step; at 256 rows two or three rows end every step, so
admitting each as it ended would have run a prefill nearly every step. These tests hold a
GPU's joiners to batches of an eighth of the rows and a CPU to joining at once."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
from transformers import PreTrainedModel

from engine import generation
from engine.generation import generate_batched
from engine.replies import Reply
from engine.sampling import SamplingParams
from trainer.models.tiny import build_tiny_target

VOCAB = 96
GREEDY = SamplingParams(temperature=0.0, top_p=1.0)
ROWS = 32
# Prompts of every length, and stop ids common enough that rows end at many different steps.
PROMPTS = [[(11 * i + 7 * j) % (VOCAB - 10) + 10 for j in range(2 + i % 9)] for i in range(120)]
STOPS = list(range(10, 16))


@pytest.fixture(scope="module")
def target() -> PreTrainedModel:
    return build_tiny_target("LlamaForCausalLM", vocab_size=VOCAB)


def _run(
    target: PreTrainedModel, monkeypatch: pytest.MonkeyPatch, **options: Any
) -> tuple[list[Reply | None], list[tuple[int, int]], int]:
    """The replies, (joiners, prompts waiting before) of every admission, and decode steps."""
    admissions: list[tuple[int, int]] = []
    steps = 0
    admitted = 0
    admit, decode = generation._admit, generation._decode

    def counting_admit(state: Any, sampling: SamplingParams, joiners: list[Any]) -> None:
        nonlocal admitted
        admissions.append((len(joiners), len(PROMPTS) - admitted))
        admitted += len(joiners)
        admit(state, sampling, joiners)

    def counting_decode(*args: Any) -> None:
        nonlocal steps
        steps += 1
        decode(*args)

    with monkeypatch.context() as patch:
        patch.setattr(generation, "_admit", counting_admit)
        patch.setattr(generation, "_decode", counting_decode)
        replies, stopped = generate_batched(
            target, PROMPTS, stop_ids=STOPS, max_new_tokens=24, batch_size=ROWS, sampling=GREEDY, **options
        )
    assert not stopped
    return replies, admissions, steps


def _as_on(device: str) -> Callable[[int, torch.device], int]:
    """The rows a step waits for, as on ``device`` (an eighth of them on a GPU)."""
    return lambda rows, _device: max(1, rows // 8) if device == "cuda" else 1


def test_a_gpu_waits_for_an_eighth_of_the_rows_and_a_cpu_for_none() -> None:
    assert generation.rows_per_join(256, torch.device("cuda")) == 32
    assert generation.rows_per_join(48, torch.device("cuda")) == 6
    assert generation.rows_per_join(4, torch.device("cuda")) == 1
    assert generation.rows_per_join(256, torch.device("cpu")) == 1


def test_on_a_gpu_rows_join_in_batches_not_one_prefill_a_step(
    target: PreTrainedModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    # raising=False: the batching is checked by what it does, not by the name it goes by.
    monkeypatch.setattr(generation, "rows_per_join", _as_on("cpu"), raising=False)
    at_once, at_once_admissions, _ = _run(target, monkeypatch)
    monkeypatch.setattr(generation, "rows_per_join", _as_on("cuda"), raising=False)
    replies, admissions, steps = _run(target, monkeypatch)

    assert all(reply is not None and (reply.tokens or reply.stop_token is not None) for reply in replies)
    assert sum(joined for joined, _ in admissions) == len(PROMPTS)
    assert admissions[0] == (ROWS, len(PROMPTS))
    # Every later admission waits for 4 free slots (an eighth of 32), or for every prompt left.
    assert all(joined >= min(ROWS // 8, waiting) for joined, waiting in admissions)
    # A CPU admits each row as its slot frees: a prefill at most steps.
    assert any(joined < ROWS // 8 for joined, _ in at_once_admissions[1:])
    assert len(admissions) * 2 <= len(at_once_admissions)
    assert len(admissions) <= steps // 2
    # Every prompt is answered either way, at the same length cap.
    assert all(reply is not None for reply in at_once)


def test_join_at_overrides_the_devices_default(
    target: PreTrainedModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A CPU told to wait for an eighth of the rows admits as a GPU does by default.
    monkeypatch.setattr(generation, "rows_per_join", _as_on("cuda"), raising=False)
    _, as_on_a_gpu, _ = _run(target, monkeypatch)
    monkeypatch.undo()
    _, told, _ = _run(target, monkeypatch, join_at=ROWS // 8)
    assert told == as_on_a_gpu
    _, at_once, _ = _run(target, monkeypatch)
    assert told != at_once
