"""On a GPU the engine serves on the slot pool (``attention="auto"`` picks it on CUDA), which holds
a fixed number of positions a sequence: ``engine.runner.MAX_POOL_POSITIONS``, fewer than a
long-context model's window. A request that outgrew the pool failed its step, and with it every
other request of the batch; the server advertised and checked the model's window instead. The
pool is what the CPU runs here with ``attention="slots"``, shrunk to 32 positions."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from transformers import AutoModelForCausalLM

from engine import runner
from serving import GenerationRequest, RequestHandle, ServingEngine, server
from tests.speculative.engine_doubles import tiny_target
from trainer.models.tiny import write_tiny_target

POOL = 32


@pytest.fixture
def small_pool(monkeypatch: pytest.MonkeyPatch) -> int:
    monkeypatch.setattr(runner, "MAX_POOL_POSITIONS", POOL)
    return POOL


def test_a_request_longer_than_the_pool_is_refused_alone_and_its_batch_mates_finish(small_pool: int) -> None:
    target = tiny_target("LlamaForCausalLM")
    assert target.config.max_position_embeddings > small_pool
    short = GenerationRequest([5, 17, 30, 8], 20, ignore_eos=True)
    # 28 prompt tokens and 10 new ones: past the pool's 32 positions after a few steps.
    long = GenerationRequest(list(range(1, 29)), 10, ignore_eos=True)
    with ServingEngine(target, max_batch_size=2, eos_token_ids=[], attention="slots") as engine:
        alone = engine.generate(short, timeout=60)
        refused: RequestHandle | ValueError
        try:
            refused = engine.submit(long)
        except ValueError as error:
            refused = error
        mate = engine.submit(short)
        # The old engine took the long request: once it outgrew the pool, the step raised and
        # failed this one with it ("request failed: ValueError: a sequence of 33 positions ...").
        assert mate.wait(60) == alone
        assert mate.finish_reason == "length"
        assert isinstance(refused, ValueError)
        assert f"{small_pool} positions" in str(refused)
        assert engine.max_sequence_length == engine.max_model_len == small_pool
        # What fits the pool exactly is served.
        assert len(engine.generate(GenerationRequest(list(range(1, 29)), 4, ignore_eos=True), 60)) == 4


def test_packed_attention_grows_its_caches_and_keeps_the_models_window(small_pool: int) -> None:
    target = tiny_target("LlamaForCausalLM")
    with ServingEngine(target, eos_token_ids=[], attention="packed") as engine:
        assert engine.max_sequence_length is None
        assert engine.max_model_len == target.config.max_position_embeddings
        request = GenerationRequest(list(range(1, 29)), 10, ignore_eos=True)
        assert len(engine.generate(request, timeout=60)) == 10


def test_the_server_advertises_and_checks_the_pools_length(
    small_pool: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model_dir = write_tiny_target("LlamaForCausalLM", tmp_path / "tiny-llama", seed=3)
    load_engine = server.load_engine

    def on_the_slot_pool(*args: Any, **kwargs: Any) -> ServingEngine:
        engine = load_engine(*args, **kwargs)
        engine.close()  # the CPU's packed engine; the GPU's runs on the pool
        target = AutoModelForCausalLM.from_pretrained(model_dir)
        return ServingEngine(target, max_batch_size=2, attention="slots")

    monkeypatch.setattr(server, "load_engine", on_the_slot_pool)
    with (
        server.start_server(model_dir, served_model_name="tiny") as url,
        httpx.Client(base_url=url) as client,
    ):
        card = client.get("/v1/models").json()["data"][0]
        assert card["max_model_len"] == small_pool
        prompt = list(range(1, 29))
        body = {"model": "tiny", "prompt": prompt, "max_tokens": 10, "temperature": 0, "ignore_eos": True}
        refused = client.post("/v1/completions", json=body, timeout=60)
        assert refused.status_code == 400, refused.text
        assert refused.json()["error"]["param"] == "max_tokens"
        fits = client.post("/v1/completions", json={**body, "max_tokens": 4}, timeout=60)
        assert fits.status_code == 200, fits.text
        assert fits.json()["usage"]["completion_tokens"] == 4
