"""The optimization-job pipeline: an ordered list of stages, each a ``(ctx) -> None`` function.

validate → data → prepare → base → distil → train → benchmark → publish. Every run of a job starts at the
first stage; each stage finds what an earlier run already did (the local cache, the
checkpoints and staged results on S3) and skips that work, so a redelivered job resumes
where it stopped. When 'validate' finds this job's lineage.json already committed at the
output location, only 'publish' (which finishes its last bookkeeping) runs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from worker.context import JobContext, StageSpan
from worker.stages.base_head import provide_base_head
from worker.stages.benchmark import benchmark_head
from worker.stages.data import resolve_training_data
from worker.stages.distil import distil_across_workers
from worker.stages.prepare import prepare_inputs
from worker.stages.publish import publish_outputs
from worker.stages.train import train_head
from worker.stages.validate import validate_artifacts

StageFunction = Callable[[JobContext], None]


@dataclass(frozen=True)
class Stage:
    name: str
    run: StageFunction
    # Relative share of the job's progress bar; training dominates a real job's time.
    weight: float = 1.0
    # Runs even when the job's outputs are already published (a redelivery after the commit).
    after_commit: bool = False


def default_stages() -> list[Stage]:
    return [
        Stage("validate", validate_artifacts, weight=1.0),
        Stage("data", resolve_training_data, weight=1.0),
        Stage("prepare", prepare_inputs, weight=2.0),
        # Nearly free when the model's base head exists (or none is configured); a training run
        # when this job must build it.
        Stage("base", provide_base_head, weight=2.0),
        # Nearly free unless distillation_shard_conversations fans the job's distillation out.
        Stage("distil", distil_across_workers, weight=8.0),
        Stage("train", train_head, weight=20.0),
        Stage("benchmark", benchmark_head, weight=4.0),
        Stage("publish", publish_outputs, weight=1.0, after_commit=True),
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
        if ctx.artifacts.published_lineage is not None and not stage.after_commit:
            ctx.report(
                f"Stage '{stage.name}' skipped: this job's outputs are already published", fraction=1.0
            )
            continue
        ctx.report(f"Stage '{stage.name}' started", fraction=0.0)
        stage.run(ctx)
        ctx.check()
        ctx.report(f"Stage '{stage.name}' finished", fraction=1.0)
