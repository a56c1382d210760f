"""A shard (and a plan writing self-instruct prompts) keeps no float32 target beside the bf16
copy it generates with: on a GPU that was 4 bytes a parameter, for the whole shard, taken from
the KV pool and feature buffers of its 256 rows."""

from __future__ import annotations

import gc
import weakref
from pathlib import Path
from typing import Any

import pytest
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from trainer import distil
from trainer.config import TrainConfig
from trainer.data.schema import Conversation, Message
from trainer.eagle.distillation import DistilledChunks
from trainer.train import load_target


def _watched_targets(monkeypatch: pytest.MonkeyPatch) -> list[weakref.ref[PreTrainedModel]]:
    """Weak references to every target the module loads."""
    loaded: list[weakref.ref[PreTrainedModel]] = []
    load = load_target

    def watched(*args: Any) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
        target, tokenizer = load(*args)
        loaded.append(weakref.ref(target))
        return target, tokenizer

    monkeypatch.setattr(distil, "load_target", watched)
    return loaded


def test_a_shard_lets_the_float32_target_go_before_it_distils(
    tiny_llama_dir: Path, chat_data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = TrainConfig(
        model_dir=tiny_llama_dir, data_paths=[chat_data], out_dir=tmp_path / "run", compute_dtype="bfloat16"
    )
    loaded = _watched_targets(monkeypatch)
    alive_while_distilling: list[bool] = []

    def distilling(
        _config: TrainConfig, generator: PreTrainedModel, *args: Any, **kwargs: Any
    ) -> DistilledChunks:
        gc.collect()
        alive_while_distilling.append(loaded[0]() is not None)
        assert next(generator.parameters()).dtype.is_floating_point
        return DistilledChunks()

    monkeypatch.setattr(distil, "distil_chunks", distilling)
    distil.distil_shard(
        config,
        [Conversation([Message("user", "Hi")])],
        first_chunk=0,
        chunk_size=4,
        origins={},
        progress=lambda _done: None,
        should_stop=lambda: False,
    )
    assert alive_while_distilling == [False]


def test_the_plan_writes_prompts_without_the_float32_target(
    tiny_llama_dir: Path, chat_data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = TrainConfig(
        model_dir=tiny_llama_dir,
        data_paths=[chat_data],
        out_dir=tmp_path / "run",
        compute_dtype="bfloat16",
        self_instruct_conversations=2,
    )
    loaded = _watched_targets(monkeypatch)
    alive_while_writing: list[bool] = []

    def writing(_config: TrainConfig, _generator: PreTrainedModel, *args: Any) -> list[Conversation]:
        gc.collect()
        alive_while_writing.append(loaded[0]() is not None)
        return []

    monkeypatch.setattr(distil, "with_self_instruct", writing)
    distil.plan_distillation(config, should_stop=lambda: False)
    assert alive_while_writing == [False]
