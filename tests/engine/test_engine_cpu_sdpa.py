"""engine.cpu_sdpa: on a CPU, masked attention reads grouped key/value heads in place, and
every other call is transformers' own SDPA attention."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM
from transformers.integrations import sdpa_attention

import engine.cpu_sdpa
from engine.cpu_sdpa import CPU_SDPA, ensure_cpu_sdpa
from engine.target import TargetRunner

LAYERS = 3


def grouped_llama(attention: str = "sdpa") -> LlamaForCausalLM:
    """A tiny random Llama with 4 query heads over 2 key/value heads, as SmolLM2 groups them."""
    config = LlamaConfig(
        vocab_size=96,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=LAYERS,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=256,
    )
    config._attn_implementation = attention
    torch.manual_seed(0)
    model = LlamaForCausalLM(config)
    model.eval()  # type: ignore[no-untyped-call]
    return model


def verify_logits(model: LlamaForCausalLM, prompt: torch.Tensor, drafts: torch.Tensor) -> torch.Tensor:
    runner = TargetRunner(model)
    with torch.inference_mode(), runner.session(capture=False):
        runner.forward(prompt, logits_to_keep=1)
        return runner.forward(drafts, logits_to_keep=drafts.shape[1]).logits


def counting(function: Callable[..., Any], calls: list[int]) -> Callable[..., Any]:
    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return function(*args, **kwargs)

    return counted


def test_a_verification_on_a_cpu_attends_without_repeating_the_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    prompt, drafts = torch.arange(3, 40).unsqueeze(0), torch.tensor([[7, 8, 9, 10]])
    model = grouped_llama()

    def no_copies(*args: Any) -> torch.Tensor:
        raise AssertionError("repeat_kv ran: the cache was copied per query head")

    with monkeypatch.context() as patch:
        patch.setattr(sdpa_attention, "repeat_kv", no_copies)
        grouped = verify_logits(model, prompt, drafts)
    assert model.config._attn_implementation == CPU_SDPA  # the runner switched it

    # transformers' own SDPA attention (which repeats the heads under a mask) gives the same logits.
    reference = grouped_llama()
    repeats: list[int] = []
    monkeypatch.setattr(sdpa_attention, "repeat_kv", counting(sdpa_attention.repeat_kv, repeats))
    monkeypatch.setattr("engine.target.ensure_cpu_sdpa", lambda model: False)
    stock = verify_logits(reference, prompt, drafts)
    assert reference.config._attn_implementation == "sdpa"
    assert len(repeats) == 2 * LAYERS  # keys and values in every layer: what the CPU path saves
    torch.testing.assert_close(grouped, stock, rtol=1e-5, atol=1e-5)
    assert torch.equal(grouped.argmax(-1), stock.argmax(-1))


def test_a_single_query_and_an_unmasked_prefill_are_transformers_own_calls(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    model = grouped_llama()
    delegated: list[int] = []
    monkeypatch.setattr(
        engine.cpu_sdpa, "sdpa_attention_forward", counting(sdpa_attention.sdpa_attention_forward, delegated)
    )
    runner = TargetRunner(model)
    with torch.inference_mode(), runner.session(capture=False):
        runner.forward(torch.arange(3, 20).unsqueeze(0), logits_to_keep=1)  # prefill: no mask
        runner.forward(torch.tensor([[5]]), logits_to_keep=1)  # a plain decode step
        assert len(delegated) == 2 * LAYERS
        runner.forward(torch.tensor([[5, 6, 7]]), logits_to_keep=3)  # a verification: masked
        assert len(delegated) == 2 * LAYERS


def test_other_attention_is_left_alone() -> None:
    model = grouped_llama("eager")
    assert not ensure_cpu_sdpa(model)
    assert model.config._attn_implementation == "eager"
