"""Drive optimization jobs through the api with boto3 and read their history from the database."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from sqlalchemy.orm import Session, sessionmaker

from db.models.optimization_job import OptimizationJob
from db.models.optimization_job_status import OptimizationJobStatus
from db.queries.optimization_job import get_optimization_job_by_name, list_job_events
from db.session import session_scope
from tests.factories.accounts import AccountCredentials
from tests.factories.optimization_jobs import create_optimization_job_request
from tests.worker.endpoint_clients import WORKER_REGION


class WorkerJobs:
    """Drives jobs of one account through the api (boto3) and reads their history from the db."""

    def __init__(
        self, sagemaker: Any, account: AccountCredentials, session_factory: sessionmaker[Session]
    ) -> None:
        self.sagemaker = sagemaker
        self.account = account
        self.session_factory = session_factory

    def create(self, model_uri: str, *, max_runtime: int = 3600) -> str:
        return self.create_request(
            ModelSource={"S3": {"S3Uri": model_uri}}, StoppingCondition={"MaxRuntimeInSeconds": max_runtime}
        )

    def create_request(self, **overrides: Any) -> str:
        """CreateOptimizationJob with the factory's valid body and these members replaced."""
        request = create_optimization_job_request(**overrides)
        self.sagemaker.create_optimization_job(**request)
        return str(request["OptimizationJobName"])

    def row(self, name: str) -> OptimizationJob:
        """The job's row as the worker left it (stage, last message, task id)."""
        with session_scope(self.session_factory) as session:
            job = get_optimization_job_by_name(
                session, account_id=self.account.account_id, region=WORKER_REGION, name=name
            )
            assert job is not None
            return job

    def wait_until(
        self, name: str, condition: Callable[[OptimizationJob], bool], *, timeout: float = 60
    ) -> OptimizationJob:
        """Poll the job's row until ``condition`` holds; fail naming its last stage and message."""
        deadline = time.monotonic() + timeout
        while True:
            job = self.row(name)
            if condition(job):
                return job
            if job.status.is_terminal or time.monotonic() > deadline:
                pytest.fail(
                    f"job {name}: {job.status} in stage {job.stage}: {job.last_message} "
                    f"({job.failure_reason})"
                )
            time.sleep(0.2)

    def describe(self, name: str) -> dict[str, Any]:
        job: dict[str, Any] = self.sagemaker.describe_optimization_job(OptimizationJobName=name)
        return job

    def status(self, name: str) -> str:
        return str(self.describe(name)["OptimizationJobStatus"])

    def stop(self, name: str) -> None:
        self.sagemaker.stop_optimization_job(OptimizationJobName=name)

    def wait_for(self, name: str, statuses: set[str], *, timeout: float = 90) -> dict[str, Any]:
        """Poll until the status is one of ``statuses``; fail naming the status last seen.

        The default is a deadline for "eventually", not a speed target: a job's first task
        forks a pool process that imports the runner (~5 s quiet), and with three pytest
        processes on two cores that took over 30 s in CI. Tests that promise a speed pass a
        short ``timeout`` and assert the elapsed time themselves.
        """
        deadline = time.monotonic() + timeout
        while True:
            job = self.describe(name)
            if job["OptimizationJobStatus"] in statuses:
                return job
            if time.monotonic() > deadline:
                pytest.fail(f"job {name} still {job['OptimizationJobStatus']} after {timeout} s: {job}")
            time.sleep(0.2)

    def history(self, name: str) -> list[OptimizationJobStatus]:
        """Every status the job went through, from its event history."""
        return [status for status, _ in self.events(name)]

    def events(self, name: str) -> list[tuple[OptimizationJobStatus, str]]:
        """(status, message) of every event of the job, oldest first."""
        with session_scope(self.session_factory) as session:
            job = get_optimization_job_by_name(
                session, account_id=self.account.account_id, region=WORKER_REGION, name=name
            )
            assert job is not None
            return [(event.status, event.message) for event in list_job_events(session, job_id=job.id)]
