"""Decode and batch-1 verify steps replayed from captured graphs (what a GPU runs), on a CPU:
an eager stand-in takes the graphs' place, so the bookkeeping around them -- one capture per
(rows, width, keys) bucket, static inputs, features recorded inside the step -- is checked
here, and tests/engine/test_engine_cuda.py replays real graphs where a GPU is present."""

from __future__ import annotations

import pytest

from engine import runner as runner_module
from engine.cuda_graphs import DecodeGraphs
from engine.runner import SlotRunner
from engine.slot_target_runner import SlotTargetRunner
from speculative import SpeculativeDecoder
from tests.engine.eager_capture import eager_capture
from tests.speculative.engine_doubles import hf_greedy, oracle_head, tiny_target

PROMPT = [5, 17, 33, 8, 41, 12, 60, 9]


def _graphs_on_the_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    def graphs(runner: SlotRunner, max_rows: int) -> DecodeGraphs:
        return DecodeGraphs(runner, max_rows, capture=eager_capture)

    monkeypatch.setattr(runner_module, "graphs_wanted", lambda device, config: True)
    monkeypatch.setattr(runner_module, "DecodeGraphs", graphs)


def test_plain_and_speculative_steps_replay_graphs_of_their_width(monkeypatch: pytest.MonkeyPatch) -> None:
    _graphs_on_the_cpu(monkeypatch)
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
    assert {width for _, width, _ in plain_graphs._graphs} == {1}
    assert 5 in {width for _, width, _ in speculative_graphs._graphs}
    assert speculative_graphs.captures == len(speculative_graphs._graphs)
