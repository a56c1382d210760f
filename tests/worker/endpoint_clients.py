"""boto3 clients and helpers for endpoint tests: the sagemaker-runtime client and a deployment."""

from __future__ import annotations

import json
import os
import signal
import time
import uuid
from typing import Any

import boto3
from botocore.config import Config
from sqlalchemy.orm import Session, sessionmaker

from db.models.endpoint_instance import EndpointInstance
from db.queries.endpoint import get_endpoint_by_name
from db.queries.endpoint_instance import list_endpoint_instances
from db.session import session_scope
from tests.factories.accounts import AccountCredentials

# The region the worker tests' clients sign for (tests/worker/conftest.py's worker_sagemaker too).
WORKER_REGION = "us-east-1"


def runtime_client(api_url: str, account: AccountCredentials) -> Any:
    return boto3.client(
        "sagemaker-runtime",
        endpoint_url=api_url,
        aws_access_key_id=account.access_key_id,
        aws_secret_access_key=account.secret_access_key,
        region_name=WORKER_REGION,
        config=Config(retries={"max_attempts": 1, "mode": "standard"}, read_timeout=300),
    )


def invoke_json(runtime: Any, name: str, body: dict[str, Any]) -> Any:
    answer = runtime.invoke_endpoint(EndpointName=name, ContentType="application/json", Body=json.dumps(body))
    return json.loads(answer["Body"].read())


def deploy(
    sagemaker: Any,
    *,
    model_uri: str,
    head_uri: str | None,
    instances: int = 1,
    capture: dict[str, Any] | None = None,
) -> tuple[str, str]:
    """CreateModel, CreateEndpointConfig and CreateEndpoint; returns (endpoint, model) names."""
    suffix = uuid.uuid4().hex[:8]
    container: dict[str, Any] = {
        "Image": "example.com/eaglenest:1",
        "ModelDataSource": {
            "S3DataSource": {"S3Uri": model_uri, "S3DataType": "S3Prefix", "CompressionType": "None"}
        },
    }
    if head_uri is not None:
        source = {"S3Uri": head_uri, "S3DataType": "S3Prefix", "CompressionType": "None"}
        container["AdditionalModelDataSources"] = [{"ChannelName": "eagle_model", "S3DataSource": source}]
    model = f"model-{suffix}"
    sagemaker.create_model(
        ModelName=model,
        ExecutionRoleArn="arn:aws:iam::111122223333:role/SageMakerRole",
        PrimaryContainer=container,
    )
    config: dict[str, Any] = {
        "EndpointConfigName": f"config-{suffix}",
        "ProductionVariants": [
            {
                "VariantName": "AllTraffic",
                "ModelName": model,
                "InstanceType": "ml.g5.xlarge",
                "InitialInstanceCount": instances,
            }
        ],
    }
    if capture is not None:
        config["DataCaptureConfig"] = capture
    sagemaker.create_endpoint_config(**config)
    endpoint = f"endpoint-{suffix}"
    sagemaker.create_endpoint(EndpointName=endpoint, EndpointConfigName=config["EndpointConfigName"])
    return endpoint, model


def wait_in_service(sagemaker: Any, name: str, *, timeout: float = 180) -> dict[str, Any]:
    sagemaker.get_waiter("endpoint_in_service").wait(
        EndpointName=name, WaiterConfig={"Delay": 1, "MaxAttempts": int(timeout)}
    )
    described: dict[str, Any] = sagemaker.describe_endpoint(EndpointName=name)
    return described


def instances(
    factory: sessionmaker[Session], account: AccountCredentials, name: str
) -> list[EndpointInstance]:
    with session_scope(factory) as session:
        endpoint = get_endpoint_by_name(
            session, account_id=account.account_id, region=WORKER_REGION, name=name
        )
        assert endpoint is not None
        rows = list_endpoint_instances(session, endpoint_id=endpoint.id, generation=endpoint.generation)
        session.expunge_all()
        return rows


def instance_pid(instance: EndpointInstance) -> int:
    # The supervisor reports "Serving on <url> (pid <pid>)".
    assert instance.message is not None
    return int(instance.message.rsplit("pid ", 1)[1].rstrip(")"))


def kill(pid: int) -> None:
    os.kill(pid, signal.SIGKILL)


def wait_for(condition: Any, *, timeout: float, what: str, interval: float = 0.5) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(interval)
