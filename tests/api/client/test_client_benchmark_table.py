"""benchmark_table on results.json documents: the table's rows, and errors that point at the field."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from api.client import BENCHMARK_TABLE_COLUMNS, benchmark_table


def row(configuration: str, *, acceptance: float | None, ttft: float = 12.5) -> dict[str, Any]:
    return {
        "configuration": configuration,
        "concurrency": 1,
        "head_dir": None,
        "metrics": {
            "requests": 2,
            "output_tokens": 16,
            "ttft_ms": {"mean": ttft, "median": ttft, "p99": ttft},
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
        "ITL (ms)": None,
        "Request Throughput (req/s)": 1.5,
        "Output Throughput (tokens/s)": 40.0,
        "OTPS per request": 41.0,
        "Acceptance Length": 2.25,
    }
    assert rows[0]["Acceptance Length"] is None


def test_reads_a_results_directory(tmp_path: Path) -> None:
    (tmp_path / "benchmark").mkdir()
    (tmp_path / "benchmark" / "results.json").write_text(
        json.dumps({"rows": [row("No EAGLE", acceptance=None)]})
    )
    assert [r["Configuration"] for r in benchmark_table(tmp_path)] == ["No EAGLE"]


def test_a_missing_metric_is_named_with_its_row(tmp_path: Path) -> None:
    broken = row("Trained EAGLE", acceptance=2.0)
    del broken["metrics"]["otps_per_request"]
    path = tmp_path / "results.json"
    path.write_text(json.dumps({"rows": [row("No EAGLE", acceptance=None), broken]}))
    with pytest.raises(ValueError, match=r"results\.json: rows\[1\]: 'otps_per_request' is missing"):
        benchmark_table(path)


def test_a_document_without_rows_is_refused(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="no benchmark results there"):
        benchmark_table(tmp_path / "absent.json")
    with pytest.raises(ValueError, match="no 'rows' list"):
        benchmark_table({"engine": "x"})
