"""The K the publish stage writes into a head's config, chosen from results.json."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from engine.heads.serving_settings import (
    SpeculativeTokens,
    recorded_speculative_tokens,
    served_speculative_tokens,
    with_serving_settings,
)
from worker.head_serving import recommended_tokens, write_recommended_tokens

HEAD = "s3://out/job/eagle_model/"
BASE = "s3://heads/base/"


def _row(
    configuration: str, level: int, throughput: float, *, head: str | None, k: int | None
) -> dict[str, Any]:
    return {
        "configuration": configuration,
        "concurrency": level,
        "head_dir": head,
        "output_throughput": throughput,
        "num_speculative_tokens": k,
        "adaptive": head is not None and k is None,
    }


def _document(enabled_levels: set[int]) -> dict[str, Any]:
    """Levels 1, 2, 4: the trained head's fastest fixed K is 4, 2 and 1; adaptive and the base
    head are faster still at every level (neither may decide the trained head's K)."""
    rows = []
    for level, fastest in ((1, 4), (2, 2), (4, 1)):
        rows.append(_row("No EAGLE", level, 100.0, head=None, k=None))
        rows.append(_row("Base EAGLE", level, 500.0, head=BASE, k=None))
        rows.append(_row("Base EAGLE (K=5)", level, 500.0, head=BASE, k=5))
        rows.append(_row("Trained EAGLE", level, 400.0, head=HEAD, k=None))
        for k in (1, 2, 3, 4):
            rows.append(
                _row(f"Trained EAGLE (K={k})", level, 300.0 if k == fastest else 150.0 + k, head=HEAD, k=k)
            )
    levels = [
        {"concurrency": level, "enable_speculative_decoding": level in enabled_levels} for level in (1, 2, 4)
    ]
    return {"rows": rows, "recommendation": {"levels": levels}}


def test_the_k_of_the_lowest_level_where_speculation_is_recommended() -> None:
    tokens = recommended_tokens(_document({2, 4}), head_uri=HEAD, trained=3)
    assert tokens.recommended == 2
    assert tokens.recommended_at_concurrency == 2
    assert tokens.by_concurrency == {1: 4, 2: 2, 4: 1}
    assert tokens.trained == 3
    assert tokens.served == 2
    assert "lowest level where the benchmark recommends speculative decoding" in tokens.reason


def test_without_any_recommended_level_the_lowest_level_decides() -> None:
    tokens = recommended_tokens(_document(set()), head_uri=HEAD, trained=3)
    assert (tokens.recommended, tokens.recommended_at_concurrency) == (4, 1)
    assert "recommends no speculative decoding" in tokens.reason


def test_without_a_fixed_k_row_the_trained_k_is_served() -> None:
    document = _document({1})
    document["rows"] = [row for row in document["rows"] if row["num_speculative_tokens"] is None]
    tokens = recommended_tokens(document, head_uri=HEAD, trained=3)
    assert tokens == SpeculativeTokens(trained=3, reason=tokens.reason)
    assert tokens.served == 3


def test_the_config_is_rewritten_where_engines_read_it(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    exported = with_serving_settings(
        {"model_type": "llama", "eaglenest": {"target_architecture": "LlamaForCausalLM"}},
        SpeculativeTokens(trained=3),
        verifier_name_or_path="/worker/cache/models/abc",
    )
    path.write_text(json.dumps(exported))
    written = write_recommended_tokens(
        path, _document({1}), head_uri=HEAD, trained=3, verifier="s3://m/tiny/"
    )
    config = json.loads(path.read_text())
    assert served_speculative_tokens(config) == 4
    assert recorded_speculative_tokens(config) == written
    assert config["speculators_config"]["verifier"] == {
        "name_or_path": "s3://m/tiny/",
        "architectures": ["LlamaForCausalLM"],
    }
    first = path.read_bytes()
    write_recommended_tokens(path, _document({1}), head_uri=HEAD, trained=3, verifier="s3://m/tiny/")
    assert path.read_bytes() == first  # a redelivered publish writes the same bytes
