"""The deployment recommendation: the fastest K per level, or no speculative decoding."""

from __future__ import annotations

from pathlib import Path

import pytest

from servebench.recommendation import recommend
from servebench.serving_config import BenchmarkConfiguration, ServingBenchmarkConfig
from servebench.serving_report import ServingRow
from servebench.serving_run import file_slug
from tests.servebench.serving_rows import serving_row

HEAD = "/heads/trained"


def _row(configuration: str, concurrency: int, throughput: float, **fields: object) -> ServingRow:
    head = None if configuration == "No EAGLE" else HEAD
    return serving_row(configuration, concurrency, head, output_throughput=throughput, **fields)


def test_the_fastest_head_configuration_wins_where_it_beats_no_eagle_beyond_the_margin() -> None:
    rows = [
        _row("No EAGLE", 1, 20.0),
        _row("No EAGLE", 8, 80.0),
        _row("Trained EAGLE", 1, 24.0, adaptive=True),
        _row("Trained EAGLE", 8, 81.0, adaptive=True),
        _row("Trained EAGLE (K=2)", 1, 26.0, num_speculative_tokens=2),
        _row("Trained EAGLE (K=2)", 8, 70.0, num_speculative_tokens=2),
    ]

    recommendation = recommend(rows, "No EAGLE", min_speedup=1.03)

    assert recommendation is not None
    low, high = recommendation.level(1), recommendation.level(8)
    assert low.enable_speculative_decoding
    assert (low.configuration, low.num_speculative_tokens, low.adaptive) == ("Trained EAGLE (K=2)", 2, False)
    assert low.speedup_vs_no_eagle == pytest.approx(1.3)
    assert low.no_eagle_spread is None  # No EAGLE ran once
    # 81 / 80 is inside the noise margin: plain decoding, and the near miss is named.
    assert not high.enable_speculative_decoding
    assert (high.configuration, high.speedup_vs_no_eagle) == ("No EAGLE", 1.0)
    assert high.best_speculative == "Trained EAGLE"
    assert high.best_speculative_speedup == pytest.approx(81 / 80)
    assert recommendation.summary == (
        "concurrency 1: enable EAGLE, Trained EAGLE (K=2) (K=2, 1.30x No EAGLE); "
        "concurrency 8: do not enable speculative decoding (nothing beat No EAGLE by 1.03x; "
        "the best head configuration, Trained EAGLE, gave 1.01x)"
    )


def test_a_head_slower_everywhere_is_never_recommended() -> None:
    rows = [_row("No EAGLE", level, 20.0 * level) for level in (1, 2)]
    rows += [_row("Trained EAGLE", level, 15.0 * level, adaptive=True) for level in (1, 2)]

    recommendation = recommend(rows, "No EAGLE")

    assert recommendation is not None
    assert [level.configuration for level in recommendation.levels] == ["No EAGLE", "No EAGLE"]
    assert all(level.speedup_vs_no_eagle == 1.0 for level in recommendation.levels)


def test_a_head_is_measured_against_the_faster_of_two_no_eagle_runs() -> None:
    # Load went away during the run: No EAGLE gave 20 tokens/s before the heads and 26 after.
    # Against the first run alone the head's 24 would read 1.20x; it is slower than plain
    # decoding on the machine as it was when the run ended.
    rows = [
        _row("No EAGLE", 1, 20.0),
        _row("Trained EAGLE", 1, 24.0, adaptive=True),
        serving_row("No EAGLE (repeat)", 1, None, output_throughput=26.0),
    ]

    level = recommend(rows, "No EAGLE").level(1)  # type: ignore[union-attr]

    assert not level.enable_speculative_decoding
    assert level.configuration == "No EAGLE"
    assert level.best_speculative_speedup == pytest.approx(24 / 26)
    assert level.no_eagle_spread == pytest.approx(1.3)
    assert "No EAGLE's runs before and after the heads differed 1.30x" in recommend(rows, "No EAGLE").summary  # type: ignore[union-attr]


def test_without_a_no_eagle_row_there_is_nothing_to_compare_with() -> None:
    assert recommend([_row("Trained EAGLE", 1, 30.0)], "No EAGLE") is None


def test_k_sweep_adds_a_fixed_k_row_per_head_and_skips_the_k_it_already_runs(tmp_path: Path) -> None:
    config = ServingBenchmarkConfig(
        model_dir=tmp_path,
        prompt_paths=[tmp_path / "p.jsonl"],
        configurations=[
            BenchmarkConfiguration(name="No EAGLE"),
            BenchmarkConfiguration(name="Trained EAGLE", head_dir=tmp_path, num_speculative_tokens=3),
        ],
        k_sweep=[1, 3, 5, 1],
        work_dir=tmp_path,
    )

    measured = config.measured_configurations()

    assert [(c.name, c.num_speculative_tokens) for c in measured] == [
        ("No EAGLE", None),
        ("Trained EAGLE", 3),
        ("Trained EAGLE (K=1)", 1),
        ("Trained EAGLE (K=5)", 5),
        ("No EAGLE (repeat)", None),
    ]
    without_repeat = config.model_copy(update={"repeat_baseline": False}).measured_configurations()
    assert [c.name for c in without_repeat] == [c.name for c in measured[:-1]]


def test_a_configuration_may_sweep_fewer_k_than_the_benchmark(tmp_path: Path) -> None:
    config = ServingBenchmarkConfig(
        model_dir=tmp_path,
        prompt_paths=[tmp_path / "p.jsonl"],
        configurations=[
            BenchmarkConfiguration(name="Base EAGLE", head_dir=tmp_path, k_sweep=[3]),
            BenchmarkConfiguration(name="Other", head_dir=tmp_path, k_sweep=[]),
            BenchmarkConfiguration(name="Trained EAGLE", head_dir=tmp_path),
        ],
        k_sweep=[1, 3],
        work_dir=tmp_path,
    )
    assert [c.name for c in config.measured_configurations()] == [
        "Base EAGLE",
        "Base EAGLE (K=3)",
        "Other",
        "Trained EAGLE",
        "Trained EAGLE (K=1)",
        "Trained EAGLE (K=3)",
    ]
    with pytest.raises(ValueError, match="k_sweep values must be between 1 and 16"):
        config.model_validate(
            {
                **config.model_dump(),
                "configurations": [{"name": "Base EAGLE", "head_dir": tmp_path, "k_sweep": [17]}],
            }
        )


def test_k_sweep_values_outside_what_the_engine_drafts_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="k_sweep values must be between 1 and 16"):
        ServingBenchmarkConfig(
            model_dir=tmp_path,
            prompt_paths=[tmp_path / "p.jsonl"],
            configurations=[BenchmarkConfiguration(name="No EAGLE")],
            k_sweep=[0],
            work_dir=tmp_path,
        )


def test_configuration_names_become_safe_file_names() -> None:
    assert file_slug("Trained EAGLE (K=3)") == "trained-eagle-k-3"
    assert file_slug("Head (/tmp/run/eagle_model)") == "head-tmp-run-eagle-model"
    assert file_slug("///") == "configuration"
