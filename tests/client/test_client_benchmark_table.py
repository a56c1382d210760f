"""benchmark_table on results.json documents: the table's rows, and errors that point at the field."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from client import BENCHMARK_TABLE_COLUMNS, benchmark_table, deployment_recommendation, request_shortfalls
from client.results import DownloadedResults
from client.results_text import format_job_results, format_lineage_summary, format_recommendation


def row(
    configuration: str, *, acceptance: float | None, ttft: float = 12.5, concurrency: int = 1
) -> dict[str, Any]:
    """A row as the job's serving benchmark writes it (guidellm's means, flat)."""
    return {
        "configuration": configuration,
        "concurrency": concurrency,
        "head_dir": None if acceptance is None else "s3://out/job/eagle_model/",
        "ttft_ms": ttft,
        "tpot_ms": 3.0,
        "itl_ms": 2.5,
        "request_throughput": 1.5,
        "output_throughput": 40,
        "otps_per_request": 41.0,
        "successful_requests": 8,
        "errored_requests": 0,
        "output_tokens_mean": 64.0,
        "prompt_tokens_mean": 120.0,
        "mean_acceptance_length": acceptance,
        "acceptance_by_position": [] if acceptance is None else [0.6, 0.4, 0.25],
        "num_speculative_tokens": None,
        "adaptive": acceptance is not None,
        "mean_draft_tokens": None,
        "speedup_vs_no_eagle": 1.0,
    }


def batch1_row(configuration: str, *, acceptance: float | None) -> dict[str, Any]:
    """A row of a job benchmarked before the serving engine: distributions under 'metrics'."""
    return {
        "configuration": configuration,
        "concurrency": 1,
        "head_dir": None,
        "metrics": {
            "requests": 2,
            "output_tokens": 16,
            "ttft_ms": {"mean": 12.5, "median": 12.5, "p99": 12.5},
            "tpot_ms": {"mean": 3.0, "median": 3.0, "p99": 3.0},
            "itl_ms": None,
            "request_throughput": 1.5,
            "output_throughput": 40,
            "otps_per_request": 41.0,
            "acceptance_length": acceptance,
        },
    }


def test_rows_follow_the_table_columns() -> None:
    rows = benchmark_table(
        {"rows": [row("No EAGLE", acceptance=None), row("Trained EAGLE", acceptance=2.25)]}
    )
    assert tuple(rows[0]) == BENCHMARK_TABLE_COLUMNS
    assert rows[1] == {
        "Configuration": "Trained EAGLE",
        "Concurrency": 1,
        "TTFT (ms)": 12.5,
        "TPOT (ms)": 3.0,
        "ITL (ms)": 2.5,
        "Request Throughput (req/s)": 1.5,
        "Output Throughput (tokens/s)": 40.0,
        "OTPS per request": 41.0,
        "Acceptance Length": 2.25,
        "K": "adaptive",
        "Speedup vs No EAGLE": 1.0,
    }
    assert rows[0]["Acceptance Length"] is None
    assert rows[0]["K"] is None


def test_every_concurrency_level_is_a_row() -> None:
    levels = [
        row(name, acceptance=a, concurrency=c)
        for name, a in (("No EAGLE", None), ("Trained EAGLE", 2.0))
        for c in (1, 2, 4, 8)
    ]
    rows = benchmark_table({"rows": levels})
    assert [(r["Configuration"], r["Concurrency"]) for r in rows] == [
        (name, level) for name in ("No EAGLE", "Trained EAGLE") for level in (1, 2, 4, 8)
    ]


def test_results_of_jobs_from_before_the_serving_benchmark_still_read() -> None:
    rows = benchmark_table({"rows": [batch1_row("Trained EAGLE", acceptance=2.25)]})
    assert rows == [
        {
            "Configuration": "Trained EAGLE",
            "Concurrency": 1,
            "TTFT (ms)": 12.5,
            "TPOT (ms)": 3.0,
            "ITL (ms)": None,
            "Request Throughput (req/s)": 1.5,
            "Output Throughput (tokens/s)": 40.0,
            "OTPS per request": 41.0,
            "Acceptance Length": 2.25,
            "K": None,
            "Speedup vs No EAGLE": None,
        }
    ]


def test_reads_a_results_directory(tmp_path: Path) -> None:
    (tmp_path / "benchmark").mkdir()
    (tmp_path / "benchmark" / "results.json").write_text(
        json.dumps({"rows": [row("No EAGLE", acceptance=None)]})
    )
    assert [r["Configuration"] for r in benchmark_table(tmp_path)] == ["No EAGLE"]


def test_a_missing_metric_is_named_with_its_row(tmp_path: Path) -> None:
    broken = row("Trained EAGLE", acceptance=2.0)
    del broken["otps_per_request"]
    path = tmp_path / "results.json"
    path.write_text(json.dumps({"rows": [row("No EAGLE", acceptance=None), broken]}))
    with pytest.raises(ValueError, match=r"results\.json: rows\[1\]: 'otps_per_request' is missing"):
        benchmark_table(path)


def test_a_document_without_rows_is_refused(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="no benchmark results there"):
        benchmark_table(tmp_path / "absent.json")
    with pytest.raises(ValueError, match="no 'rows' list"):
        benchmark_table({"engine": "x"})


def test_the_recommendation_is_read_beside_the_table() -> None:
    level = {"concurrency": 1, "enable_speculative_decoding": False, "configuration": "No EAGLE"}
    document = {"rows": [row("No EAGLE", acceptance=None)], "recommendation": {"levels": [level]}}
    recommendation = deployment_recommendation(document)
    assert recommendation is not None
    assert recommendation["levels"] == [level]
    assert deployment_recommendation({"rows": []}) is None  # jobs from before recommendations
    with pytest.raises(ValueError, match="'recommendation' has no 'levels' list"):
        deployment_recommendation({"rows": [], "recommendation": "fast"})


def test_the_printed_recommendation_warns_when_no_eagle_drifted_beyond_the_margin() -> None:
    def level(concurrency: int, spread: float) -> dict[str, Any]:
        return {
            "concurrency": concurrency,
            "enable_speculative_decoding": False,
            "configuration": "No EAGLE",
            "no_eagle_spread": spread,
        }

    text = format_recommendation({"min_speedup": 1.03, "levels": [level(1, 1.01), level(2, 1.25)]})

    first, second = text.splitlines()[1:]
    assert "differed" not in first  # inside the margin: nothing to warn about
    assert second.endswith("[No EAGLE's two runs differed 1.25x: the load changed]")


def test_the_lineage_summary_names_a_shipped_base_head() -> None:
    shipped = {
        "name": "smollm2-135m-instruct",
        "sha256": {"model.safetensors": "ab" * 32},
        "manifest_sha256": "cd" * 32,
    }
    lineage: dict[str, Any] = {
        "base_head": {"uri": "s3://cache/base-heads/k/builds/b/", "shipped_head": shipped}
    }
    assert (
        "  shipped head   smollm2-135m-instruct: model.safetensors sha256 abababababababab…, "
        "manifest sha256 cdcdcdcdcdcdcdcd…"
    ) in format_lineage_summary(lineage).splitlines()
    assert "shipped head" not in format_lineage_summary({"base_head": {"uri": "s3://x/"}})


def test_printed_results_say_which_rows_measured_fewer_requests_than_sent(tmp_path: Path) -> None:
    shortfall = (
        "No EAGLE at concurrency 2: 3 of 4 requests measured "
        "(1 still in flight when guidellm ended the level)"
    )
    document = {
        "rows": [row("No EAGLE", acceptance=None), row("No EAGLE", acceptance=None, concurrency=2)],
        "request_shortfalls": [shortfall],
    }
    (tmp_path / "benchmark").mkdir()
    (tmp_path / "benchmark" / "results.json").write_text(json.dumps(document))
    results = DownloadedResults(
        directory=tmp_path, output_uri="s3://out/job/", description={}, lineage={}, files={}
    )

    lines = format_job_results(results).splitlines()

    # Right under the table, so the reader sees it before reading the means.
    table_end = max(index for index, line in enumerate(lines) if line.startswith("| No EAGLE | 2 |"))
    assert lines[table_end + 2] == shortfall
    assert request_shortfalls({"rows": []}) == []  # jobs benchmarked before the lines existed
    with pytest.raises(ValueError, match="'request_shortfalls' is not a list of strings"):
        request_shortfalls({"rows": [], "request_shortfalls": "2 short"})
