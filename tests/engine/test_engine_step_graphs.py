"""Decode and verify steps (batch-1 decoding, serving) replayed from captured graphs (what a
GPU runs), on a CPU: an eager stand-in takes the graphs' place, so the bookkeeping around
them -- one capture per (rows, width, keys) bucket, static inputs, rows read in place or
addressed by slot, features recorded inside the step -- is checked here, and
tests/engine/test_engine_cuda.py replays real graphs where a GPU is present."""

from __future__ import annotations

import gc
import weakref

import pytest
import torch
from transformers import AutoModelForCausalLM

from engine import cuda_graphs
from engine import runner as runner_module
from engine.cuda_graphs import CaptureTotals, DecodeGraphs
from engine.runner import SlotRunner
from engine.segments import Segment
from engine.slot_target import SlotTarget
from engine.slot_target_runner import SlotTargetRunner
from serving import FixedSpeculation, GenerationRequest, ServingEngine
from speculative import SpeculativeDecoder
from tests.engine.eager_capture import eager_capture
from tests.fixtures.host_syncs import counting_host_reads
from tests.speculative.engine_doubles import hf_greedy, oracle_head, tiny_target
from trainer.models.tiny import tiny_target_config

PROMPT = [5, 17, 33, 8, 41, 12, 60, 9]


def _graphs_on_the_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    def graphs(runner: SlotRunner, max_rows: int) -> DecodeGraphs:
        return DecodeGraphs(runner, max_rows, capture=eager_capture)

    monkeypatch.setattr(runner_module, "graphs_wanted", lambda device, config: True)
    monkeypatch.setattr(runner_module, "DecodeGraphs", graphs)


def test_plain_and_speculative_steps_replay_graphs_of_their_width(monkeypatch: pytest.MonkeyPatch) -> None:
    _graphs_on_the_cpu(monkeypatch)
    captured = CaptureTotals()
    monkeypatch.setattr(cuda_graphs, "CAPTURED", captured)
    target = tiny_target("LlamaForCausalLM")
    expected = hf_greedy(target, PROMPT, 32)
    decoder = SpeculativeDecoder(
        target,
        oracle_head(target, PROMPT + expected, wrong_at={14, 20}),
        num_speculative_tokens=4,
        eos_token_ids=[],
        slot_pool=True,
        pack_weights=False,
    )
    assert isinstance(decoder._target, SlotTargetRunner)

    plain = decoder.generate_plain(PROMPT, max_new_tokens=32)
    result = decoder.generate(PROMPT, max_new_tokens=32)

    assert plain.token_ids == expected
    assert result.token_ids == expected
    assert result.tau > 3
    graphs = {capture: runner.graphs for capture, runner in decoder._target._runners.items()}
    assert all(graph is not None for graph in graphs.values())
    # Plain decoding: one-token steps, keys within one bucket. Speculative: verify steps of the
    # pending token and 4 drafts, and shorter ones near max_new_tokens; the features the head
    # drafts from came out of the replayed steps.
    plain_graphs, speculative_graphs = graphs[False], graphs[True]
    assert plain_graphs is not None
    assert speculative_graphs is not None
    assert {width for _, width, _, _ in plain_graphs._graphs} == {1}
    assert 5 in {width for _, width, _, _ in speculative_graphs._graphs}
    assert speculative_graphs.captures == len(speculative_graphs._graphs)
    # Every capture counts in the process's totals, which steady-state timings leave out.
    assert captured.captures == plain_graphs.captures + speculative_graphs.captures
    assert captured.seconds > 0


PROMPTS = [[5, 17, 33, 8, 41, 12, 60, 9, 27, 3, 71, 14], [9, 9, 3], [70, 1, 5, 6, 7, 8, 9, 10], [4], [30, 31]]
NEW_TOKENS = [40, 12, 33, 25, 18]


def test_serving_decode_and_verify_steps_replay_graphs_over_the_slots_held(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Five requests through three slots of the serving target: sequences join and leave, so
    a replayed step's rows hold slots in any order, and fewer rows than the graph's bucket."""
    _graphs_on_the_cpu(monkeypatch)
    target = tiny_target("LlamaForCausalLM")
    target.generation_config.eos_token_id = None
    expected = [hf_greedy(target, p, n) for p, n in zip(PROMPTS, NEW_TOKENS, strict=True)]
    reference = PROMPTS[0] + expected[0]
    with ServingEngine(
        target,
        oracle_head(target, reference),
        speculation=FixedSpeculation(3),
        max_batch_size=3,
        attention="slots",
    ) as engine:
        assert isinstance(engine.target, SlotTarget)
        handles = [engine.submit(GenerationRequest(p, n)) for p, n in zip(PROMPTS, NEW_TOKENS, strict=True)]
        outputs = [handle.wait(60) for handle in handles]
        graphs = engine.target.runner.graphs

    agree = sum(
        a == b for out, exp in zip(outputs, expected, strict=True) for a, b in zip(out, exp, strict=True)
    )
    assert agree / sum(NEW_TOKENS) >= 0.99
    assert handles[0].stats.tau > 3  # the oracle's request: long accepted runs through replays
    assert graphs is not None
    # Steps over the first slots replay graphs that read the pool in place; verify steps are
    # 4 tokens wide. (Steps with a hole between slots: the test below.)
    assert graphs._graphs
    assert False in {slotted for _, _, _, slotted in graphs._graphs}
    assert 4 in {width for _, width, _, _ in graphs._graphs}


def test_a_step_over_slots_with_a_hole_replays_a_graph_that_addresses_rows_by_slot(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _graphs_on_the_cpu(monkeypatch)
    target = tiny_target("LlamaForCausalLM")
    prompts = [[5, 17, 33], [9, 9, 3, 4], [70, 1]]
    following = [[8, 41], [12, 60], [27, 3]]
    slots = SlotTarget(target, max_sequences=3, max_positions=32)
    try:
        caches = [slots.new_cache() for _ in prompts]
        slots.forward([Segment(cache, prompt, keep=1) for cache, prompt in zip(caches, prompts, strict=True)])
        # One-token steps: over all three slots (read in place), then over slots 2 and 0 (a
        # hole at 1, so the graph addresses its rows by slot).
        everyone = slots.forward(
            [Segment(cache, ids[:1], keep=1) for cache, ids in zip(caches, following, strict=True)]
        )
        holed = slots.forward(
            [Segment(caches[2], following[2][1:], keep=1), Segment(caches[0], following[0][1:], keep=1)]
        )
        graphs = slots.runner.graphs
        assert graphs is not None
        assert {slotted for _, _, _, slotted in graphs._graphs} == {False, True}
    finally:
        slots.close()
    # What transformers' greedy decoding takes next after each sequence so far.
    assert [int(o.logits.argmax(-1)) for o in everyone] == [
        hf_greedy(target, p + ids[:1], 1)[0] for p, ids in zip(prompts, following, strict=True)
    ]
    assert [int(o.logits.argmax(-1)) for o in holed] == [
        hf_greedy(target, prompts[row] + following[row], 1)[0] for row in (2, 0)
    ]


def test_a_closed_runner_with_graphs_is_freed_without_waiting_for_the_garbage_collector(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Distillation makes a runner, its pool and graphs per chunk (GBs on a GPU at 256 rows): the
    graphs point back at their runner, so close() must break that cycle for reference counting
    to free it at once."""
    _graphs_on_the_cpu(monkeypatch)
    target = tiny_target("LlamaForCausalLM")
    runner = SlotRunner(target, slots=3, capacity=32, graph_rows=2)
    assert runner.graphs is not None
    alive = weakref.ref(runner)
    gc.disable()
    try:
        runner.close()
        del runner
        assert alive() is None
    finally:
        gc.enable()


def test_captures_during_a_block_are_told_apart_from_earlier_ones_by_kind(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(cuda_graphs, "CAPTURED", CaptureTotals())
    target_capture = cuda_graphs.counted(eager_capture, "target")
    draft_capture = cuda_graphs.counted(eager_capture, "draft")
    target_capture(lambda: 1)  # before the block: not the block's

    with cuda_graphs.captures_during() as captured:
        draft_capture(lambda: 2)
        _replay, output = target_capture(lambda: 3)
        during = captured()

    assert output == 3
    assert during.captures == 2
    assert during.seconds == pytest.approx(during.seconds_of("target") + during.seconds_of("draft"))
    assert during.seconds_of("draft") > 0
    assert cuda_graphs.CAPTURED.captures == 3
    assert cuda_graphs.CAPTURED.seconds_of("target") > during.seconds_of("target")


def test_a_target_with_dynamic_rope_decodes_eagerly_since_its_step_reads_positions_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # transformers resizes dynamic RoPE's frequencies from bool(max(position) + 1 > cached): a
    # read back inside the step, which a CUDA graph's capture refuses (every decode step of such
    # a target would have failed on a GPU). A default-RoPE step reads nothing back.
    monkeypatch.delenv(cuda_graphs.DISABLE, raising=False)
    cuda = torch.device("cuda")
    reads = {}
    for rope_type in ("default", "dynamic"):
        config = tiny_target_config("LlamaForCausalLM", vocab_size=96)
        theta = config.rope_parameters["rope_theta"]
        config.rope_parameters = {"rope_type": rope_type, "rope_theta": theta, "factor": 2.0}
        target = AutoModelForCausalLM.from_config(config).eval()  # type: ignore[no-untyped-call]
        runner = SlotRunner(target, slots=2, capacity=64)
        ids = torch.tensor([[5, 6, 7]])
        positions = torch.arange(3).unsqueeze(0)
        try:
            with torch.inference_mode(), counting_host_reads(monkeypatch) as counted:
                runner.forward(ids, positions, positions, slots=None, key_length=3)
        finally:
            runner.close()
        reads[rope_type] = (counted.count, cuda_graphs.graphs_wanted(cuda, target.config))
    assert reads["default"] == (0, True)
    dynamic_reads, dynamic_graphs = reads["dynamic"]
    assert dynamic_reads > 0
    assert not dynamic_graphs
    # Per-layer-type settings (one dict per layer type) are read the same way.
    assert cuda_graphs.rope_resizes({"full_attention": {"rope_type": "dynamic"}})
    assert not cuda_graphs.rope_resizes({"full_attention": {"rope_type": "yarn"}})
