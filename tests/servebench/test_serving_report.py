"""The serving benchmark's table and CSV: SageMaker's columns plus acceptance and K."""

from __future__ import annotations

import csv
import io

from servebench.serving_report import ServingReport
from tests.servebench.serving_rows import serving_report, serving_row

_row = serving_row


def _report() -> ServingReport:
    return serving_report(
        [
            _row("No EAGLE", 1, None, speedup_vs_no_eagle=1.0),
            _row(
                "Trained EAGLE",
                1,
                "/heads/trained",
                output_throughput=96.0,
                mean_acceptance_length=2.4,
                acceptance_by_position=[0.7, 0.45, 0.25],
                adaptive=True,
                mean_draft_tokens=3.5,
                speedup_vs_no_eagle=2.0,
            ),
        ]
    )


def test_table_has_the_sagemaker_columns_and_acceptance() -> None:
    lines = _report().format_table().splitlines()

    assert lines[0].startswith(
        "| Configuration | Concurrency | TTFT (ms) | TPOT (ms) | ITL (ms) | Request Throughput (req/s) "
        "| Output Throughput (tokens/sec) | OTPS per request (tokens/sec) | Mean acceptance length "
    )
    assert lines[2] == "| No EAGLE | 1 | 50.0 | 20.0 | 18.0 | 0.500 | 48.0 | 45.0 | - | - | - | 1.00 |"
    assert lines[3] == (
        "| Trained EAGLE | 1 | 50.0 | 20.0 | 18.0 | 0.500 | 96.0 | 45.0 | 2.40 | 0.70 0.45 0.25 "
        "| adaptive (3.50) | 2.00 |"
    )


def test_csv_has_one_row_per_configuration_and_level() -> None:
    rows = list(csv.DictReader(io.StringIO(_report().to_csv())))

    assert [(r["configuration"], r["concurrency"]) for r in rows] == [
        ("No EAGLE", "1"),
        ("Trained EAGLE", "1"),
    ]
    assert rows[0]["mean_acceptance_length"] == ""
    assert rows[1]["acceptance_by_position"] == "0.7000;0.4500;0.2500"
    assert rows[1]["num_speculative_tokens"] == "adaptive (3.50)"
    assert rows[1]["output_throughput"] == "96.0000"


def test_fixed_k_is_reported_as_given() -> None:
    row = _row("Trained EAGLE", 1, "/heads/trained", num_speculative_tokens=3)
    assert row.k_label == "3"
    assert _row("No EAGLE", 1, None).k_label is None


def test_rows_that_measured_fewer_requests_than_sent_say_why() -> None:
    report = serving_report(
        [
            _row("No EAGLE", 1, None),
            _row("No EAGLE", 2, None, successful_requests=3, incomplete_requests=1),
            _row("Trained EAGLE", 2, "/heads/trained", successful_requests=2, errored_requests=1),
            # guidellm's totals hold only the requests it started.
            _row("No EAGLE (repeat)", 2, None, successful_requests=2, incomplete_requests=1),
        ]
    )

    assert report.request_shortfalls == [
        "No EAGLE at concurrency 2: 3 of 4 requests measured "
        "(1 still in flight when guidellm ended the level)",
        "Trained EAGLE at concurrency 2: 2 of 4 requests measured (1 errored, 1 not sent before "
        "guidellm ended the level)",
        "No EAGLE (repeat) at concurrency 2: 2 of 4 requests measured "
        "(1 still in flight when guidellm ended the level, 1 not sent before guidellm ended the level)",
    ]
    rows = list(csv.DictReader(io.StringIO(report.to_csv())))
    assert [r["incomplete_requests"] for r in rows] == ["0", "1", "0", "1"]
    # results.json carries the same lines for the client, and still reads back as a report.
    document = report.model_dump(mode="json")
    assert document["request_shortfalls"] == report.request_shortfalls
    assert ServingReport.model_validate(document).request_shortfalls == report.request_shortfalls


def test_a_report_written_before_incomplete_requests_were_counted_still_loads() -> None:
    document = _report().model_dump(mode="json")
    for row in document["rows"]:
        del row["incomplete_requests"]

    assert [row.incomplete_requests for row in ServingReport.model_validate(document).rows] == [0, 0]
