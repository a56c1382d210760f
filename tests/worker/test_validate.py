from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy.orm import Session, sessionmaker

from db.optimization_job_status import OptimizationJobStatus as Status
from db.optimization_jobs import get_optimization_job_by_id
from db.session import session_scope
from db.settings import Settings
from tests.factories.accounts import create_account
from tests.factories.optimization_jobs import create_optimization_job
from tests.worker.s3_models import upload_model
from worker.errors import JobFailedError
from worker.job_store import JobStore
from worker.pipeline import Stage
from worker.runner import run_optimization_job
from worker.s3 import S3Location
from worker.validate import model_location, validate_artifacts


def test_model_location_from_an_s3_uri() -> None:
    assert model_location({"S3": {"S3Uri": "s3://models/llama/"}}, None) == S3Location("models", "llama/")


def test_model_location_from_a_sagemaker_models_uncompressed_data_source() -> None:
    container = {"ModelDataSource": {"S3DataSource": {"S3Uri": "s3://b/m/", "CompressionType": "None"}}}
    assert model_location({"SageMakerModel": {"ModelName": "m"}}, container) == S3Location("b", "m/")


def test_model_location_from_a_model_data_url_directory() -> None:
    container = {"ModelDataUrl": "s3://b/dir/"}
    assert model_location({"SageMakerModel": {"ModelName": "m"}}, container) == S3Location("b", "dir/")


@pytest.mark.parametrize(
    ("container", "message"),
    [
        ({"ModelDataUrl": "s3://b/model.tar.gz"}, "is an archive"),
        (
            {"ModelDataSource": {"S3DataSource": {"S3Uri": "s3://b/m.tar.gz", "CompressionType": "Gzip"}}},
            "CompressionType must be None",
        ),
        ({"Image": "x"}, "neither ModelDataUrl nor ModelDataSource"),
        (None, "neither an S3 URI nor a SageMaker model"),
    ],
)
def test_model_location_rejects_what_cannot_be_trained_on(
    container: dict[str, Any] | None, message: str
) -> None:
    with pytest.raises(JobFailedError, match=message):
        model_location({"SageMakerModel": {"ModelName": "m"}}, container)


def test_model_location_rejects_a_non_s3_uri_naming_the_field() -> None:
    with pytest.raises(JobFailedError, match=r"ModelSource.S3.S3Uri must be an s3:// URI, got 'https://x/y'"):
        model_location({"S3": {"S3Uri": "https://x/y"}}, None)


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
    s3_client.put_object(Bucket=s3_bucket, Key="noweights/config.json", Body=b'{"model_type": "llama"}')
    status, reason = _validate(worker_session_factory, worker_settings, f"s3://{s3_bucket}/noweights/")
    assert status is Status.FAILED
    assert reason == f"No model weights (*.safetensors or *.bin) under s3://{s3_bucket}/noweights/"


def test_a_missing_bucket_fails_naming_the_object(
    worker_session_factory: sessionmaker[Session], worker_settings: Settings
) -> None:
    status, reason = _validate(worker_session_factory, worker_settings, "s3://no-such-bucket-eaglenest/m")
    assert status is Status.FAILED
    assert reason == "Model file not found: s3://no-such-bucket-eaglenest/m/config.json"
