"""A head drafting in bfloat16 beside a float32 target (``engine.heads.draft_precision``):
chosen only on a CPU with native bfloat16, outputs still exactly plain greedy decoding's, and a
trained head keeps its acceptance."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from engine.heads import draft_precision
from engine.heads.draft_precision import draft_dtype
from engine.heads.export import load_head
from serving import FixedSpeculation, GenerationRequest, ServingEngine
from speculative import SpeculativeDecoder
from tests.speculative.engine_doubles import hf_greedy, one_turn_chats, oracle_head, random_head, tiny_target

CPU = torch.device("cpu")
PROMPT = [5, 17, 33, 8, 41, 12, 60, 9, 27, 3, 71, 14]
NEW_TOKENS = 40
SHIPPED_HEAD = Path(__file__).resolve().parents[2] / "heads" / "smollm2-135m-instruct"


@pytest.fixture
def native_bfloat16(monkeypatch: pytest.MonkeyPatch) -> None:
    """This CPU counts as one with native bfloat16, whatever it is (bfloat16 runs everywhere,
    only slower without it)."""
    monkeypatch.setattr(draft_precision, "native_cpu_bfloat16", lambda: True)


def test_bfloat16_only_beside_a_float32_target_on_a_cpu_that_has_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(draft_precision, "native_cpu_bfloat16", lambda: True)
    assert draft_dtype(torch.float32, CPU) == torch.bfloat16
    assert draft_dtype(torch.bfloat16, CPU) == torch.bfloat16
    assert draft_dtype(torch.float16, CPU) == torch.float16
    assert draft_dtype(torch.float32, torch.device("cuda")) == torch.float32  # a GPU keeps its target's
    monkeypatch.setattr(draft_precision, "native_cpu_bfloat16", lambda: False)
    assert draft_dtype(torch.float32, CPU) == torch.float32


def test_batch_1_decoding_with_a_bfloat16_head_equals_plain_greedy_decoding() -> None:
    target = tiny_target("LlamaForCausalLM")
    target.generation_config.eos_token_id = None
    reference = SpeculativeDecoder(target, random_head(target), head_dtype=torch.float32)
    expected = reference.generate_plain(PROMPT, max_new_tokens=NEW_TOKENS).token_ids
    assert expected == hf_greedy(target, PROMPT, NEW_TOKENS)  # the packed model, as the decoders run it

    untrained = SpeculativeDecoder(target, random_head(target), head_dtype=torch.bfloat16)
    assert untrained.head_dtype == torch.bfloat16
    assert untrained.generate(PROMPT, max_new_tokens=NEW_TOKENS).token_ids == expected
    # An oracle: long accepted runs, and rollbacks at the positions it is told to miss.
    oracle = SpeculativeDecoder(
        target, oracle_head(target, PROMPT + expected, wrong_at={20, 33}), head_dtype=torch.bfloat16
    )
    result = oracle.generate(PROMPT, max_new_tokens=NEW_TOKENS)
    assert result.token_ids == expected
    assert result.tau > 3


@pytest.mark.usefixtures("native_bfloat16")
def test_serving_batches_with_a_bfloat16_head_equal_plain_greedy_decoding() -> None:
    target = tiny_target("Qwen3ForCausalLM")
    target.generation_config.eos_token_id = None
    prompts = [PROMPT, [9, 9, 3], [30, 31, 32, 33, 34, 35]]
    expected = [hf_greedy(target, prompt, NEW_TOKENS) for prompt in prompts]
    head = oracle_head(target, prompts[0] + expected[0])
    with ServingEngine(target, head, speculation=FixedSpeculation(3), max_batch_size=2) as engine:
        assert engine.head is not None
        assert engine.head.lm_head.weight.dtype == torch.bfloat16
        handles = [engine.submit(GenerationRequest(prompt, NEW_TOKENS)) for prompt in prompts]
        assert [handle.wait(60) for handle in handles] == expected
    assert handles[0].stats.tau > 3  # the oracle's drafts went through the bfloat16 head's slots


@pytest.mark.slow
def test_the_shipped_head_drafts_as_well_in_bfloat16(smollm2_dir: Path) -> None:
    """The trained head's acceptance is its float32 acceptance: the features reach it intact."""
    tokenizer = AutoTokenizer.from_pretrained(smollm2_dir)
    target = AutoModelForCausalLM.from_pretrained(smollm2_dir, dtype=torch.float32).eval()
    questions = ["Hi! How was your weekend?", "What should I cook for dinner tonight?"]
    prompts = one_turn_chats(tokenizer, questions)
    taus = {}
    for dtype in (torch.float32, torch.bfloat16):
        decoder = SpeculativeDecoder(
            target, load_head(SHIPPED_HEAD, target), num_speculative_tokens=3, head_dtype=dtype
        )
        results = [decoder.generate(prompt, max_new_tokens=32) for prompt in prompts]
        plain = [decoder.generate_plain(prompt, max_new_tokens=32).token_ids for prompt in prompts]
        assert [result.token_ids for result in results] == plain
        taus[dtype] = sum(result.tau for result in results) / len(results)
    assert taus[torch.float32] > 1.5  # a trained head, not a random one
    assert taus[torch.bfloat16] > taus[torch.float32] - 0.2
