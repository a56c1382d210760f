"""The benchmark stage's one-line summary in the job's events."""

from __future__ import annotations

from servebench.serving_report import ServingReport, ServingRow
from tests.servebench.serving_rows import serving_report, serving_row
from worker.stages.benchmark import TRAINED_HEAD, _summary

NO_EAGLE = serving_row("No EAGLE", 1, None, speedup_vs_no_eagle=1.0)


def _trained(acceptance: float | None) -> ServingRow:
    return serving_row(
        TRAINED_HEAD,
        1,
        "/heads/trained",
        output_throughput=120.0,
        mean_acceptance_length=acceptance,
        adaptive=True,
        speedup_vs_no_eagle=0.98,
    )


def _report(*rows: ServingRow) -> ServingReport:
    return serving_report(list(rows), unmeasured=[f"{TRAINED_HEAD} at concurrency 2"])


def test_the_summary_gives_the_trained_heads_acceptance_speed_and_unmeasured_levels() -> None:
    summary = _summary(_report(NO_EAGLE, _trained(2.31)))
    assert summary.startswith(
        "Trained EAGLE (adaptive K) at concurrency 1: acceptance length 2.31, 120.0 tokens/s"
    )
    assert "(0.98x No EAGLE)" in summary
    assert summary.endswith("Not measured (time limit): Trained EAGLE at concurrency 2")


def test_an_adaptive_row_that_never_drafted_says_so_instead_of_an_acceptance_of_zero() -> None:
    summary = _summary(_report(NO_EAGLE, _trained(None)))
    assert "drafted on no step (adaptive K measured drafting as a loss)" in summary
    assert "acceptance length" not in summary


def test_a_report_without_the_trained_head_says_no_level_was_measured() -> None:
    assert _summary(_report(NO_EAGLE)).startswith("Trained EAGLE: no level measured")


def test_the_summary_names_rows_that_measured_fewer_requests_than_sent() -> None:
    cut = serving_row("No EAGLE", 2, None, successful_requests=3, incomplete_requests=1)
    summary = _summary(_report(NO_EAGLE, cut, _trained(2.31)))
    assert summary.endswith(
        "No EAGLE at concurrency 2: 3 of 4 requests measured "
        "(1 still in flight when guidellm ended the level)"
    )
