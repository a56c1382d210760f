"""Lossless greedy speculative decoding on the real SmolLM2-135M-Instruct."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedModel

from speculative import SpeculativeDecoder
from tests.fixtures.torch_threads import cores_per_test_process
from tests.speculative.engine_doubles import hf_greedy, one_turn_chats, oracle_head, random_head

pytestmark = pytest.mark.slow
NEW_TOKENS = 32
QUESTIONS = [
    "What is the capital of France? Answer in one sentence.",
    "Write a Python function that adds two numbers.",
]


@pytest.fixture(scope="module")
def smollm2(smollm2_dir: Path) -> tuple[PreTrainedModel, list[list[int]]]:
    tokenizer = AutoTokenizer.from_pretrained(smollm2_dir)
    target = AutoModelForCausalLM.from_pretrained(smollm2_dir, dtype=torch.float32).eval()
    prompts = one_turn_chats(tokenizer, QUESTIONS)
    return target, prompts


@pytest.fixture(autouse=True)
def _this_process_cores() -> None:
    torch.set_num_threads(cores_per_test_process())  # restored by the package's autouse fixture


def test_random_and_oracle_heads_reproduce_greedy_output(
    smollm2: tuple[PreTrainedModel, list[list[int]]],
) -> None:
    target, prompts = smollm2
    decoder = SpeculativeDecoder(target, random_head(target), num_speculative_tokens=4)
    for prompt in prompts:
        # HF generate runs on the same (packed) model: the same kernels, so the same numbers.
        expected = hf_greedy(target, prompt, NEW_TOKENS)
        assert decoder.generate_plain(prompt, max_new_tokens=NEW_TOKENS).token_ids == expected
        low = decoder.generate(prompt, max_new_tokens=NEW_TOKENS)
        assert low.token_ids == expected
        assert low.tau < 1.5

    # A head that always agrees: long accepted runs and rollbacks of the real model's cache.
    prompt = prompts[1]  # the longer answer: not cut by EOS within NEW_TOKENS
    expected = hf_greedy(target, prompt, NEW_TOKENS)
    oracle = SpeculativeDecoder(target, oracle_head(target, prompt + expected), num_speculative_tokens=4)
    high = oracle.generate(prompt, max_new_tokens=NEW_TOKENS)
    assert high.token_ids == expected
    assert len(expected) == NEW_TOKENS  # stopped by length: every verification could accept everything
    assert high.tau > 4.5
