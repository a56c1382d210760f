from __future__ import annotations

import socket
import threading
from typing import Any

import pytest
from sqlalchemy.orm import Session, sessionmaker

from core.job_errors import JobFailedError
from core.model_source import model_location
from core.s3 import S3_MAX_ATTEMPTS, S3Location
from core.sagemaker.shapes.optimization_jobs import OptimizationJobModelSource
from core.sagemaker.shapes.sagemaker_models import ContainerDefinition
from db.models.optimization_job_status import OptimizationJobStatus as Status
from db.queries.optimization_job import get_optimization_job_by_id
from db.session import session_scope
from db.settings import Settings
from tests.factories.accounts import create_account
from tests.factories.optimization_jobs import create_optimization_job
from tests.worker.s3_models import upload_model
from worker.job_store import JobStore
from worker.pipeline import Stage
from worker.runner import run_optimization_job
from worker.stages.validate import validate_artifacts


def _location(model_source: dict[str, Any], container: dict[str, Any] | None) -> S3Location:
    """model_location of the members as a job row stores them (PascalCase JSON)."""
    return model_location(
        OptimizationJobModelSource.model_validate(model_source),
        None if container is None else ContainerDefinition.model_validate(container),
    )


def _s3_data_source(uri: str, compression: str) -> dict[str, Any]:
    return {"S3DataSource": {"S3Uri": uri, "S3DataType": "S3Prefix", "CompressionType": compression}}


def test_model_location_from_an_s3_uri() -> None:
    assert _location({"S3": {"S3Uri": "s3://models/llama/"}}, None) == S3Location("models", "llama/")


def test_model_location_from_a_sagemaker_models_uncompressed_data_source() -> None:
    container = {"ModelDataSource": _s3_data_source("s3://b/m/", "None")}
    assert _location({"SageMakerModel": {"ModelName": "m"}}, container) == S3Location("b", "m/")


def test_model_location_from_a_model_data_url_directory() -> None:
    container = {"ModelDataUrl": "s3://b/dir/"}
    assert _location({"SageMakerModel": {"ModelName": "m"}}, container) == S3Location("b", "dir/")


@pytest.mark.parametrize(
    ("container", "message"),
    [
        ({"ModelDataUrl": "s3://b/model.tar.gz"}, "is an archive"),
        ({"ModelDataSource": _s3_data_source("s3://b/m.tar.gz", "Gzip")}, "CompressionType must be None"),
        ({"Image": "x"}, "neither ModelDataUrl nor ModelDataSource"),
        (None, "neither an S3 URI nor a SageMaker model"),
    ],
)
def test_model_location_rejects_what_cannot_be_trained_on(
    container: dict[str, Any] | None, message: str
) -> None:
    with pytest.raises(JobFailedError, match=message):
        _location({"SageMakerModel": {"ModelName": "m"}}, container)


def test_model_location_rejects_a_non_s3_uri_naming_the_field() -> None:
    with pytest.raises(JobFailedError, match=r"ModelSource.S3.S3Uri must be an s3:// URI, got 'https://x/y'"):
        _location({"S3": {"S3Uri": "https://x/y"}}, None)


def _validate(
    factory: sessionmaker[Session], settings: Settings, model_uri: str
) -> tuple[Status | None, str | None]:
    with session_scope(factory) as session:
        owner = create_account(session)
        job_id = create_optimization_job(
            session,
            account_id=owner.account_id,
            aws_account_id=owner.aws_account_id,
            model_source={"S3": {"S3Uri": model_uri}},
        ).id
    status = run_optimization_job(
        job_id, stages=[Stage("validate", validate_artifacts)], store=JobStore(factory), settings=settings
    )
    with session_scope(factory) as session:
        job = get_optimization_job_by_id(session, job_id=job_id)
        assert job is not None
        return status, job.failure_reason


def test_a_complete_model_directory_passes(
    worker_session_factory: sessionmaker[Session], worker_settings: Settings, s3_client: Any, s3_bucket: str
) -> None:
    uri = upload_model(s3_client, s3_bucket, "base")
    assert _validate(worker_session_factory, worker_settings, uri) == (Status.COMPLETED, None)


def test_a_config_that_is_not_json_fails(
    worker_session_factory: sessionmaker[Session], worker_settings: Settings, s3_client: Any, s3_bucket: str
) -> None:
    s3_client.put_object(Bucket=s3_bucket, Key="bad/config.json", Body=b"{not json")
    status, reason = _validate(worker_session_factory, worker_settings, f"s3://{s3_bucket}/bad")
    assert status is Status.FAILED
    assert reason is not None
    assert reason.startswith(f"s3://{s3_bucket}/bad/config.json is not valid JSON")


def test_a_config_without_model_type_fails(
    worker_session_factory: sessionmaker[Session], worker_settings: Settings, s3_client: Any, s3_bucket: str
) -> None:
    uri = upload_model(s3_client, s3_bucket, "odd", config={"hello": "world"})
    status, reason = _validate(worker_session_factory, worker_settings, uri)
    assert status is Status.FAILED
    assert reason == (
        f"s3://{s3_bucket}/odd/config.json is not a Hugging Face model config "
        "(no model_type or architectures)"
    )


def test_a_directory_without_weights_fails(
    worker_session_factory: sessionmaker[Session], worker_settings: Settings, s3_client: Any, s3_bucket: str
) -> None:
    uri = upload_model(s3_client, s3_bucket, "noweights", weights=False)
    status, reason = _validate(worker_session_factory, worker_settings, uri)
    assert status is Status.FAILED
    assert reason == (
        f"Model weights not found: {uri}model.safetensors (nor a sharded model.safetensors.index.json); "
        "the base model must be in safetensors format"
    )


def test_a_missing_bucket_fails_naming_the_object(
    worker_session_factory: sessionmaker[Session], worker_settings: Settings
) -> None:
    status, reason = _validate(worker_session_factory, worker_settings, "s3://no-such-bucket-eaglenest/m")
    assert status is Status.FAILED
    assert reason == "S3 bucket does not exist: s3://no-such-bucket-eaglenest/m/"


def test_an_s3_that_drops_connections_is_retried_then_fails_naming_the_error(
    worker_session_factory: sessionmaker[Session], worker_settings: Settings
) -> None:
    # An endpoint that accepts each connection and closes it at once: every request fails.
    listener = socket.create_server(("127.0.0.1", 0))
    accepted = 0

    def drop_connections() -> None:
        nonlocal accepted
        while True:
            try:
                connection, _ = listener.accept()
            except OSError:
                return
            accepted += 1
            connection.close()

    threading.Thread(target=drop_connections, daemon=True).start()
    endpoint = f"http://127.0.0.1:{listener.getsockname()[1]}"
    settings = worker_settings.model_copy(update={"s3_endpoint_url": endpoint})
    try:
        status, reason = _validate(worker_session_factory, settings, "s3://models/llama/")
    finally:
        listener.close()
    assert status is Status.FAILED
    assert reason is not None
    assert reason.startswith("S3 error listing s3://models/llama/: Connection was closed before we received")
    assert endpoint in reason
    # botocore's standard retry mode made every attempt (backing off in between) before giving up.
    assert accepted >= S3_MAX_ATTEMPTS
