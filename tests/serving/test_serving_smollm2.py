"""Batched decoding on the real SmolLM2-135M-Instruct equals greedy decoding of each request alone."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from serving import FixedSpeculation, GenerationRequest, ServingEngine
from tests.fixtures.torch_threads import cores_per_test_process
from tests.speculative.engine_doubles import hf_greedy, one_turn_chats, random_head

pytestmark = pytest.mark.slow
QUESTIONS = [
    "What is the capital of France? Answer in one sentence.",
    "Write a Python function that adds two numbers.",
    "List three colours.",
]
NEW_TOKENS = [14, 20, 8]


@pytest.fixture(autouse=True)
def _this_process_cores() -> None:
    torch.set_num_threads(cores_per_test_process())  # restored by the package's autouse fixture


def test_concurrent_chats_equal_hf_generate(smollm2_dir: Path) -> None:
    tokenizer = AutoTokenizer.from_pretrained(smollm2_dir)
    prompts = one_turn_chats(tokenizer, QUESTIONS)
    target = AutoModelForCausalLM.from_pretrained(smollm2_dir, dtype=torch.float32).eval()
    # Speculative first: the engine packs the weights in place, and HF generate on the packed model
    # runs the same kernels as batch-1 decoding does.
    # A small draft vocabulary keeps the untrained head cheap; its misses still exercise rollback.
    head = random_head(target, draft_token_ids=list(range(2048)))
    with ServingEngine(target, head, speculation=FixedSpeculation(3)) as engine:
        handles = [engine.submit(GenerationRequest(p, n)) for p, n in zip(prompts, NEW_TOKENS, strict=True)]
        speculative = [handle.wait(120) for handle in handles]
    expected = [hf_greedy(target, p, n) for p, n in zip(prompts, NEW_TOKENS, strict=True)]
    with ServingEngine(target) as engine:
        handles = [engine.submit(GenerationRequest(p, n)) for p, n in zip(prompts, NEW_TOKENS, strict=True)]
        plain = [handle.wait(120) for handle in handles]

    assert plain == expected
    assert speculative == expected
    assert len({len(tokens) for tokens in expected}) > 1  # requests of different lengths
