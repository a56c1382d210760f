"""The SageMaker Python SDK's resource layer (sagemaker-core) as a client of eaglenest.

Pointed at the stack only through the environment, as the README shows: AWS_ENDPOINT_URL_*
for sagemaker, sagemaker-runtime, logs (CLOUDWATCH_LOGS) and sts, and a boto3 Session with the key. One api
process, job worker and endpoint worker serve the module (the client stack).
"""

from __future__ import annotations

import json
import logging
import re
import uuid
from collections.abc import Iterator

import boto3
import pytest
from sagemaker.core.helper import session_helper
from sagemaker.core.resources import Endpoint, EndpointConfig, Model, OptimizationJob
from sagemaker.core.shapes import (
    ContainerDefinition,
    ModelDataSource,
    ModelSpeculativeDecodingConfig,
    ModelSpeculativeDecodingTrainingDataSource,
    OptimizationConfig,
    OptimizationJobModelSource,
    OptimizationJobModelSourceS3,
    OptimizationJobOutputConfig,
    OptimizationSageMakerModel,
    ProductionVariant,
    S3ModelDataSource,
    StoppingCondition,
)
from sagemaker.core.utils.exceptions import FailedStatusError
from sagemaker.core.utils.utils import SageMakerClient

from db.settings import Settings
from stack.processes import ManagedProcess
from tests.client.client_stack import ClientStack
from tests.fixtures.worker import launch_endpoint_worker, module_worker

pytestmark = [pytest.mark.slow, pytest.mark.e2e]


@pytest.fixture(scope="module")
def endpoint_worker(
    client_stack: ClientStack, worker_settings: Settings, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ManagedProcess]:
    with module_worker(
        worker_settings, tmp_path_factory, "sdk-endpoints", launch=launch_endpoint_worker
    ) as process:
        yield process


@pytest.fixture(scope="module")
def sdk(client_stack: ClientStack) -> Iterator[boto3.Session]:
    """The environment the README sets, and the boto3 Session the SDK's resources sign with."""
    environment = {
        "AWS_ENDPOINT_URL_SAGEMAKER": client_stack.api_url,
        "AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME": client_stack.api_url,
        "AWS_ENDPOINT_URL_CLOUDWATCH_LOGS": client_stack.api_url,
        "AWS_ENDPOINT_URL_STS": client_stack.api_url,
        "AWS_ENDPOINT_URL_S3": client_stack.s3_endpoint_url,
        "AWS_MAX_ATTEMPTS": "2",
    }
    with pytest.MonkeyPatch.context() as patch:
        for name, value in environment.items():
            patch.setenv(name, value)
        SageMakerClient.reset()  # clients built before the variables were set must not be reused
        yield boto3.Session(
            aws_access_key_id=client_stack.account.access_key_id,
            aws_secret_access_key=client_stack.account.secret_access_key,
            region_name=client_stack.region,
        )
        SageMakerClient.reset()


def _model(stack: ClientStack, session: boto3.Session, name: str) -> Model:
    source = S3ModelDataSource(s3_uri=stack.model_uri, s3_data_type="S3Prefix", compression_type="None")
    container = ContainerDefinition(
        image="example.com/eaglenest:1", model_data_source=ModelDataSource(s3_data_source=source)
    )
    return Model.create(
        model_name=name,
        primary_container=container,
        execution_role_arn=stack.account.role_arn,
        session=session,
        region=stack.region,
    )


def _eagle(data_uri: str) -> list[OptimizationConfig]:
    data = ModelSpeculativeDecodingTrainingDataSource(s3_uri=data_uri, s3_data_type="S3Prefix")
    config = ModelSpeculativeDecodingConfig(technique="EAGLE", training_data_source=data)
    return [OptimizationConfig(model_speculative_decoding_config=config)]


def test_models_and_optimization_jobs(client_stack: ClientStack, sdk: boto3.Session) -> None:
    stack, region, suffix = client_stack, client_stack.region, uuid.uuid4().hex[:8]
    model = _model(stack, sdk, f"sdk-model-{suffix}")
    assert Model.get(model_name=model.model_name, session=sdk, region=region).model_arn == model.model_arn
    assert model.model_name in [
        m.model_name for m in Model.get_all(name_contains=suffix, session=sdk, region=region)
    ]

    missing = OptimizationJobModelSource(
        s3=OptimizationJobModelSourceS3(s3_uri=f"s3://{stack.bucket}/no-such-model-{suffix}/")
    )
    output = f"s3://{stack.bucket}/sdk-out/{suffix}/"
    failing = OptimizationJob.create(
        optimization_job_name=f"sdk-fails-{suffix}",
        role_arn=stack.account.role_arn,
        model_source=missing,
        deployment_instance_type="ml.g5.xlarge",
        optimization_configs=_eagle(stack.data_uri),
        output_config=OptimizationJobOutputConfig(s3_output_location=output),
        stopping_condition=StoppingCondition(max_runtime_in_seconds=600),
        session=sdk,
        region=region,
    )
    with pytest.raises(FailedStatusError) as failed:
        failing.wait(poll=1, timeout=120)
    assert failing.failure_reason
    assert failing.failure_reason in str(failed.value)
    failed_jobs = OptimizationJob.get_all(
        status_equals="FAILED", name_contains=suffix, session=sdk, region=region
    )
    assert [job.optimization_job_name for job in failed_jobs] == [failing.optimization_job_name]

    # The worker wrote the job's stages to its stream, where the SDK's logs client reads them.
    logs = sdk.client("logs").filter_log_events(
        logGroupName="/aws/sagemaker/OptimizationJobs", logStreamNames=[failing.optimization_job_name]
    )
    messages = [event["message"] for event in logs["events"]]
    assert messages[0] == f"Optimization job {failing.optimization_job_name} started"
    assert messages[-1].startswith(f"Optimization job {failing.optimization_job_name} ended FAILED")

    from_model = OptimizationJob.create(
        optimization_job_name=f"sdk-from-model-{suffix}",
        role_arn=stack.account.role_arn,
        model_source=OptimizationJobModelSource(
            sage_maker_model=OptimizationSageMakerModel(model_name=model.model_name)
        ),
        deployment_instance_type="ml.g5.xlarge",
        optimization_configs=_eagle(stack.data_uri),
        output_config=OptimizationJobOutputConfig(s3_output_location=output + "model/"),
        stopping_condition=StoppingCondition(max_runtime_in_seconds=600),
        session=sdk,
        region=region,
    )
    from_model.stop()
    from_model.wait(poll=1, timeout=120)  # STOPPED is terminal and not a failure
    assert from_model.optimization_job_status == "STOPPED"
    failing.delete()
    from_model.delete()
    assert list(OptimizationJob.get_all(name_contains=suffix, session=sdk, region=region)) == []
    model.delete()


def test_the_callers_identity_through_the_sessions_sts_client(
    client_stack: ClientStack, sdk: boto3.Session
) -> None:
    identity = sdk.client("sts").get_caller_identity()
    assert identity["Account"] == client_stack.account.aws_account_id
    assert identity["Arn"] == f"arn:aws:iam::{client_stack.account.aws_account_id}:root"


def test_an_endpoint_from_create_to_delete(
    client_stack: ClientStack,
    sdk: boto3.Session,
    endpoint_worker: ManagedProcess,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    stack, region, suffix = client_stack, client_stack.region, uuid.uuid4().hex[:8]
    model = _model(stack, sdk, f"sdk-served-{suffix}")
    config = EndpointConfig.create(
        endpoint_config_name=f"sdk-config-{suffix}",
        production_variants=[
            ProductionVariant(
                variant_name="AllTraffic",
                model_name=model.model_name,
                instance_type="ml.g5.xlarge",
                initial_instance_count=1,
            )
        ],
        session=sdk,
        region=region,
    )
    endpoint = Endpoint.create(
        endpoint_name=f"sdk-endpoint-{suffix}",
        endpoint_config_name=config.endpoint_config_name,
        session=sdk,
        region=region,
    )
    # What ModelBuilder.deploy(wait=True) runs: wait_for_endpoint with live logging, which
    # polls FilterLogEvents on the endpoint's group (every 30 s on AWS; 1 s here).
    monkeypatch.setattr(session_helper, "EP_LOGGER_POLL", 1)
    with caplog.at_level(logging.INFO, logger="sagemaker"):
        described = session_helper.Session(boto_session=sdk).wait_for_endpoint(
            endpoint.endpoint_name, poll=1, live_logging=True
        )
    assert described["EndpointStatus"] == "InService"
    assert any("[InService] Serving on" in record.getMessage() for record in caplog.records)
    # SageMaker's layout: one stream per instance, named <variant>/<instance id>.
    streams = sdk.client("logs").describe_log_streams(
        logGroupName=f"/aws/sagemaker/Endpoints/{endpoint.endpoint_name}"
    )["logStreams"]
    names = [stream["logStreamName"] for stream in streams]
    assert len(names) == 1, names
    assert re.fullmatch(r"AllTraffic/i-[0-9a-f]{16}", names[0]), names
    endpoint.wait_for_status("InService", poll=1, timeout=60)

    tgi = endpoint.invoke(
        body=json.dumps({"inputs": "Hello", "parameters": {"max_new_tokens": 3}}),
        content_type="application/json",
    )
    assert json.loads(tgi.body.read())[0]["generated_text"]
    chat = endpoint.invoke(
        body=json.dumps({"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 3}),
        content_type="application/json",
    )
    assert json.loads(chat.body.read())["choices"][0]["message"]["content"] is not None

    endpoint.delete()
    endpoint.wait_for_delete(poll=1, timeout=120)
    config.delete()
    model.delete()
