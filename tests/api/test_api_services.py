"""Service behaviour that needs an unusual setting or failure: limits, a broken queue, production checks."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session

from api.app import DevKeyInProductionError, create_app
from api.aws_json_route import runs_inline
from api.operations.registry import REGISTRY
from api.state import ApiState
from core.principal import Principal
from core.sagemaker.errors import ResourceLimitExceeded
from core.sagemaker.shapes.optimization_jobs import CreateOptimizationJobRequest
from core.services.optimization_jobs import create_job
from db.models.optimization_job_status import OptimizationJobStatus as Status
from db.queries.account import delete_access_key, dev_access_key_exists, ensure_dev_access_key
from db.queries.optimization_job import list_job_events
from db.queries.role import role_arn
from db.session import UnitOfWork, create_db_engine, create_session_factory
from db.settings import Settings
from tests.api.signed_http import signed_headers
from tests.factories.accounts import TEST_ROLE_NAME, AccountCredentials, create_account
from tests.factories.optimization_jobs import create_optimization_job_request


class RecordingDispatcher:
    def __init__(self, fail: bool = False) -> None:
        self.fail = fail
        self.enqueued: list[int] = []

    def enqueue_optimization_job(self, job_id: int) -> str:
        if self.fail:
            raise ConnectionError("broker unreachable")
        self.enqueued.append(job_id)
        return f"task-{job_id}"

    def request_stop(self, job_id: int, task_id: str | None) -> None:
        raise AssertionError("not expected")


def principal_for(session: Session) -> Principal:
    owner = create_account(session)
    return Principal(owner.account_id, owner.aws_account_id, owner.access_key_id, "us-west-2")


def request(principal: Principal, **overrides: Any) -> CreateOptimizationJobRequest:
    """A valid request naming ``principal``'s own role (create_account registers it)."""
    role = role_arn(aws_account_id=principal.aws_account_id, name=TEST_ROLE_NAME)
    return CreateOptimizationJobRequest.model_validate(
        create_optimization_job_request(RoleArn=role, **overrides)
    )


def test_active_job_limit_is_resource_limit_exceeded(db_session: Session) -> None:
    principal = principal_for(db_session)
    dispatcher = RecordingDispatcher()
    unit = UnitOfWork(db_session)
    first = create_job(
        unit, principal=principal, request=request(principal), dispatcher=dispatcher, max_active_jobs=1
    )
    unit.commit()  # the request's boundary: commit, then queue
    assert dispatcher.enqueued == [first.id]
    assert first.celery_task_id == f"task-{first.id}"
    with pytest.raises(ResourceLimitExceeded, match="already has 1 active optimization jobs"):
        create_job(
            unit, principal=principal, request=request(principal), dispatcher=dispatcher, max_active_jobs=1
        )


def test_a_job_that_cannot_be_queued_fails_with_the_reason(db_session: Session) -> None:
    principal = principal_for(db_session)
    unit = UnitOfWork(db_session)
    job = create_job(
        unit,
        principal=principal,
        request=request(principal),
        dispatcher=RecordingDispatcher(fail=True),
        max_active_jobs=10,
    )
    unit.commit()  # the request's boundary: commit, then queue (which fails)
    assert job.status is Status.FAILED
    assert job.failure_reason == "The job could not be queued for a worker: broker unreachable"
    assert [event.status for event in list_job_events(db_session, job_id=job.id)] == [
        Status.STARTING,
        Status.FAILED,
    ]


def test_production_refuses_to_start_with_the_dev_key(database_url: str) -> None:
    factory = create_session_factory(create_db_engine(database_url))
    with factory() as session:
        ensure_dev_access_key(session)
        session.commit()
    production = Settings(database_url=database_url, environment="production", secret_key="prod-secret")
    try:
        with (
            pytest.raises(DevKeyInProductionError, match="eaglenest keys delete test"),
            TestClient(create_app(production, dispatcher=RecordingDispatcher())),
        ):
            pass
        allowed = production.model_copy(update={"allow_dev_key": True})
        with TestClient(create_app(allowed, dispatcher=RecordingDispatcher())) as client:
            assert client.get("/healthz").json() == {"status": "ok"}
    finally:
        with factory() as session:
            delete_access_key(session, access_key_id="test")
            session.commit()


def test_seeding_creates_the_dev_key(database_url: str) -> None:
    seeded = Settings(database_url=database_url, seed_dev_key=True)
    factory = create_session_factory(create_db_engine(database_url))
    try:
        with TestClient(create_app(seeded, dispatcher=RecordingDispatcher())):
            pass
        with factory() as session:
            assert dev_access_key_exists(session)
    finally:
        with factory() as session:
            delete_access_key(session, access_key_id="test")
            session.commit()


def test_an_unreachable_database_is_a_retryable_internal_failure_and_unhealthy() -> None:
    # Port 1 refuses connections at once: every database access fails.
    broken = Settings(
        database_url="postgresql+psycopg://postgres@127.0.0.1:1/none", api_hostnames=["testserver"]
    )
    app = create_app(broken, dispatcher=RecordingDispatcher())
    app.router.lifespan_context = _no_lifespan  # start-up would fail on the same database
    credentials = AccountCredentials(0, "111122223333", "AKIAUNREACHABLE00000", "secret")
    with TestClient(app, raise_server_exceptions=False) as client:
        url = "http://testserver/"
        headers = signed_headers(
            "POST", url, b"{}", credentials, headers={"X-Amz-Target": "SageMaker.ListModels"}
        )
        response = client.post("/", content=b"{}", headers=headers)
        assert response.status_code == 500
        body = response.json()
        request_id = response.headers["x-amzn-requestid"]
        assert body == {
            "__type": "InternalFailure",
            "message": f"An internal error occurred; request id {request_id}.",
        }
        health = client.get("/healthz")
        assert health.status_code == 503
        assert health.json() == {"status": "unavailable", "detail": "database unreachable: OperationalError"}


@asynccontextmanager
async def _no_lifespan(_: object) -> AsyncIterator[None]:
    yield


def test_only_reads_on_postgres_skip_the_thread_pool() -> None:
    postgres = ApiState.build(Settings(), RecordingDispatcher())
    sqlite = ApiState.build(Settings(database_url="sqlite://"), RecordingDispatcher())
    describe, create = REGISTRY.get("DescribeOptimizationJob"), REGISTRY.get("CreateOptimizationJob")
    assert runs_inline(describe, postgres)
    assert not runs_inline(create, postgres)
    assert not runs_inline(describe, sqlite)
    assert not runs_inline(None, postgres)
    postgres.engine.dispose()
    sqlite.engine.dispose()
