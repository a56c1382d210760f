"""A server that stopped lets go of its models, so the next one in the same process has the memory.

A job's benchmark serves each configuration in turn on a thread of the worker's process
(``servebench.servers.serve_in_process``): ten or so servers, each loading the target. FastAPI
keeps every endpoint function it classified in module-level LRU caches (4096 entries), and the
endpoints of ``serving.http.create_app`` close over the engine: without the engine letting go
of its models on ``close``, every server's target, head and KV caches stayed alive for the
life of the process; on a GPU, one copy of the target per configuration, until it ran out.
"""

from __future__ import annotations

import gc
import weakref
from pathlib import Path
from typing import Any

import pytest
from transformers import PreTrainedModel

import serving.server
from serving import start_server
from trainer.device import load_causal_lm
from trainer.models.tiny import write_tiny_target


def test_a_stopped_servers_target_is_freed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model_dir = write_tiny_target("LlamaForCausalLM", tmp_path / "tiny-llama")
    loaded: list[weakref.ref[PreTrainedModel]] = []

    def tracked(*args: Any, **kwargs: Any) -> PreTrainedModel:
        model = load_causal_lm(*args, **kwargs)
        loaded.append(weakref.ref(model))
        return model

    monkeypatch.setattr(serving.server, "load_causal_lm", tracked)
    with start_server(model_dir, served_model_name="tiny"):
        pass
    gc.collect()
    assert len(loaded) == 1
    assert loaded[0]() is None, "the stopped server's target is still referenced"
