"""Every resource belongs to the region its request was signed for (issue 32).

One account, two regions: a name taken in us-west-2 is free in us-east-1, and from us-east-1
the us-west-2 resource is exactly as absent as a name never used.
"""

from __future__ import annotations

from typing import Any

import boto3
import httpx
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from tests.api.signed_http import signed_headers
from tests.factories.accounts import AccountCredentials
from tests.factories.endpoints import create_endpoint_config_request
from tests.factories.optimization_jobs import create_optimization_job_request
from tests.factories.sagemaker_models import create_model_request
from tests.fixtures.live_server import TEST_REGION, LiveServer, sagemaker_client

OTHER_REGION = "us-east-1"
NO_RETRIES = {"retries": {"max_attempts": 1, "mode": "legacy"}}


def error_of(call: Any, **kwargs: Any) -> tuple[str, str]:
    with pytest.raises(ClientError) as raised:
        call(**kwargs)
    error = raised.value.response["Error"]
    return error["Code"], error["Message"]


@pytest.fixture
def east(live_server: LiveServer, account: AccountCredentials) -> Any:
    return sagemaker_client(live_server, account, region=OTHER_REGION, **NO_RETRIES)


def test_the_same_names_live_apart_in_two_regions(
    sagemaker: Any, east: Any, account: AccountCredentials
) -> None:
    west_arn = f"arn:aws:sagemaker:{TEST_REGION}:{account.aws_account_id}"
    east_arn = f"arn:aws:sagemaker:{OTHER_REGION}:{account.aws_account_id}"
    model = create_model_request(ModelName="shared", ExecutionRoleArn=account.role_arn)
    config = create_endpoint_config_request("shared", EndpointConfigName="shared")
    job = create_optimization_job_request(OptimizationJobName="shared")
    assert sagemaker.create_model(**model)["ModelArn"] == f"{west_arn}:model/shared"
    sagemaker.create_endpoint_config(**config)
    sagemaker.create_endpoint(EndpointName="shared", EndpointConfigName="shared")
    sagemaker.create_optimization_job(**job)

    # From the other region the west resources are unknown names, with the codes of one.
    assert error_of(east.describe_model, ModelName="shared") == (
        "ValidationException",
        f'Could not find model "{east_arn}:model/shared".',
    )
    assert error_of(east.describe_endpoint_config, EndpointConfigName="shared")[0] == "ValidationException"
    assert error_of(east.describe_endpoint, EndpointName="shared")[0] == "ValidationException"
    assert error_of(east.describe_optimization_job, OptimizationJobName="shared")[0] == "ResourceNotFound"
    assert error_of(east.delete_model, ModelName="shared")[0] == "ValidationException"
    assert error_of(east.stop_optimization_job, OptimizationJobName="shared")[0] == "ResourceNotFound"
    # A west endpoint config does not exist for an east endpoint, nor a west model for an east config.
    assert error_of(east.create_endpoint, EndpointName="e", EndpointConfigName="shared")[0] == (
        "ValidationException"
    )
    assert error_of(east.create_endpoint_config, **config)[0] == "ValidationException"
    assert error_of(east.list_tags, ResourceArn=f"{west_arn}:model/shared")[0] == "ResourceNotFound"
    assert east.list_models()["Models"] == []
    assert east.list_endpoint_configs()["EndpointConfigs"] == []
    assert east.list_endpoints()["Endpoints"] == []
    assert east.list_optimization_jobs()["OptimizationJobSummaries"] == []

    # The same name is free in the other region, and its ARN names that region.
    assert east.create_model(**model)["ModelArn"] == f"{east_arn}:model/shared"
    assert east.create_endpoint_config(**config)["EndpointConfigArn"] == f"{east_arn}:endpoint-config/shared"
    assert east.create_endpoint(EndpointName="shared", EndpointConfigName="shared")["EndpointArn"] == (
        f"{east_arn}:endpoint/shared"
    )
    assert east.create_optimization_job(**job)["OptimizationJobArn"] == f"{east_arn}:optimization-job/shared"
    assert [m["ModelArn"] for m in east.list_models()["Models"]] == [f"{east_arn}:model/shared"]

    # Deleting in one region leaves the other's alone.
    east.delete_model(ModelName="shared")
    assert sagemaker.describe_model(ModelName="shared")["ModelArn"] == f"{west_arn}:model/shared"
    assert [m["ModelArn"] for m in sagemaker.list_models()["Models"]] == [f"{west_arn}:model/shared"]


def test_invoke_endpoint_and_the_rest_face_use_the_signed_region(
    live_server: LiveServer, sagemaker: Any, account: AccountCredentials
) -> None:
    sagemaker.create_model(**create_model_request(ModelName="west-only"))
    runtime = boto3.client(
        "sagemaker-runtime",
        endpoint_url=live_server.url,
        region_name=OTHER_REGION,
        aws_access_key_id=account.access_key_id,
        aws_secret_access_key=account.secret_access_key,
        config=Config(**NO_RETRIES),
    )
    sagemaker.create_endpoint_config(**create_endpoint_config_request("west-only", EndpointConfigName="c"))
    sagemaker.create_endpoint(EndpointName="west-ep", EndpointConfigName="c")
    code, message = error_of(runtime.invoke_endpoint, EndpointName="west-ep", Body=b"{}")
    assert (code, message) == (
        "ValidationError",
        f"Endpoint west-ep of account {account.aws_account_id} not found.",
    )

    def rest(path: str, region: str) -> httpx.Response:
        url = f"{live_server.url}{path}"
        return httpx.get(url, headers=signed_headers("GET", url, b"", account, region=region))

    assert rest("/v1/models/west-only", TEST_REGION).status_code == 200
    assert rest("/v1/models/west-only", OTHER_REGION).json()["__type"] == "ValidationException"
    assert [m["ModelName"] for m in rest("/v1/models", TEST_REGION).json()["Models"]] == ["west-only"]
    assert rest("/v1/models", OTHER_REGION).json()["Models"] == []
    assert rest("/dashboard/api/models", OTHER_REGION).json()["Models"] == []
    # The dashboard's sign-in form starts from the stack's default region (no signature needed).
    assert httpx.get(f"{live_server.url}/dashboard/defaults").json() == {
        "region": live_server.settings.default_region
    }


def test_a_next_token_from_one_region_is_refused_in_another(sagemaker: Any, east: Any) -> None:
    for name in ("t-1", "t-2"):
        sagemaker.create_model(**create_model_request(ModelName=name))
    token = sagemaker.list_models(MaxResults=1)["NextToken"]
    assert error_of(east.list_models, MaxResults=1, NextToken=token)[0] == "ValidationException"
