"""A serving step over the slot pool (what a GPU runs) launches the same kernels for 2
sequences as for 6: no Python per row reaches the device, so a bigger batch costs a GPU more
arithmetic, not more launches. The only per-row operators are views, which launch nothing, and
each sampled row's draws from its own generator (one for its drafts, one for its verification)."""

from __future__ import annotations

from collections import Counter

import pytest

from engine import sampling
from engine.dispatched_ops import DispatchedOps
from engine.sampling import SamplingParams
from serving import FixedSpeculation, GenerationRequest, ServingEngine
from tests.speculative.engine_doubles import random_head, tiny_target

VIEWS = {"aten.select", "aten.slice", "aten.view", "aten.alias", "aten.unsqueeze", "aten.transpose"}


def _decode_step_ops(batch: int, params: SamplingParams, monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """The operators of the first step in which ``batch`` sequences all decode (none prefills)."""
    target = tiny_target("LlamaForCausalLM")
    target.generation_config.eos_token_id = None
    head = random_head(target, seed=3)
    recorded: list[Counter[str]] = []
    step = ServingEngine._step

    def counted(engine: ServingEngine) -> None:
        # The engine's own thread: dispatch modes are per thread.
        if recorded or len(engine._active) < batch or not all(a.prefilled for a in engine._active):
            step(engine)
            return
        with DispatchedOps() as ops:
            step(engine)
        recorded.append(Counter(ops.names))

    monkeypatch.setattr(ServingEngine, "_step", counted)
    with ServingEngine(
        target,
        head,
        speculation=FixedSpeculation(3),
        max_batch_size=batch,
        eos_token_ids=[],
        attention="slots",
    ) as engine:
        handles = [
            engine.submit(GenerationRequest([5, 17, 30, 8], 12, sampling=params, seed=seed))
            for seed in range(batch)
        ]
        for handle in handles:
            handle.wait(60)
    assert recorded, "no step decoded every sequence at once"
    return recorded[0]


@pytest.mark.parametrize("params", [SamplingParams(), SamplingParams(0.8, 0.9)], ids=["greedy", "sampled"])
def test_six_sequences_launch_what_two_do(params: SamplingParams, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sampling, "PACK_ROWS_ON_CPU", True)  # as on a GPU
    monkeypatch.setattr(sampling, "CPU_CANDIDATE_TIERS", ())  # a GPU sorts whole rows
    two, six = (_decode_step_ops(batch, params, monkeypatch) for batch in (2, 6))

    draws = 0 if params.greedy else 2
    assert six["aten.uniform_"] - two["aten.uniform_"] == draws * 4
    assert six["aten.scaled_dot_product_attention"] == two["aten.scaled_dot_product_attention"] > 0
    launched_two, launched_six = (
        {op: n for op, n in ops.items() if op not in VIEWS and op != "aten.uniform_"} for ops in (two, six)
    )
    assert launched_six == launched_two
