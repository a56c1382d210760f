"""What to deploy, per concurrency level: the fastest configuration, or plain decoding.

A speculative configuration is recommended at a level only when its output throughput beats
No EAGLE's by more than ``min_speedup`` (a margin for run-to-run noise): a head that is not
clearly faster is not worth its memory and its risk, and a recommendation must never make
serving slower than not following it.

Where No EAGLE was measured twice (before and after the heads, ``repeat_baseline``), the
faster of its runs is the reference: load that changed during the benchmark then shows as the
gap between the two runs (``no_eagle_spread``) instead of as a head's speedup.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, Field

# Repeated runs of the same configuration on a quiet 2-core machine differ by 1-3% in
# output throughput; a smaller win than this is not told apart from noise.
DEFAULT_MIN_SPEEDUP = 1.03


class LevelRecommendation(BaseModel):
    concurrency: int
    enable_speculative_decoding: bool
    configuration: str = Field(description="The configuration to deploy: a head's row, or No EAGLE.")
    num_speculative_tokens: int | None = Field(
        default=None, description="K to serve with; None for plain decoding or adaptive K."
    )
    adaptive: bool = Field(default=False, description="Serve with the engine's adaptive K.")
    speedup_vs_no_eagle: float = Field(
        description="The recommended configuration's speedup (1.0 for No EAGLE)."
    )
    best_speculative: str | None = Field(
        default=None, description="The fastest configuration with a head, even when not recommended."
    )
    best_speculative_speedup: float | None = None
    no_eagle_spread: float | None = Field(
        default=None,
        description="The faster No EAGLE run's output throughput over the slower one's at this level "
        "(1.00: no drift between them); None where it ran once.",
    )


class Recommendation(BaseModel):
    min_speedup: float = Field(description="A head must beat No EAGLE by this factor to be recommended.")
    levels: list[LevelRecommendation]
    summary: str

    def level(self, concurrency: int) -> LevelRecommendation:
        for level in self.levels:
            if level.concurrency == concurrency:
                return level
        raise KeyError(f"no recommendation for concurrency {concurrency}")


class _MeasuredRow(BaseModel):
    """The fields of a benchmark row the recommendation reads."""

    configuration: str
    concurrency: int
    head_dir: str | None
    output_throughput: float
    num_speculative_tokens: int | None = None
    adaptive: bool = False


def recommend(
    rows: Sequence[BaseModel], baseline: str, *, min_speedup: float = DEFAULT_MIN_SPEEDUP
) -> Recommendation | None:
    """The recommendation for every level that has a ``baseline`` row; None when none has."""
    measured = [_MeasuredRow.model_validate(row.model_dump()) for row in rows]
    reference = no_eagle_reference(measured)
    levels = []
    for concurrency in dict.fromkeys(row.concurrency for row in measured):
        at_level = [row for row in measured if row.concurrency == concurrency]
        plain = next((row for row in at_level if row.configuration == baseline), None)
        if plain is None or reference.get(concurrency, 0.0) <= 0:
            continue
        plain_runs = [row.output_throughput for row in at_level if row.head_dir is None]
        level = _level(
            plain, reference[concurrency], [row for row in at_level if row.head_dir is not None], min_speedup
        )
        if len(plain_runs) > 1 and min(plain_runs) > 0:
            level.no_eagle_spread = max(plain_runs) / min(plain_runs)
        levels.append(level)
    if not levels:
        return None
    return Recommendation(min_speedup=min_speedup, levels=levels, summary=_summary(levels, min_speedup))


def no_eagle_reference(rows: Sequence[BaseModel]) -> dict[int, float]:
    """Per concurrency level, the output throughput every speedup is taken against: the faster
    run of the configuration without a head (it may have run before and after the heads)."""
    reference: dict[int, float] = {}
    for row in (_MeasuredRow.model_validate(row.model_dump()) for row in rows):
        if row.head_dir is None:
            reference[row.concurrency] = max(reference.get(row.concurrency, 0.0), row.output_throughput)
    return reference


def _level(
    plain: _MeasuredRow, reference: float, heads: list[_MeasuredRow], min_speedup: float
) -> LevelRecommendation:
    best = max(heads, key=lambda row: row.output_throughput, default=None)
    best_speedup = None if best is None else best.output_throughput / reference
    if best is None or best_speedup is None or best_speedup < min_speedup:
        return LevelRecommendation(
            concurrency=plain.concurrency,
            enable_speculative_decoding=False,
            configuration=plain.configuration,
            speedup_vs_no_eagle=1.0,
            best_speculative=None if best is None else best.configuration,
            best_speculative_speedup=best_speedup,
        )
    return LevelRecommendation(
        concurrency=plain.concurrency,
        enable_speculative_decoding=True,
        configuration=best.configuration,
        num_speculative_tokens=best.num_speculative_tokens,
        adaptive=best.adaptive,
        speedup_vs_no_eagle=best_speedup,
        best_speculative=best.configuration,
        best_speculative_speedup=best_speedup,
    )


def describe_k(level: LevelRecommendation) -> str:
    if not level.enable_speculative_decoding:
        return "no speculative decoding"
    return "adaptive K" if level.adaptive else f"K={level.num_speculative_tokens}"


def _summary(levels: list[LevelRecommendation], min_speedup: float) -> str:
    parts = []
    for level in levels:
        if level.enable_speculative_decoding:
            parts.append(
                f"concurrency {level.concurrency}: enable EAGLE, {level.configuration} "
                f"({describe_k(level)}, {level.speedup_vs_no_eagle:.2f}x No EAGLE)"
            )
        else:
            best = (
                ""
                if level.best_speculative is None
                else f"; the best head configuration, {level.best_speculative}, "
                f"gave {level.best_speculative_speedup or 0:.2f}x"
            )
            parts.append(
                f"concurrency {level.concurrency}: do not enable speculative decoding "
                f"(nothing beat No EAGLE by {min_speedup:.2f}x{best})"
            )
        if level.no_eagle_spread is not None and level.no_eagle_spread > min_speedup:
            parts[-1] += (
                f" [No EAGLE's runs before and after the heads differed {level.no_eagle_spread:.2f}x: "
                "the machine's load changed during the benchmark]"
            )
    return "; ".join(parts)
