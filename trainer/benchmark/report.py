"""The benchmark's result: one row per (configuration, concurrency), as JSON, CSV and a table."""

from __future__ import annotations

import csv
import io
from typing import Any

from pydantic import BaseModel, Field

# CSV columns, in order: the SageMaker benchmark table's metrics plus acceptance length.
CSV_COLUMNS = (
    "configuration",
    "concurrency",
    "requests",
    "output_tokens",
    "ttft_ms_mean",
    "ttft_ms_median",
    "ttft_ms_p99",
    "tpot_ms_mean",
    "tpot_ms_median",
    "tpot_ms_p99",
    "itl_ms_mean",
    "itl_ms_median",
    "itl_ms_p99",
    "request_throughput",
    "output_throughput",
    "otps_per_request",
    "acceptance_length",
    "speedup_vs_no_eagle",
    "identical_outputs",
)


class BenchmarkRow(BaseModel):
    configuration: str
    concurrency: int
    head_dir: str | None
    metrics: dict[str, Any] = Field(description="ServingMetrics.to_json() of this row.")
    speedup_vs_no_eagle: float | None = Field(
        default=None, description="Output throughput over the 'No EAGLE' row at the same concurrency."
    )
    identical_outputs: int | None = Field(
        default=None, description="Requests whose greedy output equals plain decoding's (lossless check)."
    )


class BenchmarkReport(BaseModel):
    engine: str
    concurrency_levels: list[int]
    num_speculative_tokens: int
    max_new_tokens: int
    prompts: int
    prompts_offered: int
    dtype: str
    threads: int
    seconds: float
    stopped: bool = Field(default=False, description="should_stop() ended the run early.")
    rows: list[BenchmarkRow]

    def row(self, configuration: str, concurrency: int = 1) -> BenchmarkRow:
        for row in self.rows:
            if row.configuration == configuration and row.concurrency == concurrency:
                return row
        raise KeyError(f"no row for {configuration!r} at concurrency {concurrency}")

    def to_csv(self) -> str:
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        writer.writerow(CSV_COLUMNS)
        for row in self.rows:
            writer.writerow([_cell(_flat(row).get(column)) for column in CSV_COLUMNS])
        return buffer.getvalue()

    def format_table(self) -> str:
        header = (
            f"{'configuration':<16} {'conc':>4} {'TTFT ms':>9} {'TPOT ms':>9} {'ITL ms':>9} "
            f"{'req/s':>7} {'out tok/s':>9} {'OTPS/req':>9} {'accept':>6} {'speedup':>7}"
        )
        lines = [header, "-" * len(header)]
        for row in self.rows:
            flat = _flat(row)
            lines.append(
                f"{row.configuration:<16} {row.concurrency:>4} {_num(flat['ttft_ms_mean']):>9} "
                f"{_num(flat['tpot_ms_mean']):>9} {_num(flat['itl_ms_mean']):>9} "
                f"{_num(flat['request_throughput'], 3):>7} {_num(flat['output_throughput']):>9} "
                f"{_num(flat['otps_per_request']):>9} {_num(flat['acceptance_length']):>6} "
                f"{_num(flat['speedup_vs_no_eagle']) + ('x' if flat['speedup_vs_no_eagle'] else ''):>7}"
            )
        return "\n".join(lines)


def _flat(row: BenchmarkRow) -> dict[str, Any]:
    metrics = row.metrics
    flat: dict[str, Any] = {
        "configuration": row.configuration,
        "concurrency": row.concurrency,
        "requests": metrics["requests"],
        "output_tokens": metrics["output_tokens"],
        "request_throughput": metrics["request_throughput"],
        "output_throughput": metrics["output_throughput"],
        "otps_per_request": metrics["otps_per_request"],
        "acceptance_length": metrics["acceptance_length"],
        "speedup_vs_no_eagle": row.speedup_vs_no_eagle,
        "identical_outputs": row.identical_outputs,
    }
    for name in ("ttft_ms", "tpot_ms", "itl_ms"):
        distribution = metrics.get(name) or {}
        for statistic in ("mean", "median", "p99"):
            flat[f"{name}_{statistic}"] = distribution.get(statistic)
    return flat


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.4f}"
    return str(value)


def _num(value: Any, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"
