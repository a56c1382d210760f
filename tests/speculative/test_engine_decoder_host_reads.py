"""The batch-1 decoder's reads back to the host: on a GPU each one waits for the device's queue.

A speculative round needs one (the verdict decides what the host emits and rolls back); the
drafts it accepts come back in that same read. The slot-pool decoder (what a GPU runs) is
counted on a CPU, where the reads are the same calls (``tests.fixtures.host_syncs``).
"""

from __future__ import annotations

import pytest

from tests.fixtures.host_syncs import counting_host_reads
from tests.speculative.engine_doubles import random_head_decoder, tiny_target

PROMPT = [5, 17, 33, 8, 41, 12, 60, 9]


@pytest.mark.parametrize("temperature", [0.0, 0.8])
def test_a_speculative_round_reads_the_device_back_once(
    monkeypatch: pytest.MonkeyPatch, temperature: float
) -> None:
    target = tiny_target("LlamaForCausalLM")
    decoder = random_head_decoder(target)
    with counting_host_reads(monkeypatch) as reads:
        result = decoder.generate(PROMPT, max_new_tokens=20, temperature=temperature, seed=3)

    rounds = result.num_verify_steps
    # The prefill's token and each plain last step (one token left to emit) read one token.
    single_tokens = result.num_target_forwards - rounds
    assert rounds >= 3
    assert reads.count == rounds + single_tokens
