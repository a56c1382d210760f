"""The rows of SageMaker's benchmark table, read from a published benchmark/results.json document.

The user-side client and the dashboard both show it.

Columns, as SageMaker's console shows them, plus the configuration and EAGLE's acceptance
length. Latencies are means over the requests, in milliseconds; a configuration without
speculation has no acceptance length (None).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any, TypedDict

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


def table_rows(document: Any, source: str = "results.json document") -> list[BenchmarkTableRow]:
    """The table's rows; ``source`` names the document in errors."""
    rows = document.get("rows") if isinstance(document, dict) else None
    if not isinstance(rows, list):
        raise ValueError(f"{source}: no 'rows' list")
    return [_row(source, index, row) for index, row in enumerate(rows)]


def metric_definitions_of(document: Any, source: str = "results.json document") -> dict[str, str]:
    """What each column means, as the benchmark wrote it; empty for jobs benchmarked before
    results.json carried definitions."""
    definitions = document.get("metric_definitions") if isinstance(document, dict) else None
    if definitions is None:
        return {}
    if not isinstance(definitions, dict) or not all(
        isinstance(key, str) and isinstance(value, str) for key, value in definitions.items()
    ):
        raise ValueError(f"{source}: 'metric_definitions' is not an object of strings")
    return dict(definitions)


def recommendation_of(document: Any, source: str = "results.json document") -> dict[str, Any] | None:
    """The benchmark's recommendation (what to deploy per concurrency level), None for jobs
    benchmarked before recommendations existed."""
    recommendation = document.get("recommendation") if isinstance(document, dict) else None
    if recommendation is not None and not (
        isinstance(recommendation, dict) and isinstance(recommendation.get("levels"), list)
    ):
        raise ValueError(f"{source}: 'recommendation' has no 'levels' list")
    return recommendation


def request_shortfalls_of(document: Any, source: str = "results.json document") -> list[str]:
    """The benchmark's lines for the rows that measured fewer requests than a level sent, and why
    (errored, or still in flight when the level ended); empty for jobs benchmarked before
    results.json carried them."""
    shortfalls = document.get("request_shortfalls") if isinstance(document, dict) else None
    if shortfalls is None:
        return []
    if not isinstance(shortfalls, list) or not all(isinstance(line, str) for line in shortfalls):
        raise ValueError(f"{source}: 'request_shortfalls' is not a list of strings")
    return list(shortfalls)


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
