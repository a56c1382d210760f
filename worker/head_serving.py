"""The K a published head is served with: chosen from the job's benchmark, written into its config.

Training exports the head with the K it trained (its TTT steps); only the benchmark shows
which K serves fastest, so the publish stage rewrites ``eagle_model/config.json`` with it
before anything is published (engine.heads.serving_settings says which keys).

One config holds one K, while the benchmark measured several levels. The K written is the
trained head's fastest fixed K at the lowest concurrency level where the recommendation
enables speculative decoding (speculation pays most at low concurrency, and that is the level
a deployment that enables it is tuned for); when no level enables it, at the lowest level
measured. Every level's fastest K goes beside it in ``eaglenest.speculative_tokens``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from engine.heads.serving_settings import SpeculativeTokens, with_serving_settings


def recommended_tokens(document: dict[str, Any], *, head_uri: str, trained: int | None) -> SpeculativeTokens:
    """The speculative tokens for the head at ``head_uri``, from the rows of results.json that
    served it (its adaptive row and one per fixed K all name it in ``head_dir``)."""
    fastest: dict[int, tuple[float, int]] = {}
    for row in document.get("rows") or []:
        k = row.get("num_speculative_tokens")
        if row.get("head_dir") != head_uri or row.get("adaptive") or not isinstance(k, int):
            continue
        level, throughput = int(row["concurrency"]), float(row.get("output_throughput") or 0.0)
        if level not in fastest or throughput > fastest[level][0]:
            fastest[level] = (throughput, k)
    by_concurrency = {level: fastest[level][1] for level in sorted(fastest)}
    if not by_concurrency:
        return SpeculativeTokens(
            trained=trained,
            reason="the benchmark measured no fixed K for this head; K is the trained one",
        )
    enabled = sorted(
        int(level["concurrency"])
        for level in (document.get("recommendation") or {}).get("levels") or []
        if level.get("enable_speculative_decoding") and int(level["concurrency"]) in by_concurrency
    )
    level = enabled[0] if enabled else min(by_concurrency)
    reason = (
        f"the head's fastest fixed K at concurrency {level}, the lowest level where the benchmark "
        "recommends speculative decoding"
        if enabled
        else f"the head's fastest fixed K at concurrency {level}; the benchmark recommends no "
        "speculative decoding at any level measured"
    )
    return SpeculativeTokens(
        trained=trained,
        recommended=by_concurrency[level],
        recommended_at_concurrency=level,
        by_concurrency=by_concurrency,
        reason=reason,
    )


def write_recommended_tokens(
    config_path: Path, document: dict[str, Any], *, head_uri: str, trained: int | None, verifier: str
) -> SpeculativeTokens:
    """Rewrite the head's ``config.json`` in place with the recommended K and the verifier's URI."""
    config = json.loads(config_path.read_text())
    tokens = recommended_tokens(document, head_uri=head_uri, trained=trained)
    updated = with_serving_settings(config, tokens, verifier_name_or_path=verifier)
    config_path.write_text(json.dumps(updated, indent=2) + "\n")
    return tokens
