"""``benchmark_table``: the rows of SageMaker's benchmark table, from a job's downloaded results.

Columns, as SageMaker's console shows them, plus the configuration and EAGLE's acceptance
length (core.benchmark_table reads them from the results.json document).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from client.results import DownloadedResults
from core.benchmark_table import (
    BENCHMARK_TABLE_COLUMNS,
    BenchmarkTableRow,
    metric_definitions_of,
    recommendation_of,
    request_shortfalls_of,
    table_rows,
)

__all__ = [
    "BENCHMARK_TABLE_COLUMNS",
    "BenchmarkTableRow",
    "benchmark_table",
    "deployment_recommendation",
    "metric_definitions",
    "request_shortfalls",
]

RESULTS_JSON = "benchmark/results.json"


def benchmark_table(results: DownloadedResults | Path | str | dict[str, Any]) -> list[BenchmarkTableRow]:
    """Rows from download_results' result, a results directory, a results.json path or its document."""
    source, document = _document(results)
    return table_rows(document, source)


def metric_definitions(results: DownloadedResults | Path | str | dict[str, Any]) -> dict[str, str]:
    """What each column of the table means (TPOT and ITL as SageMaker's table means them)."""
    source, document = _document(results)
    return metric_definitions_of(document, source)


def request_shortfalls(results: DownloadedResults | Path | str | dict[str, Any]) -> list[str]:
    """One line per row that measured fewer requests than its level sent, saying why."""
    source, document = _document(results)
    return request_shortfalls_of(document, source)


def deployment_recommendation(
    results: DownloadedResults | Path | str | dict[str, Any],
) -> dict[str, Any] | None:
    """The benchmark's recommendation (what to deploy per concurrency level), None for jobs
    benchmarked before recommendations existed."""
    source, document = _document(results)
    return recommendation_of(document, source)


def _document(results: DownloadedResults | Path | str | dict[str, Any]) -> tuple[str, Any]:
    if isinstance(results, dict):
        return "results.json document", results
    path = results.benchmark_json if isinstance(results, DownloadedResults) else Path(results)
    if path.is_dir():
        path = path / RESULTS_JSON
    try:
        return str(path), json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise FileNotFoundError(f"{path}: no benchmark results there") from None
    except ValueError as error:
        raise ValueError(f"{path}: not JSON: {error}") from None
