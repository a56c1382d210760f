"""The optimization-job pipeline: an ordered list of stages, each a ``(ctx) -> None`` function.

The full pipeline is validate → data → prepare → train → benchmark → publish. Stages that
this build does not implement yet are still listed, so a job runs what exists and then
fails with a FailureReason naming the missing stage; it never reports COMPLETED for work
it did not do.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from worker.context import JobContext, StageSpan
from worker.errors import StageNotAvailableError
from worker.validate import validate_artifacts

StageFunction = Callable[[JobContext], None]

PIPELINE_STAGE_NAMES = ("validate", "data", "prepare", "train", "benchmark", "publish")


@dataclass(frozen=True)
class Stage:
    name: str
    run: StageFunction
    # Relative share of the job's progress bar; training dominates a real job's time.
    weight: float = 1.0


def stage_not_available(name: str) -> StageFunction:
    def fail(ctx: JobContext) -> None:
        raise StageNotAvailableError(name)

    return fail


IMPLEMENTED_STAGES: dict[str, StageFunction] = {"validate": validate_artifacts}


def default_stages() -> list[Stage]:
    return [
        Stage(name, IMPLEMENTED_STAGES.get(name) or stage_not_available(name))
        for name in PIPELINE_STAGE_NAMES
    ]


def run_pipeline(ctx: JobContext, stages: Sequence[Stage]) -> None:
    """Run the stages in order; each start is recorded as progress. Raises what a stage raises."""
    total_weight = sum(stage.weight for stage in stages) or 1.0
    done_weight = 0.0
    for stage in stages:
        ctx.check()
        start = 100.0 * done_weight / total_weight
        done_weight += stage.weight
        ctx.span = StageSpan(stage.name, start, 100.0 * done_weight / total_weight)
        ctx.report(f"Stage '{stage.name}' started", fraction=0.0)
        stage.run(ctx)
        ctx.check()
        ctx.report(f"Stage '{stage.name}' finished", fraction=1.0)
