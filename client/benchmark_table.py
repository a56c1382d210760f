"""``benchmark_table``: the rows of SageMaker's benchmark table, read from benchmark/results.json.

Columns, as SageMaker's console shows them, plus the configuration and EAGLE's acceptance
length. Latencies are means over the requests, in milliseconds; a configuration without
speculation has no acceptance length (None).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any, TypedDict

from client.results import DownloadedResults

BenchmarkTableRow = TypedDict(
    "BenchmarkTableRow",
    {
        "Configuration": str,
        "Concurrency": int,
        "TTFT (ms)": float | None,
        "TPOT (ms)": float | None,
        "ITL (ms)": float | None,
        "Request Throughput (req/s)": float,
        "Output Throughput (tokens/s)": float,
        "OTPS per request": float,
        "Acceptance Length": float | None,
        "K": str | None,
        "Speedup vs No EAGLE": float | None,
    },
)
BENCHMARK_TABLE_COLUMNS = tuple(BenchmarkTableRow.__annotations__)
RESULTS_JSON = "benchmark/results.json"


def benchmark_table(results: DownloadedResults | Path | str | dict[str, Any]) -> list[BenchmarkTableRow]:
    """Rows from download_results' result, a results directory, a results.json path or its document."""
    source, document = _document(results)
    rows = document.get("rows") if isinstance(document, dict) else None
    if not isinstance(rows, list):
        raise ValueError(f"{source}: no 'rows' list")
    return [_row(source, index, row) for index, row in enumerate(rows)]


def deployment_recommendation(
    results: DownloadedResults | Path | str | dict[str, Any],
) -> dict[str, Any] | None:
    """The benchmark's recommendation (what to deploy per concurrency level), None for jobs
    benchmarked before recommendations existed."""
    source, document = _document(results)
    recommendation = document.get("recommendation") if isinstance(document, dict) else None
    if recommendation is not None and not (
        isinstance(recommendation, dict) and isinstance(recommendation.get("levels"), list)
    ):
        raise ValueError(f"{source}: 'recommendation' has no 'levels' list")
    return recommendation


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


def _row(source: str, index: int, row: Any) -> BenchmarkTableRow:
    where = f"{source}: rows[{index}]"
    if not isinstance(row, dict):
        raise ValueError(f"{where} is not an object")
    values: dict[str, Any] = row
    latency: Callable[[str], float | None] = partial(_optional_number, where, row)
    acceptance = "mean_acceptance_length"
    if "metrics" in row:
        # Jobs benchmarked before the serving engine (batch 1, concurrency 1) kept their
        # metrics under 'metrics', latencies as distributions.
        values = row["metrics"]
        if not isinstance(values, dict):
            raise ValueError(f"{where}: 'metrics' is not an object")
        latency = partial(_mean, where, values)
        acceptance = "acceptance_length"
    return {
        "Configuration": _required(where, row, "configuration", str),
        "Concurrency": _required(where, row, "concurrency", int),
        "TTFT (ms)": latency("ttft_ms"),
        "TPOT (ms)": latency("tpot_ms"),
        "ITL (ms)": latency("itl_ms"),
        "Request Throughput (req/s)": float(_required(where, values, "request_throughput", (int, float))),
        "Output Throughput (tokens/s)": float(_required(where, values, "output_throughput", (int, float))),
        "OTPS per request": float(_required(where, values, "otps_per_request", (int, float))),
        "Acceptance Length": _optional_number(where, values, acceptance),
        "K": _k_label(row),
        "Speedup vs No EAGLE": _optional_number(where, row, "speedup_vs_no_eagle"),
    }


def _k_label(row: dict[str, Any]) -> str | None:
    if not row.get("head_dir"):
        return None
    if row.get("adaptive"):
        return "adaptive"
    k = row.get("num_speculative_tokens")
    return None if k is None else str(k)


def _required(where: str, data: dict[str, Any], field: str, kind: Any) -> Any:
    value = data.get(field)
    if not isinstance(value, kind) or isinstance(value, bool):
        raise ValueError(f"{where}: {field!r} is missing or not a {getattr(kind, '__name__', 'number')}")
    return value


def _optional_number(where: str, data: dict[str, Any], field: str) -> float | None:
    value = data.get(field)
    if value is None:
        return None
    if not isinstance(value, int | float) or isinstance(value, bool):
        raise ValueError(f"{where}: {field!r} is not a number")
    return float(value)


def _mean(where: str, metrics: dict[str, Any], field: str) -> float | None:
    distribution = metrics.get(field)
    if distribution is None:
        return None  # e.g. TPOT of requests that produced a single token
    if not isinstance(distribution, dict):
        raise ValueError(f"{where}: {field!r} is not a distribution object")
    return _optional_number(f"{where}.{field}", distribution, "mean")
