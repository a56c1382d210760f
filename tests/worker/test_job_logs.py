"""A running job's log lines reach /aws/sagemaker/OptimizationJobs, stream <job name>."""

from __future__ import annotations

import logging

from sqlalchemy.orm import Session, sessionmaker

from core.services.log_writer import OPTIMIZATION_JOBS_GROUP
from db.models.optimization_job_status import OptimizationJobStatus as Status
from db.queries.log_event import read_stream_events
from db.queries.log_group import get_log_group
from db.queries.log_stream import get_log_stream
from db.session import session_scope
from db.settings import Settings
from tests.factories.accounts import create_account
from tests.factories.optimization_jobs import create_optimization_job
from worker.context import JobContext
from worker.job_store import JobStore
from worker.pipeline import Stage
from worker.runner import run_optimization_job

logger = logging.getLogger("tests.worker.stage")


def test_stages_progress_and_logged_lines_land_in_the_jobs_stream(
    worker_session_factory: sessionmaker[Session], worker_settings: Settings
) -> None:
    with session_scope(worker_session_factory) as session:
        owner = create_account(session)
        job = create_optimization_job(
            session, account_id=owner.account_id, aws_account_id=owner.aws_account_id
        )
        job_id, name, region = job.id, job.name, job.region

    def prepare(ctx: JobContext) -> None:
        ctx.report("reading 3 records", fraction=0.5)
        logger.warning("a record was skipped")

    def train(ctx: JobContext) -> None:
        ctx.report("step 1/1 loss 1.25")

    status = run_optimization_job(
        job_id,
        stages=[Stage("prepare", prepare), Stage("train", train)],
        store=JobStore(worker_session_factory),
        settings=worker_settings,
        poll_interval_seconds=0.2,
    )

    assert status is Status.COMPLETED
    with session_scope(worker_session_factory) as session:
        group = get_log_group(
            session, account_id=owner.account_id, region=region, name=OPTIMIZATION_JOBS_GROUP
        )
        assert group is not None
        stream = get_log_stream(session, group_id=group.id, name=name)
        assert stream is not None
        lines = [event.message for event in read_stream_events(session, stream_id=stream.id, limit=100)]
    assert lines[0] == f"Optimization job {name} started"
    assert "[prepare] (25%) reading 3 records" in lines
    assert "WARNING tests.worker.stage: a record was skipped" in lines
    assert "[train] step 1/1 loss 1.25" in lines
    assert lines[-1] == f"Optimization job {name} ended COMPLETED"
