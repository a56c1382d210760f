"""`trainer eval`'s comparison leaves CUDA graph captures out of both sides' times: a capture is
a one-time cost of each new shape (a sync, an emptied cache, two eager runs), and a GPU's
speculative side meets new shapes (verify widths, key buckets) far more often than its plain
side, so counting them would understate every speedup. On a CPU an eager stand-in takes the
graphs' place, and each capture moves a fake clock on by CAPTURE_SECONDS."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

import pytest

from engine import runner as runner_module
from engine.cuda_graphs import CAPTURED, DecodeGraphs
from engine.runner import SlotRunner
from speculative import SpeculativeDecoder
from speculative.evaluation import compare
from tests.engine.eager_capture import eager_capture
from tests.speculative.engine_doubles import hf_greedy, oracle_head, tiny_target

PROMPTS = [[5, 17, 33, 8, 41, 12, 60, 9], [9, 9, 3, 70, 1]]
CAPTURE_SECONDS = 30.0
_Output = TypeVar("_Output")


def test_graph_captures_are_left_out_of_both_sides_and_reported_apart(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = {"offset": 0.0}
    real = time.perf_counter
    monkeypatch.setattr(time, "perf_counter", lambda: real() + clock["offset"])

    def slow_capture(function: Callable[[], _Output]) -> tuple[Callable[[], None], _Output]:
        clock["offset"] += CAPTURE_SECONDS
        return eager_capture(function)

    def graphs(runner: SlotRunner, max_rows: int) -> DecodeGraphs:
        return DecodeGraphs(runner, max_rows, capture=slow_capture)

    monkeypatch.setattr(runner_module, "graphs_wanted", lambda device, config: True)
    monkeypatch.setattr(runner_module, "DecodeGraphs", graphs)
    target = tiny_target("LlamaForCausalLM")
    expected = hf_greedy(target, PROMPTS[0], 40)
    head = oracle_head(target, PROMPTS[0] + expected, wrong_at={14, 20})
    decoder = SpeculativeDecoder(
        target, head, num_speculative_tokens=3, eos_token_ids=[], slot_pool=True, pack_weights=False
    )
    captures_before = CAPTURED.captures

    (report,) = compare(decoder, PROMPTS, ks=[3], max_new_tokens=40)

    timed = report.capture_seconds / CAPTURE_SECONDS
    assert CAPTURED.captures > captures_before
    assert timed >= 1  # keys past the warm-up's bucket, and verify widths it never met
    # No side carries a capture: each would otherwise hold CAPTURE_SECONDS at least.
    assert report.plain.seconds < CAPTURE_SECONDS
    assert report.speculative.seconds < CAPTURE_SECONDS
    assert report.speculative.target_seconds < CAPTURE_SECONDS
    assert report.identical_outputs == len(PROMPTS)
    assert report.to_json()["graph_capture_seconds_excluded"] == report.capture_seconds
