"""Serving metrics from per-chunk timestamps: the definitions, checked on hand-made timings."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainer.benchmark.config import BenchmarkConfig, BenchmarkConfiguration
from trainer.benchmark.metrics import percentile, serving_metrics
from trainer.benchmark.report import CSV_COLUMNS, BenchmarkReport, BenchmarkRow
from trainer.benchmark.timing import Chunk, TimedGeneration
from trainer.engine.result import GenerationResult


def _generation(chunks: list[tuple[float, int]], accepted: list[int], proposed: list[int]) -> TimedGeneration:
    tokens = sum(count for _, count in chunks)
    result = GenerationResult(
        token_ids=list(range(tokens)),
        prompt_length=10,
        finish_reason="length",
        num_speculative_tokens=3 if proposed else 0,
        num_target_forwards=1 + len(accepted),
        accepted_per_step=accepted,
        proposed_per_step=proposed,
    )
    return TimedGeneration(
        result=result,
        prompt_tokens=10,
        seconds=chunks[-1][0],
        chunks=[Chunk(seconds, count) for seconds, count in chunks],
    )


def test_speculative_chunks_give_ttft_tpot_itl_and_acceptance() -> None:
    # First token at 0.1 s, then verifications yielding 3, 1 and 4 tokens.
    first = _generation([(0.1, 1), (0.3, 3), (0.4, 1), (0.6, 4)], accepted=[2, 0, 3], proposed=[3, 3, 3])
    # A second request: first token at 0.2 s, then 2 tokens at 0.5 s.
    second = _generation([(0.2, 1), (0.5, 2)], accepted=[1], proposed=[3])

    metrics = serving_metrics([first, second])

    assert metrics.requests == 2
    assert metrics.output_tokens == 12
    assert metrics.ttft_ms is not None
    assert metrics.ttft_ms.mean == pytest.approx(150.0)
    # TPOT per request: (0.6 - 0.1) / 8 and (0.5 - 0.2) / 2.
    assert metrics.tpot_ms is not None
    assert metrics.tpot_ms.mean == pytest.approx((62.5 + 150.0) / 2)
    # ITL: every gap between chunks, 200, 100, 200 and 300 ms.
    assert metrics.itl_ms is not None
    assert metrics.itl_ms.mean == pytest.approx(200.0)
    assert metrics.itl_ms.median == pytest.approx(200.0)
    # Requests ran back to back: 1.1 s in all.
    assert metrics.duration_seconds == pytest.approx(1.1)
    assert metrics.request_throughput == pytest.approx(2 / 1.1)
    assert metrics.output_throughput == pytest.approx(12 / 1.1)
    assert metrics.otps_per_request == pytest.approx((9 / 0.6 + 3 / 0.5) / 2)
    # tau = (accepted drafts + one bonus token per verification) / verifications = (6 + 4) / 4.
    assert metrics.acceptance_length == pytest.approx(2.5)
    assert metrics.acceptance_by_position == pytest.approx([0.75, 0.5, 0.25])


def test_plain_decoding_has_no_acceptance_length_and_itl_equal_to_tpot() -> None:
    plain = _generation([(0.05, 1), (0.15, 1), (0.25, 1), (0.35, 1)], accepted=[], proposed=[])
    metrics = serving_metrics([plain])
    assert metrics.acceptance_length is None
    assert metrics.tpot_ms is not None
    assert metrics.itl_ms is not None
    assert metrics.tpot_ms.mean == pytest.approx(100.0)
    assert metrics.itl_ms.mean == pytest.approx(100.0)


def test_percentiles_interpolate_between_ranks() -> None:
    values = [float(v) for v in range(1, 101)]
    assert percentile(values, 50) == pytest.approx(50.5)
    assert percentile(values, 99) == pytest.approx(99.01)
    assert percentile([3.0], 99) == 3.0


def test_only_concurrency_one_is_accepted_by_the_batch_one_engine(tmp_path: object) -> None:
    with pytest.raises(ValueError, match=r"concurrency \[4\] is not supported"):
        BenchmarkConfig(
            model_dir=Path("m"),
            prompt_paths=[Path("p")],
            configurations=[BenchmarkConfiguration(name="No EAGLE")],
            concurrency=[1, 4],
        )


def test_the_csv_has_one_row_per_configuration_and_concurrency() -> None:
    row_metrics = serving_metrics([_generation([(0.1, 1), (0.3, 2)], accepted=[1], proposed=[3])]).to_json()
    report = BenchmarkReport(
        engine="e",
        concurrency_levels=[1],
        num_speculative_tokens=3,
        max_new_tokens=3,
        prompts=1,
        prompts_offered=1,
        dtype="float32",
        threads=1,
        seconds=1.0,
        rows=[
            BenchmarkRow(configuration="No EAGLE", concurrency=1, head_dir=None, metrics=row_metrics),
            BenchmarkRow(
                configuration="Trained EAGLE",
                concurrency=1,
                head_dir="h",
                metrics=row_metrics,
                speedup_vs_no_eagle=1.0,
                identical_outputs=1,
            ),
        ],
    )
    lines = report.to_csv().splitlines()
    assert lines[0].split(",") == list(CSV_COLUMNS)
    assert [line.split(",")[0] for line in lines[1:]] == ["No EAGLE", "Trained EAGLE"]
    assert "Trained EAGLE" in report.format_table()
