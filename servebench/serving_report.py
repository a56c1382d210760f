"""A serving benchmark's result: one row per (configuration, concurrency level).

Latency and throughput columns are guidellm's measurements as it reports them; acceptance
columns come from the server's own speculative-decoding counters over the same level.
"""

from __future__ import annotations

import csv
import io
from typing import Any

from pydantic import BaseModel, Field, computed_field

from servebench.recommendation import Recommendation

# Column title, row attribute, digits; the order of the SageMaker benchmark table.
TABLE_COLUMNS: tuple[tuple[str, str, int], ...] = (
    ("Configuration", "configuration", 0),
    ("Concurrency", "concurrency", 0),
    ("TTFT (ms)", "ttft_ms", 1),
    ("TPOT (ms)", "tpot_ms", 1),
    ("ITL (ms)", "itl_ms", 1),
    ("Request Throughput (req/s)", "request_throughput", 3),
    ("Output Throughput (tokens/sec)", "output_throughput", 1),
    ("OTPS per request (tokens/sec)", "otps_per_request", 1),
    ("Mean acceptance length", "mean_acceptance_length", 2),
    ("Acceptance by position", "acceptance_by_position", 2),
    ("K", "k_label", 0),
    ("Speedup vs No EAGLE", "speedup_vs_no_eagle", 2),
)
CSV_COLUMNS = (
    "configuration",
    "concurrency",
    "ttft_ms",
    "tpot_ms",
    "itl_ms",
    "request_throughput",
    "output_throughput",
    "otps_per_request",
    "mean_acceptance_length",
    "acceptance_by_position",
    "num_speculative_tokens",
    "mean_draft_tokens",
    "speedup_vs_no_eagle",
    "successful_requests",
    "errored_requests",
    "incomplete_requests",
    "output_tokens_mean",
    "prompt_tokens_mean",
)


# What each column means, as SageMaker's benchmark table means it; printed under every table and
# written into results.json, where the client and the dashboard read it.
METRIC_DEFINITIONS = {
    "TTFT (ms)": "time to first token: from sending the request to the first streamed token, mean.",
    "TPOT (ms)": "time per output token after the first: (last token - first token) / (tokens - 1), "
    "mean over requests.",
    "ITL (ms)": "inter-token latency: the gap between streamed chunks, mean over requests. A "
    "speculative step streams every token it accepted as one chunk, so ITL = TPOT without EAGLE "
    "and about acceptance length x TPOT with it.",
    "Request Throughput (req/s)": "requests completed per second at this concurrency.",
    "Output Throughput (tokens/s)": "output tokens per second, all requests together.",
    "OTPS per request": "output tokens per second of one request, mean over requests.",
    "Acceptance Length": "tokens emitted per target forward pass: 1 + accepted drafts / verification steps.",
}


class ServingRow(BaseModel):
    configuration: str
    concurrency: int
    head_dir: str | None
    ttft_ms: float = Field(description="guidellm: mean time to first token.")
    tpot_ms: float = Field(description=METRIC_DEFINITIONS["TPOT (ms)"])
    itl_ms: float = Field(description=METRIC_DEFINITIONS["ITL (ms)"])
    request_throughput: float = Field(description="guidellm: requests completed per second.")
    output_throughput: float = Field(description="guidellm: output tokens per second, all requests.")
    otps_per_request: float = Field(description="Mean of guidellm's per-request output tokens/s.")
    successful_requests: int
    errored_requests: int
    incomplete_requests: int = Field(
        default=0,
        description="Requests still in flight when guidellm ended the level (its request count was "
        "reached): counted in no mean.",
    )
    output_tokens_mean: float
    prompt_tokens_mean: float
    mean_acceptance_length: float | None = Field(
        default=None, description="1 + accepted / verification steps, from the server's counters."
    )
    acceptance_by_position: list[float] = Field(
        default_factory=list, description="Share of verification steps whose draft i was accepted."
    )
    num_speculative_tokens: int | None = Field(
        default=None, description="K the server was started with; None without a head or when adaptive."
    )
    adaptive: bool = False
    mean_draft_tokens: float | None = Field(
        default=None, description="Draft tokens per verification step the server reported (K in use)."
    )
    speedup_vs_no_eagle: float | None = Field(
        default=None,
        description="Output throughput over No EAGLE's at the same concurrency (its faster run where "
        "it was measured before and after the heads).",
    )

    @property
    def k_label(self) -> str | None:
        if self.head_dir is None:
            return None
        if self.adaptive:
            used = "" if self.mean_draft_tokens is None else f" ({self.mean_draft_tokens:.2f})"
            return f"adaptive{used}"
        return str(self.num_speculative_tokens)


class ServingReport(BaseModel):
    engine: str = Field(description="Server measured: eaglenest or vllm.")
    model_dir: str
    load_generator: str = Field(description="guidellm and its version.")
    concurrency_levels: list[int]
    requests_per_level: int
    max_tokens: int
    stop_at_eos: bool = Field(
        default=False, description="Replies ended at end-of-sequence; else each generated max_tokens."
    )
    prompts: int = Field(description="Distinct prompts sent (they repeat when fewer than requests).")
    prompt_source: list[str]
    seconds: float
    stopped: bool = Field(default=False, description="should_stop() ended the run early.")
    artifacts: dict[str, str] = Field(
        default_factory=dict, description="Server logs and guidellm's raw JSON, by name."
    )
    rows: list[ServingRow]
    unmeasured: list[str] = Field(
        default_factory=list,
        description="Configuration and level pairs with no row: every request was still running when "
        "the level's time limit (a job's deadline) ended it.",
    )
    metric_definitions: dict[str, str] = Field(
        default_factory=lambda: dict(METRIC_DEFINITIONS), description="What each column of the table means."
    )
    recommendation: Recommendation | None = Field(
        default=None,
        description="What to deploy at each concurrency level; None when no No EAGLE row was measured.",
    )

    def row(self, configuration: str, concurrency: int) -> ServingRow:
        for row in self.rows:
            if row.configuration == configuration and row.concurrency == concurrency:
                return row
        raise KeyError(f"no row for {configuration!r} at concurrency {concurrency}")

    def tokens_per_request(self) -> str:
        if self.stop_at_eos:
            return f"up to {self.max_tokens} tokens each (ending at end-of-sequence)"
        return f"{self.max_tokens} tokens each"

    def format_table(self) -> str:
        """A Markdown table with the SageMaker benchmark's columns plus acceptance and K."""
        header = [title for title, _, _ in TABLE_COLUMNS]
        lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
        for row in self.rows:
            cells = [_cell(getattr(row, attribute), digits) for _, attribute, digits in TABLE_COLUMNS]
            lines.append("| " + " | ".join(cells) + " |")
        return "\n".join(lines)

    # Written into results.json beside the rows, so the client and the dashboard print the very
    # lines the benchmark printed (they cannot import this package).
    @computed_field  # type: ignore[prop-decorator]
    @property
    def request_shortfalls(self) -> list[str]:
        """One line per row that measured fewer requests than a level sends, and why: so a reader
        knows how many requests each mean stands on."""
        lines = []
        for row in self.rows:
            short = self.requests_per_level - row.successful_requests
            if short <= 0:
                continue
            # guidellm counts only the requests it started: when its max_requests constraint ends
            # a level, a request still queued behind the concurrency limit is in no count.
            unsent = short - row.errored_requests - row.incomplete_requests
            reasons = [
                f"{count} {reason}"
                for count, reason in (
                    (row.errored_requests, "errored"),
                    (row.incomplete_requests, "still in flight when guidellm ended the level"),
                    (unsent, "not sent before guidellm ended the level"),
                )
                if count > 0
            ]
            why = f" ({', '.join(reasons)})" if reasons else ""
            lines.append(
                f"{row.configuration} at concurrency {row.concurrency}: "
                f"{row.successful_requests} of {self.requests_per_level} requests measured{why}"
            )
        return lines

    def format_definitions(self) -> str:
        """The table's metric definitions, one line each, for under the table."""
        return "\n".join(f"{name}: {meaning}" for name, meaning in self.metric_definitions.items())

    def to_csv(self) -> str:
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        writer.writerow(CSV_COLUMNS)
        for row in self.rows:
            values = row.model_dump()
            values["acceptance_by_position"] = ";".join(f"{p:.4f}" for p in row.acceptance_by_position)
            values["num_speculative_tokens"] = row.k_label
            writer.writerow([_csv_cell(values.get(column)) for column in CSV_COLUMNS])
        return buffer.getvalue()


def _cell(value: Any, digits: int) -> str:
    if value is None or value == []:
        return "-"
    if isinstance(value, list):
        return " ".join(f"{item:.{digits}f}" for item in value)
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def _csv_cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.4f}"
    return str(value)
