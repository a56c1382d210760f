"""The benchmark stage's one-line summary in the job's events."""

from __future__ import annotations

from servebench.serving_report import ServingReport, ServingRow
from worker.stages.benchmark import TRAINED_HEAD, _summary


def _row(configuration: str, *, acceptance: float | None, head: bool = True) -> ServingRow:
    return ServingRow(
        configuration=configuration,
        concurrency=1,
        head_dir="/heads/trained" if head else None,
        ttft_ms=10.0,
        tpot_ms=5.0,
        itl_ms=5.0,
        request_throughput=1.0,
        output_throughput=120.0,
        otps_per_request=120.0,
        successful_requests=2,
        errored_requests=0,
        output_tokens_mean=8.0,
        prompt_tokens_mean=20.0,
        mean_acceptance_length=acceptance,
        adaptive=head,
        speedup_vs_no_eagle=0.98 if head else 1.0,
    )


def _report(*rows: ServingRow) -> ServingReport:
    return ServingReport(
        engine="eaglenest",
        model_dir="/models/m",
        load_generator="guidellm 0.5",
        concurrency_levels=[1],
        requests_per_level=2,
        max_tokens=8,
        prompts=2,
        prompt_source=["heldout.jsonl"],
        seconds=3.0,
        rows=list(rows),
        unmeasured=[f"{TRAINED_HEAD} at concurrency 2"],
    )


def test_the_summary_gives_the_trained_heads_acceptance_speed_and_unmeasured_levels() -> None:
    summary = _summary(
        _report(_row("No EAGLE", acceptance=None, head=False), _row(TRAINED_HEAD, acceptance=2.31))
    )
    assert summary.startswith(
        "Trained EAGLE (adaptive K) at concurrency 1: acceptance length 2.31, 120.0 tokens/s"
    )
    assert "(0.98x No EAGLE)" in summary
    assert summary.endswith("Not measured (time limit): Trained EAGLE at concurrency 2")


def test_an_adaptive_row_that_never_drafted_says_so_instead_of_an_acceptance_of_zero() -> None:
    summary = _summary(_report(_row(TRAINED_HEAD, acceptance=None)))
    assert "drafted on no step (adaptive K measured drafting as a loss)" in summary
    assert "acceptance length" not in summary


def test_a_report_without_the_trained_head_says_no_level_was_measured() -> None:
    assert _summary(_report(_row("No EAGLE", acceptance=None, head=False))).startswith(
        "Trained EAGLE: no level measured"
    )
