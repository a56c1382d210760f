"""Speculative-decoding counters read from Prometheus text, and their per-level windows."""

from __future__ import annotations

import pytest

from servebench.spec_metrics import CounterPoller, Snapshot, SpecCounters, parse_spec_counters

# The shape vLLM 0.32 exposes: one sample per engine and model, positions as a label.
VLLM_METRICS = """\
# HELP vllm:spec_decode_num_drafts_total Number of spec decoding drafts.
# TYPE vllm:spec_decode_num_drafts_total counter
vllm:spec_decode_num_drafts_total{engine="0",model_name="smol"} 100.0
vllm:spec_decode_num_drafts_total{engine="1",model_name="smol"} 100.0
vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="smol"} 300.0
vllm:spec_decode_num_draft_tokens_total{engine="1",model_name="smol"} 300.0
vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="smol"} 150.0
vllm:spec_decode_num_accepted_tokens_total{engine="1",model_name="smol"} 130.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="smol",position="0"} 80.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="smol",position="1"} 50.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="smol",position="2"} 20.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="1",model_name="smol",position="0"} 70.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="1",model_name="smol",position="1"} 40.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="1",model_name="smol",position="2"} 20.0
vllm:spec_decode_num_drafts_created{engine="0",model_name="smol"} 1.7e9
vllm:num_requests_running{engine="0",model_name="smol"} 0.0
eaglenest:spec_decode_num_drafts_total 7.0
"""


def test_counters_are_summed_over_engines_and_kept_by_position() -> None:
    counters = parse_spec_counters(VLLM_METRICS, "vllm:")

    assert counters.drafts == 200.0
    assert counters.draft_tokens == 600.0
    assert counters.accepted_tokens == 280.0
    assert counters.accepted_per_position == {0: 150.0, 1: 90.0, 2: 40.0}
    assert counters.mean_acceptance_length == pytest.approx(1.0 + 280.0 / 200.0)
    assert counters.acceptance_by_position == pytest.approx([0.75, 0.45, 0.2])
    assert counters.mean_draft_tokens == pytest.approx(3.0)


def test_the_prefix_selects_the_engine() -> None:
    assert parse_spec_counters(VLLM_METRICS, "eaglenest:").drafts == 7.0
    assert parse_spec_counters("", "vllm:") == SpecCounters()


def test_without_drafts_there_is_no_acceptance() -> None:
    empty = SpecCounters()
    assert empty.mean_acceptance_length is None
    assert empty.acceptance_by_position == []
    assert empty.mean_draft_tokens is None


def test_difference_of_snapshots() -> None:
    earlier = SpecCounters(drafts=10, draft_tokens=30, accepted_tokens=12, accepted_per_position={0: 8, 1: 4})
    later = SpecCounters(
        drafts=30, draft_tokens=90, accepted_tokens=42, accepted_per_position={0: 20, 1: 14, 2: 8}
    )

    level = later.minus(earlier)

    assert (level.drafts, level.draft_tokens, level.accepted_tokens) == (20, 60, 30)
    assert level.accepted_per_position == {0: 12, 1: 10, 2: 8}
    assert level.mean_acceptance_length == pytest.approx(2.5)


def test_window_brackets_a_level_with_the_nearest_snapshots_outside_it() -> None:
    poller = CounterPoller("http://127.0.0.1:9", "vllm:")

    def at(second: float, drafts: float) -> Snapshot:
        return Snapshot(second, second + 0.01, SpecCounters(drafts=drafts, accepted_tokens=drafts))

    poller.snapshots = [at(0.0, 0), at(1.0, 1), at(2.0, 5), at(3.0, 9), at(4.0, 9), at(5.0, 20)]

    # Level from 1.5 s to 3.5 s: snapshot at 1.0 s before, 4.0 s after.
    assert poller.window(1.5, 3.5).drafts == 8
    # A snapshot taken while the level started does not count as "before" it.
    assert poller.window(1.005, 3.5).drafts == 9
    with pytest.raises(ValueError, match="no /metrics snapshot brackets"):
        poller.window(4.5, 6.0)
