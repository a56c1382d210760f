"""A serving benchmark row and report with plausible guidellm numbers, for report and recommendation tests."""

from __future__ import annotations

from servebench.serving_report import ServingReport, ServingRow


def serving_row(configuration: str, concurrency: int, head: str | None, **overrides: object) -> ServingRow:
    fields: dict[str, object] = {
        "configuration": configuration,
        "concurrency": concurrency,
        "head_dir": head,
        "ttft_ms": 50.0,
        "tpot_ms": 20.0,
        "itl_ms": 18.0,
        "request_throughput": 0.5,
        "output_throughput": 48.0,
        "otps_per_request": 45.0,
        "successful_requests": 4,
        "errored_requests": 0,
        "output_tokens_mean": 96.0,
        "prompt_tokens_mean": 120.0,
    }
    return ServingRow.model_validate(fields | overrides)


def serving_report(rows: list[ServingRow], **overrides: object) -> ServingReport:
    fields: dict[str, object] = {
        "engine": "eaglenest",
        "model_dir": "/models/smol",
        "load_generator": "guidellm 0.8.1",
        "concurrency_levels": sorted({row.concurrency for row in rows}),
        "requests_per_level": 4,
        "max_tokens": 96,
        "prompts": 4,
        "prompt_source": ["heldout.jsonl"],
        "seconds": 10.0,
        "rows": rows,
    }
    return ServingReport.model_validate(fields | overrides)
