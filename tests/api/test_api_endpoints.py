"""Endpoint configurations and endpoints through boto3 and the AWS CLI against the live server.

No worker consumes these endpoints' queues here, so they stay Creating: the control plane is
tested on its own (tests/worker/test_endpoints_e2e.py serves them).
"""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from db.models.endpoint_status import EndpointStatus
from db.queries.endpoint import change_endpoint, get_endpoint_by_name
from db.queries.endpoint_instance import report_endpoint_instance
from tests.factories.accounts import AccountCredentials, create_account
from tests.factories.endpoints import (
    create_endpoint_config_request,
    data_capture_config,
    production_variant,
    unique_name,
)
from tests.factories.sagemaker_models import create_model_request
from tests.fixtures.live_server import TEST_REGION, AwsCli, LiveServer, sagemaker_client


def error_of(raised: pytest.ExceptionInfo[ClientError]) -> tuple[str, str]:
    error = raised.value.response["Error"]
    return error["Code"], error["Message"]


@pytest.fixture
def model_name(sagemaker: Any) -> str:
    body = create_model_request()
    sagemaker.create_model(**body)
    return str(body["ModelName"])


def test_endpoint_config_round_trip(sagemaker: Any, account: AccountCredentials, model_name: str) -> None:
    body = create_endpoint_config_request(
        model_name,
        EndpointConfigName="Eagle-Config",
        DataCaptureConfig=data_capture_config("s3://captures/eagle/"),
        Tags=[{"Key": "team", "Value": "ml"}],
    )
    arn = sagemaker.create_endpoint_config(**body)["EndpointConfigArn"]
    assert arn == f"arn:aws:sagemaker:us-west-2:{account.aws_account_id}:endpoint-config/eagle-config"
    described = sagemaker.describe_endpoint_config(EndpointConfigName="eagle-config")
    assert described["EndpointConfigName"] == "Eagle-Config"
    assert described["ProductionVariants"] == body["ProductionVariants"]
    assert described["DataCaptureConfig"] == body["DataCaptureConfig"]
    assert "Tags" not in described
    listed = sagemaker.list_endpoint_configs(NameContains="eagle")["EndpointConfigs"]
    assert [config["EndpointConfigArn"] for config in listed] == [arn]
    with pytest.raises(ClientError) as raised:
        sagemaker.create_endpoint_config(**body)
    assert error_of(raised) == (
        "ValidationException",
        f'Cannot create already existing endpoint configuration "{arn}".',
    )
    sagemaker.delete_endpoint_config(EndpointConfigName="Eagle-Config")
    with pytest.raises(ClientError) as raised:
        sagemaker.describe_endpoint_config(EndpointConfigName="Eagle-Config")
    assert error_of(raised) == ("ValidationException", f'Could not find endpoint configuration "{arn}".')


@pytest.mark.parametrize(
    ("variants", "code", "message"),
    [
        (
            [production_variant("no-such-model")],
            "ValidationException",
            'Could not find model "arn:aws:sagemaker:us-west-2:{account}:model/no-such-model".',
        ),
        (
            [production_variant("{model}", InstanceType="ml.p5.48xlarge")],
            "ValidationException",
            "1 validation error detected: Value 'ml.p5.48xlarge' at "
            "'productionVariants.1.member.instanceType' failed to satisfy constraint: "
            "Member must be an instance type this deployment's endpoint workers serve: "
            "ml.g5.xlarge, ml.g5.2xlarge, ml.g6.xlarge, ml.m5.xlarge, ml.c5.xlarge",
        ),
        (
            [production_variant("{model}", InitialInstanceCount=5)],
            "ResourceLimitExceeded",
            "The account-level service limit 'instances per variant' is 4 Instances, with current "
            "utilization of 0 Instances and a request delta of 5 Instances.",
        ),
        (
            [production_variant("{model}"), production_variant("{model}", VariantName="B")],
            "ValidationException",
            "1 validation error detected: Value '[AllTraffic, B]' at 'productionVariants' failed to satisfy "
            "constraint: Member must have length 1 (eaglenest endpoints serve one production variant)",
        ),
        (
            [production_variant("{model}", ServerlessConfig={"MemorySizeInMB": 2048, "MaxConcurrency": 1})],
            "ValidationException",
            "ProductionVariant ServerlessConfig is not supported by eaglenest: a variant runs "
            "InitialInstanceCount serving processes of InstanceType.",
        ),
    ],
)
def test_endpoint_config_refusals(  # noqa: PLR0917 - fixtures plus the parametrized case
    sagemaker: Any,
    account: AccountCredentials,
    model_name: str,
    variants: list[dict[str, Any]],
    code: str,
    message: str,
) -> None:
    for variant in variants:
        if variant["ModelName"] == "{model}":
            variant["ModelName"] = model_name
    with pytest.raises(ClientError) as raised:
        sagemaker.create_endpoint_config(
            **create_endpoint_config_request(model_name, ProductionVariants=variants)
        )
    assert error_of(raised) == (code, message.format(account=account.aws_account_id))


def test_create_describe_list_update_delete_endpoint(
    sagemaker: Any, account: AccountCredentials, model_name: str
) -> None:
    config = create_endpoint_config_request(model_name)
    sagemaker.create_endpoint_config(**config)
    arn = sagemaker.create_endpoint(
        EndpointName="Eagle-Endpoint", EndpointConfigName=config["EndpointConfigName"]
    )["EndpointArn"]
    assert arn == f"arn:aws:sagemaker:us-west-2:{account.aws_account_id}:endpoint/eagle-endpoint"
    described = sagemaker.describe_endpoint(EndpointName="eagle-endpoint")
    assert described["EndpointStatus"] == "Creating"
    assert described["EndpointConfigName"] == config["EndpointConfigName"]
    variant = described["ProductionVariants"][0]
    assert (variant["VariantName"], variant["CurrentInstanceCount"], variant["DesiredInstanceCount"]) == (
        "AllTraffic",
        0,
        1,
    )
    with pytest.raises(ClientError) as raised:
        sagemaker.create_endpoint(
            EndpointName="eagle-endpoint", EndpointConfigName=config["EndpointConfigName"]
        )
    assert error_of(raised) == ("ValidationException", f'Cannot create already existing endpoint "{arn}".')
    with pytest.raises(ClientError) as raised:
        sagemaker.update_endpoint(
            EndpointName="eagle-endpoint", EndpointConfigName=config["EndpointConfigName"]
        )
    assert error_of(raised) == ("ValidationException", f'Cannot update in-progress endpoint "{arn}".')
    # The endpoint keeps its copy of the configuration.
    sagemaker.delete_endpoint_config(EndpointConfigName=config["EndpointConfigName"])
    assert (
        sagemaker.describe_endpoint(EndpointName="eagle-endpoint")["EndpointConfigName"]
        == config["EndpointConfigName"]
    )
    sagemaker.delete_endpoint(EndpointName="eagle-endpoint")
    assert sagemaker.describe_endpoint(EndpointName="eagle-endpoint")["EndpointStatus"] == "Deleting"
    sagemaker.delete_endpoint(EndpointName="eagle-endpoint")  # idempotent while Deleting
    with pytest.raises(ClientError) as raised:
        sagemaker.describe_endpoint(EndpointName="missing")
    expected = (
        f'Could not find endpoint "arn:aws:sagemaker:us-west-2:{account.aws_account_id}:endpoint/missing".'
    )
    assert error_of(raised) == ("ValidationException", expected)


def test_create_endpoint_needs_its_config(sagemaker: Any, account: AccountCredentials) -> None:
    with pytest.raises(ClientError) as raised:
        sagemaker.create_endpoint(EndpointName="e", EndpointConfigName="absent")
    arn = f"arn:aws:sagemaker:us-west-2:{account.aws_account_id}:endpoint-config/absent"
    assert error_of(raised) == ("ValidationException", f'Could not find endpoint configuration "{arn}".')


def test_list_endpoints_filters_and_pages(sagemaker: Any, model_name: str) -> None:
    config = create_endpoint_config_request(model_name)
    sagemaker.create_endpoint_config(**config)
    names = [unique_name("ep") for _ in range(3)]
    for name in names:
        sagemaker.create_endpoint(EndpointName=name, EndpointConfigName=config["EndpointConfigName"])
    sagemaker.delete_endpoint(EndpointName=names[0])
    paginator = sagemaker.get_paginator("list_endpoints")
    pages = list(paginator.paginate(SortBy="Name", SortOrder="Ascending", PaginationConfig={"PageSize": 2}))
    assert [len(page["Endpoints"]) for page in pages] == [2, 1]
    assert [e["EndpointName"] for page in pages for e in page["Endpoints"]] == sorted(names)
    creating = sagemaker.list_endpoints(StatusEquals="Creating")["Endpoints"]
    assert sorted(e["EndpointName"] for e in creating) == sorted(names[1:])
    assert [e["EndpointName"] for e in sagemaker.list_endpoints(NameContains=names[2])["Endpoints"]] == [
        names[2]
    ]
    with pytest.raises(ClientError) as raised:
        sagemaker.list_endpoints(StatusEquals="Running")
    assert error_of(raised)[0] == "ValidationException"


def test_endpoints_are_per_account(
    sagemaker: Any, live_server: LiveServer, model_name: str, committed_session_factory: Any
) -> None:
    config = create_endpoint_config_request(model_name)
    sagemaker.create_endpoint_config(**config)
    sagemaker.create_endpoint(EndpointName="mine", EndpointConfigName=config["EndpointConfigName"])
    with committed_session_factory() as session:
        other = create_account(session)
        session.commit()
    theirs = sagemaker_client(live_server, other, retries={"max_attempts": 1, "mode": "legacy"})
    assert theirs.list_endpoints()["Endpoints"] == []
    assert theirs.list_endpoint_configs()["EndpointConfigs"] == []
    with pytest.raises(ClientError) as raised:
        theirs.describe_endpoint(EndpointName="mine")
    assert error_of(raised)[0] == "ValidationException"
    with pytest.raises(ClientError) as raised:
        theirs.create_endpoint(EndpointName="theirs", EndpointConfigName=config["EndpointConfigName"])
    assert error_of(raised)[0] == "ValidationException"


def test_the_aws_cli_creates_and_describes(aws_cli: AwsCli, sagemaker: Any, model_name: str) -> None:
    config = unique_name("cli-config")
    created = aws_cli(
        "create-endpoint-config",
        "--endpoint-config-name",
        config,
        "--production-variants",
        f"VariantName=AllTraffic,ModelName={model_name},InstanceType=ml.m5.xlarge,InitialInstanceCount=2",
    )
    assert created.returncode == 0, created.stderr
    assert (
        aws_cli("create-endpoint", "--endpoint-name", "cli-ep", "--endpoint-config-name", config).returncode
        == 0
    )
    described = aws_cli("describe-endpoint", "--endpoint-name", "cli-ep").json()
    assert described["EndpointStatus"] == "Creating"
    assert described["ProductionVariants"][0]["DesiredInstanceCount"] == 2


def test_invoking_an_endpoint_that_is_not_in_service(
    live_server: LiveServer, sagemaker: Any, account: AccountCredentials, model_name: str
) -> None:
    config = create_endpoint_config_request(model_name)
    sagemaker.create_endpoint_config(**config)
    sagemaker.create_endpoint(EndpointName="warming", EndpointConfigName=config["EndpointConfigName"])
    runtime = boto3.client(
        "sagemaker-runtime",
        endpoint_url=live_server.url,
        region_name="us-west-2",
        aws_access_key_id=account.access_key_id,
        aws_secret_access_key=account.secret_access_key,
        config=Config(retries={"max_attempts": 1, "mode": "standard"}),
    )
    with pytest.raises(ClientError) as raised:
        runtime.invoke_endpoint(EndpointName="warming", Body=b'{"inputs": "hi"}')
    assert error_of(raised) == (
        "ValidationError",
        f"Endpoint warming of account {account.aws_account_id} is not in service (EndpointStatus Creating).",
    )
    assert raised.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400
    with pytest.raises(ClientError) as raised:
        runtime.invoke_endpoint(EndpointName="warming", Body=b'{"inputs": "hi"}', CustomAttributes="x")
    assert error_of(raised)[0] == "ValidationError"


def test_configs_and_endpoints_take_tags(sagemaker: Any, model_name: str) -> None:
    config = create_endpoint_config_request(model_name, Tags=[{"Key": "team", "Value": "ml"}])
    config_arn = sagemaker.create_endpoint_config(**config)["EndpointConfigArn"]
    assert sagemaker.list_tags(ResourceArn=config_arn)["Tags"] == [{"Key": "team", "Value": "ml"}]
    endpoint_arn = sagemaker.create_endpoint(
        EndpointName="tagged",
        EndpointConfigName=config["EndpointConfigName"],
        Tags=[{"Key": "a", "Value": "1"}],
    )["EndpointArn"]
    sagemaker.add_tags(ResourceArn=endpoint_arn, Tags=[{"Key": "b", "Value": "2"}])
    tags = sagemaker.list_tags(ResourceArn=endpoint_arn)["Tags"]
    assert sorted((tag["Key"], tag["Value"]) for tag in tags) == [("a", "1"), ("b", "2")]
    sagemaker.delete_endpoint_config(EndpointConfigName=config["EndpointConfigName"])
    with pytest.raises(ClientError) as raised:
        sagemaker.list_tags(ResourceArn=config_arn)
    assert error_of(raised) == ("ResourceNotFound", f'Could not find endpoint configuration "{config_arn}".')


def test_an_endpoint_with_no_instance_answering_is_service_unavailable(
    live_server: LiveServer,
    sagemaker: Any,
    account: AccountCredentials,
    model_name: str,
    committed_session_factory: Any,
) -> None:
    config = create_endpoint_config_request(model_name)
    sagemaker.create_endpoint_config(**config)
    sagemaker.create_endpoint(EndpointName="restarting", EndpointConfigName=config["EndpointConfigName"])
    with committed_session_factory() as session:
        endpoint = get_endpoint_by_name(
            session, account_id=account.account_id, region=TEST_REGION, name="restarting"
        )
        assert endpoint is not None
        change_endpoint(
            session,
            endpoint=endpoint,
            from_statuses={EndpointStatus.CREATING},
            values={"status": EndpointStatus.IN_SERVICE},
        )
        # Its one instance crashed and is being restarted: no URL serves.
        report_endpoint_instance(
            session,
            endpoint_id=endpoint.id,
            generation=0,
            variant_name="AllTraffic",
            ordinal=0,
            status="Pending",
            url=None,
        )
        session.commit()
    runtime = boto3.client(
        "sagemaker-runtime",
        endpoint_url=live_server.url,
        region_name="us-west-2",
        aws_access_key_id=account.access_key_id,
        aws_secret_access_key=account.secret_access_key,
        config=Config(retries={"max_attempts": 1, "mode": "standard"}),
    )
    with pytest.raises(ClientError) as raised:
        runtime.invoke_endpoint(EndpointName="restarting", Body=b'{"inputs": "hi"}')
    assert error_of(raised) == (
        "ServiceUnavailable",
        "No instance of endpoint restarting is serving right now; retry shortly.",
    )
    assert raised.value.response["ResponseMetadata"]["HTTPStatusCode"] == 503
    described = sagemaker.describe_endpoint(EndpointName="restarting")
    assert described["ProductionVariants"][0]["CurrentInstanceCount"] == 0
