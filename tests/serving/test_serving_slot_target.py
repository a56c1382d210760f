"""The serving engine on the slot pool (the GPU target), run on CPU: the same outputs as plain
greedy decoding, drafts rolled back without copies, slots handed back when requests end."""

from __future__ import annotations

import gc

import pytest
import torch

from engine.packed_target import PackedTarget
from engine.sampling import SamplingParams
from engine.segments import Segment
from engine.serving_targets import serving_target
from engine.slot_target import SlotTarget
from serving import FixedSpeculation, GenerationRequest, ServingEngine
from tests.fixtures.host_syncs import HostReads, counting_host_reads
from tests.speculative.engine_doubles import hf_greedy, oracle_head, random_head, tiny_target

PROMPTS = [
    [5, 17, 33, 8, 41, 12, 60, 9, 27, 3, 71, 14],
    [9, 9, 3],
    [70, 1, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22],
    [4],
    [30, 31, 32, 33, 34, 35],
]
NEW_TOKENS = [40, 12, 33, 25, 18]


@pytest.mark.parametrize("architecture", ["LlamaForCausalLM", "GptOssForCausalLM"])
@pytest.mark.parametrize("num_speculative_tokens", [0, 3])
def test_concurrent_requests_on_the_slot_pool_agree_with_greedy_decoding(
    architecture: str, num_speculative_tokens: int
) -> None:
    target = tiny_target(architecture)
    target.generation_config.eos_token_id = None  # full lengths: requests leave at different steps
    expected = [hf_greedy(target, p, n) for p, n in zip(PROMPTS, NEW_TOKENS, strict=True)]
    head = random_head(target) if num_speculative_tokens else None
    with ServingEngine(
        target,
        head,
        speculation=FixedSpeculation(num_speculative_tokens),
        max_batch_size=3,
        attention="slots",
    ) as engine:
        assert isinstance(engine.target, SlotTarget)
        handles = [engine.submit(GenerationRequest(p, n)) for p, n in zip(PROMPTS, NEW_TOKENS, strict=True)]
        outputs = [handle.wait(60) for handle in handles]
    tokens = sum(NEW_TOKENS)
    agree = sum(
        a == b for out, exp in zip(outputs, expected, strict=True) for a, b in zip(out, exp, strict=True)
    )
    assert agree / tokens >= 0.99
    assert all(handle.finish_reason == "length" for handle in handles)


def test_rejected_drafts_roll_back_and_accepted_runs_stay_exact() -> None:
    target = tiny_target("LlamaForCausalLM")
    target.generation_config.eos_token_id = None
    known, unknown = PROMPTS[0], PROMPTS[2]
    expected_known = hf_greedy(target, known, 48)
    expected_unknown = hf_greedy(target, unknown, 30)
    head = oracle_head(target, known + expected_known)
    with ServingEngine(
        target, head, speculation=FixedSpeculation(4), max_batch_size=4, attention="slots"
    ) as engine:
        long = engine.submit(GenerationRequest(known, 48))
        other = engine.submit(GenerationRequest(unknown, 30))
        assert long.wait(60) == expected_known
        assert other.wait(60) == expected_unknown
    assert long.stats.tau > 4
    assert other.stats.tau < 2  # mostly rejected: every step rolls its cache back


def test_auto_picks_the_exact_packed_target_off_cuda_and_bad_kinds_are_refused() -> None:
    target = tiny_target("LlamaForCausalLM")
    auto = serving_target(target, None, attention="auto", max_sequences=2)
    assert isinstance(auto, PackedTarget)
    auto.close()
    with pytest.raises(ValueError, match="attention must be one of auto, packed, slots"):
        serving_target(target, None, attention="paged", max_sequences=2)


def test_a_dropped_cache_hands_its_slot_back_and_a_full_pool_says_so() -> None:
    target = tiny_target("LlamaForCausalLM")
    slots = SlotTarget(target, max_sequences=2, max_positions=16)
    try:
        first, second = slots.new_cache(), slots.new_cache()
        with pytest.raises(RuntimeError, match="all 2 sequence slots of the pool are in use"):
            slots.new_cache()
        outputs = slots.forward([Segment(first, [5, 6, 7], keep=1), Segment(second, [8], keep=1)])
        assert [o.logits.shape[0] for o in outputs] == [1, 1]
        assert (first.length, second.length) == (3, 1)
        first.crop(1)
        assert first.length == 1
        with pytest.raises(ValueError, match="does not fit the pool's 16"):
            slots.forward([Segment(second, list(range(20)), keep=1)])
        del first
        gc.collect()
        assert isinstance(slots.new_cache().slot, int)
    finally:
        slots.close()
    assert target.config._attn_implementation != "eaglenest_slots"
    assert torch.is_grad_enabled()


def test_a_verify_step_on_the_slot_pool_reads_nothing_back_to_the_host(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Lengths and the batch's layout live on the host; the step only queues work on the device."""
    target = tiny_target("LlamaForCausalLM")
    slots = SlotTarget(target, max_sequences=2, max_positions=32)
    try:
        first, second = slots.new_cache(), slots.new_cache()
        with torch.inference_mode():
            slots.forward([Segment(first, [5, 6, 7], keep=1), Segment(second, [8, 9], keep=1)])
            with counting_host_reads(monkeypatch) as reads:
                outputs = slots.forward([Segment(first, [1, 2, 3, 4], keep=4), Segment(second, [10], keep=1)])
        assert reads.count == 0
        assert [o.logits.shape[0] for o in outputs] == [4, 1]
    finally:
        slots.close()


def test_a_batch_holding_the_first_slots_reads_the_pool_in_place_in_any_order(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    target = tiny_target("LlamaForCausalLM")
    slots = SlotTarget(target, max_sequences=3, max_positions=32)
    gathered: list[bool] = []
    forward = slots.runner.forward

    def spying(*args: object, slots: torch.Tensor | None, **kwargs: object) -> object:
        gathered.append(slots is not None)
        return forward(*args, slots=slots, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(slots.runner, "forward", spying)
    try:
        first, second, third = slots.new_cache(), slots.new_cache(), slots.new_cache()
        prompts = {first: [5, 6, 7], second: [8, 9], third: [10, 11, 12, 13]}
        with torch.inference_mode():
            # Slots 2, 0 and 1 in that order: the rows are put in slot order, the outputs back.
            outputs = slots.forward(
                [Segment(cache, prompts[cache], keep=1) for cache in (third, first, second)]
            )
            assert gathered == [False]
            alone = SlotTarget(target, max_sequences=1, max_positions=32)
            try:
                for cache, output in zip((third, first, second), outputs, strict=True):
                    reference = alone.forward([Segment(alone.new_cache(), prompts[cache], keep=1)])[0]
                    torch.testing.assert_close(output.logits, reference.logits, atol=1e-5, rtol=1e-4)
            finally:
                alone.close()
            # Slots 0 and 2, a hole between: the keys and values are gathered.
            slots.forward([Segment(third, [1], keep=1), Segment(first, [2], keep=1)])
            assert gathered == [False, True]
    finally:
        slots.close()


def test_a_speculative_step_on_the_slot_pool_reads_back_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """The drafts go into the verification on the device and come back with the verdicts: a
    step reads the device once, so on a GPU the host queues the target's forward while the
    head's chain still runs (reading the drafts first made it wait for the chain)."""
    target = tiny_target("LlamaForCausalLM")
    target.generation_config.eos_token_id = None
    reads_per_step: list[int] = []
    reads = HostReads()
    original = ServingEngine._step

    def counted(engine: ServingEngine) -> None:
        # The test thread only waits meanwhile: every read counted here is the engine's.
        before = reads.count
        original(engine)
        reads_per_step.append(reads.count - before)

    monkeypatch.setattr(ServingEngine, "_step", counted)
    sampled = SamplingParams(temperature=0.8, top_p=0.9)
    with (
        counting_host_reads(monkeypatch, reads),
        ServingEngine(
            target,
            random_head(target),
            speculation=FixedSpeculation(3),
            max_batch_size=3,
            attention="slots",
            eos_token_ids=[],
        ) as engine,
    ):
        requests = [GenerationRequest(p, n) for p, n in zip(PROMPTS[:3], [20, 9, 14], strict=True)]
        requests.append(GenerationRequest(PROMPTS[3], 11, sampling=sampled, seed=5))
        handles = [engine.submit(request) for request in requests]
        outputs = [handle.wait(60) for handle in handles]
    assert [len(output) for output in outputs] == [20, 9, 14, 11]
    assert sum(sum(handle.stats.proposed_per_step) for handle in handles) > 0
    assert reads_per_step
    assert set(reads_per_step) == {1}
