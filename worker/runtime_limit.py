"""How much of a job's MaxRuntimeInSeconds is left.

The clock starts when the job first went INPROGRESS (``started_at``), not when this
delivery of the task began: a job redelivered after a worker was lost keeps its deadline.
"""

from __future__ import annotations

from datetime import datetime

from core.job_spec import JobSpec
from worker.monitor import RuntimeLimit


def runtime_limit_for(job: JobSpec, *, now: datetime) -> RuntimeLimit | None:
    limit = job.max_runtime_seconds
    if limit is None:
        return None
    started_at = job.started_at or now
    elapsed = (now - started_at).total_seconds()
    return RuntimeLimit(max_runtime_seconds=limit, remaining_seconds=max(0.0, limit - elapsed))
