"""The runner end to end on a real database and SeaweedFS, with the stage list injected where needed."""

from __future__ import annotations

import threading
import time
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy.orm import Session, sessionmaker

from db.models.optimization_job_status import OptimizationJobStatus as Status
from db.queries.optimization_job import (
    get_optimization_job_by_id,
    list_job_events,
    transition_optimization_job,
)
from db.session import session_scope
from db.settings import Settings
from db.types import utc_now
from tests.factories.accounts import create_account
from tests.factories.optimization_jobs import create_optimization_job
from tests.worker.s3_models import upload_model
from worker.context import JobContext
from worker.job_store import JobStore
from worker.pipeline import Stage
from worker.runner import run_optimization_job

SessionFactory = sessionmaker[Session]


@pytest.fixture
def store(worker_session_factory: SessionFactory) -> JobStore:
    return JobStore(worker_session_factory)


@pytest.fixture
def model_uri(s3_client: Any, s3_bucket: str) -> str:
    return upload_model(s3_client, s3_bucket, "models/tiny")


def _new_job(factory: SessionFactory, model_uri: str, **overrides: Any) -> int:
    """A committed STARTING job of a fresh account whose base model is at ``model_uri``."""
    with session_scope(factory) as session:
        owner = create_account(session)
        job = create_optimization_job(
            session,
            account_id=owner.account_id,
            aws_account_id=owner.aws_account_id,
            model_source={"S3": {"S3Uri": model_uri}},
            **overrides,
        )
        return job.id


def _job(factory: SessionFactory, job_id: int) -> Any:
    with session_scope(factory) as session:
        job = get_optimization_job_by_id(session, job_id=job_id)
        assert job is not None
        events = [
            (event.status, event.stage, event.message) for event in list_job_events(session, job_id=job_id)
        ]
        return job, events


def _set_status(factory: SessionFactory, job_id: int, status: Status, message: str) -> None:
    with session_scope(factory) as session:
        job = get_optimization_job_by_id(session, job_id=job_id)
        assert job is not None
        transition_optimization_job(session, job=job, status=status, message=message)


def _wait_cooperatively(ctx: JobContext) -> None:
    """A long stage that checks its stop flag, as the training loop does between steps."""
    while True:
        ctx.check()
        time.sleep(0.05)


def _run(
    job_id: int, store: JobStore, settings: Settings, stages: list[Stage] | None = None
) -> Status | None:
    return run_optimization_job(
        job_id,
        stages=stages,
        store=store,
        settings=settings,
        poll_interval_seconds=0.2,
        interrupt_grace_seconds=2,
    )


def test_a_missing_job_returns_early(store: JobStore, worker_settings: Settings) -> None:
    assert _run(987_654_321, store, worker_settings) is None


def test_a_finished_job_is_left_alone(
    store: JobStore, worker_settings: Settings, worker_session_factory: SessionFactory, model_uri: str
) -> None:
    job_id = _new_job(worker_session_factory, model_uri)
    _set_status(worker_session_factory, job_id, Status.FAILED, "failed earlier")
    _, events_before = _job(worker_session_factory, job_id)

    assert _run(job_id, store, worker_settings) is None

    job, events_after = _job(worker_session_factory, job_id)
    assert job.status is Status.FAILED
    assert events_after == events_before


def test_a_job_stopped_before_it_started_is_confirmed_stopped(
    store: JobStore, worker_settings: Settings, worker_session_factory: SessionFactory, model_uri: str
) -> None:
    job_id = _new_job(worker_session_factory, model_uri)
    _set_status(worker_session_factory, job_id, Status.STOPPING, "Stop requested")

    assert _run(job_id, store, worker_settings) is None

    job, events = _job(worker_session_factory, job_id)
    assert job.status is Status.STOPPED
    assert Status.INPROGRESS not in [status for status, _, _ in events]


def test_a_job_whose_stored_request_does_not_parse_fails_when_claimed(
    store: JobStore, worker_settings: Settings, worker_session_factory: SessionFactory, model_uri: str
) -> None:
    # The api stores only validated requests; this row was edited by hand.
    job_id = _new_job(worker_session_factory, model_uri, output_config={"KmsKeyId": "key"})

    assert _run(job_id, store, worker_settings) is None

    job, events = _job(worker_session_factory, job_id)
    assert job.status is Status.FAILED
    assert job.failure_reason == (
        "The job's stored request cannot be read: OutputConfig.S3OutputLocation: Field required"
    )
    assert [status for status, _, _ in events] == [Status.STARTING, Status.INPROGRESS, Status.FAILED]


def test_the_default_pipeline_stops_at_the_first_failing_stage(
    store: JobStore,
    worker_settings: Settings,
    worker_session_factory: SessionFactory,
    s3_client: Any,
    s3_bucket: str,
) -> None:
    # A complete model, but the job names training data that is not there.
    model = upload_model(s3_client, s3_bucket, "models/complete")
    job_id = _new_job(
        worker_session_factory,
        model,
        optimization_configs=[
            {
                "ModelSpeculativeDecodingConfig": {
                    "Technique": "EAGLE",
                    "TrainingDataSource": {"S3Uri": f"s3://{s3_bucket}/no-data/", "S3DataType": "S3Prefix"},
                }
            }
        ],
    )

    assert _run(job_id, store, worker_settings) is Status.FAILED

    job, all_events = _job(worker_session_factory, job_id)
    assert job.failure_reason == (
        f"No training data files (.jsonl, .json, .jsonl.gz, .json.gz) under s3://{s3_bucket}/no-data/"
    )
    # The test model lacks files SageMaker lists but a model can do without: validation warnings.
    warnings = [event for event in all_events if event[2].startswith("Warning: ")]
    assert [stage for _, stage, _ in warnings] == ["validate"] * 3
    events = [event for event in all_events if event not in warnings]
    assert job.started_at is not None
    assert job.ended_at is not None
    assert [status for status, _, _ in events] == [
        Status.STARTING,
        Status.INPROGRESS,
        Status.INPROGRESS,  # stage validate
        Status.INPROGRESS,  # stage data
        Status.FAILED,
    ]
    assert [stage for _, stage, _ in events][2:4] == ["validate", "data"]


def test_a_missing_model_fails_validation_naming_the_object(
    store: JobStore, worker_settings: Settings, worker_session_factory: SessionFactory, s3_bucket: str
) -> None:
    job_id = _new_job(worker_session_factory, f"s3://{s3_bucket}/models/absent")

    assert _run(job_id, store, worker_settings) is Status.FAILED

    job, _ = _job(worker_session_factory, job_id)
    assert job.failure_reason == f"Model file not found: s3://{s3_bucket}/models/absent/config.json"
    assert job.stage == "validate"


def test_stop_during_a_running_stage_ends_stopped_within_ten_seconds(
    store: JobStore, worker_settings: Settings, worker_session_factory: SessionFactory, model_uri: str
) -> None:
    job_id = _new_job(worker_session_factory, model_uri)
    stop_sent_at: list[float] = []

    def stop_soon() -> None:
        time.sleep(0.5)
        _set_status(worker_session_factory, job_id, Status.STOPPING, "Stop requested")
        stop_sent_at.append(time.monotonic())

    stopper = threading.Thread(target=stop_soon)
    stopper.start()
    status = _run(job_id, store, worker_settings, [Stage("train", _wait_cooperatively)])
    stopper.join()

    assert status is Status.STOPPED
    assert time.monotonic() - stop_sent_at[0] < 10
    job, _ = _job(worker_session_factory, job_id)
    assert job.status is Status.STOPPED
    assert job.failure_reason is None


def test_stop_interrupts_a_stage_that_never_checks(
    store: JobStore, worker_settings: Settings, worker_session_factory: SessionFactory, model_uri: str
) -> None:
    job_id = _new_job(worker_session_factory, model_uri)
    threading.Timer(
        0.3, _set_status, args=(worker_session_factory, job_id, Status.STOPPING, "Stop requested")
    ).start()
    started = time.monotonic()

    status = _run(job_id, store, worker_settings, [Stage("blocking", lambda ctx: time.sleep(60))])

    assert status is Status.STOPPED
    assert time.monotonic() - started < 10


def test_max_runtime_fails_the_job_naming_the_limit(
    store: JobStore, worker_settings: Settings, worker_session_factory: SessionFactory, model_uri: str
) -> None:
    job_id = _new_job(worker_session_factory, model_uri, stopping_condition={"MaxRuntimeInSeconds": 1})
    started = time.monotonic()

    status = _run(job_id, store, worker_settings, [Stage("train", _wait_cooperatively)])

    assert status is Status.FAILED
    assert 1 <= time.monotonic() - started < 5
    job, _ = _job(worker_session_factory, job_id)
    assert job.failure_reason == "Job exceeded MaxRuntimeInSeconds (1 s)"


def test_a_resumed_job_keeps_its_original_deadline(
    store: JobStore, worker_settings: Settings, worker_session_factory: SessionFactory, model_uri: str
) -> None:
    job_id = _new_job(worker_session_factory, model_uri, stopping_condition={"MaxRuntimeInSeconds": 60})
    _set_status(worker_session_factory, job_id, Status.INPROGRESS, "first worker")
    with session_scope(worker_session_factory) as session:
        job = get_optimization_job_by_id(session, job_id=job_id)
        assert job is not None
        job.started_at = utc_now() - timedelta(seconds=61)

    status = _run(job_id, store, worker_settings, [Stage("train", _wait_cooperatively)])

    assert status is Status.FAILED
    job, events = _job(worker_session_factory, job_id)
    assert job.failure_reason == "Job exceeded MaxRuntimeInSeconds (60 s)"
    assert any("resumed" in message for _, _, message in events)


def test_an_unexpected_error_fails_the_job_and_is_reraised(
    store: JobStore, worker_settings: Settings, worker_session_factory: SessionFactory, model_uri: str
) -> None:
    job_id = _new_job(worker_session_factory, model_uri)

    def broken(ctx: JobContext) -> None:
        raise RuntimeError("CUDA out of memory")

    with pytest.raises(RuntimeError, match="CUDA out of memory"):
        _run(job_id, store, worker_settings, [Stage("prepare", broken)])

    job, _ = _job(worker_session_factory, job_id)
    assert job.status is Status.FAILED
    assert job.failure_reason == "Internal error in stage 'prepare': RuntimeError: CUDA out of memory"


def test_stages_that_all_finish_complete_the_job_with_progress(
    store: JobStore, worker_settings: Settings, worker_session_factory: SessionFactory, model_uri: str
) -> None:
    job_id = _new_job(worker_session_factory, model_uri)
    seen: list[tuple[str, float | None]] = []

    def first(ctx: JobContext) -> None:
        ctx.report("half way", fraction=0.5)
        seen.append((ctx.stage, ctx.span.overall_percent(0.5)))

    def second(ctx: JobContext) -> None:
        seen.append((ctx.stage, ctx.span.overall_percent(0.0)))

    status = _run(job_id, store, worker_settings, [Stage("first", first, weight=3), Stage("second", second)])

    assert status is Status.COMPLETED
    assert seen == [("first", 37.5), ("second", 75.0)]
    job, events = _job(worker_session_factory, job_id)
    assert job.progress_percent == 100.0
    assert [(status, stage) for status, stage, _ in events] == [
        (Status.STARTING, None),
        (Status.INPROGRESS, None),
        (Status.INPROGRESS, "first"),
        (Status.INPROGRESS, "second"),
        (Status.COMPLETED, "second"),
    ]
