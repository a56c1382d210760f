"""AddTags, ListTags and DeleteTags on models and optimization jobs: boto3, the AWS CLI, raw calls."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import httpx
import pytest
from botocore.exceptions import ClientError
from sqlalchemy.orm import Session, sessionmaker

from core.services import tags as tags_service
from tests.api.signed_http import call_operation, rest_call
from tests.factories.accounts import AccountCredentials, create_account
from tests.factories.optimization_jobs import create_optimization_job_request
from tests.factories.sagemaker_models import create_model_request
from tests.fixtures.live_server import AwsCli, LiveServer, sagemaker_client


def error_of(raised: pytest.ExceptionInfo[ClientError]) -> tuple[str, str]:
    error = raised.value.response["Error"]
    return error["Code"], error["Message"]


def raw_error(response: httpx.Response) -> tuple[int, str, str]:
    body = response.json()
    return response.status_code, body["__type"], body["message"]


def tag_list(pairs: dict[str, str]) -> list[dict[str, str]]:
    return [{"Key": key, "Value": value} for key, value in pairs.items()]


def listed(sagemaker: Any, arn: str) -> dict[str, str]:
    response = sagemaker.list_tags(ResourceArn=arn)
    assert "NextToken" not in response
    return {tag["Key"]: tag["Value"] for tag in response["Tags"]}


def tag_operations(client: Any, arn: str) -> list[Callable[[], Any]]:
    """ListTags, AddTags and DeleteTags on ``arn``, each ready to call."""
    return [
        partial(client.list_tags, ResourceArn=arn),
        partial(client.add_tags, ResourceArn=arn, Tags=tag_list({"team": "changed"})),
        partial(client.delete_tags, ResourceArn=arn, TagKeys=["team"]),
    ]


@pytest.fixture
def model_arn(sagemaker: Any) -> str:
    body = create_model_request(Tags=tag_list({"team": "ml"}))
    arn: str = sagemaker.create_model(**body)["ModelArn"]
    return arn


@pytest.fixture
def other_account(committed_session_factory: sessionmaker[Session]) -> AccountCredentials:
    with committed_session_factory() as session:
        credentials = create_account(session)
        session.commit()
    return credentials


def test_model_tags_round_trip_through_boto3(sagemaker: Any, model_arn: str) -> None:
    assert sagemaker.list_tags(ResourceArn=model_arn)["Tags"] == tag_list({"team": "ml"}), (
        "CreateModel's Tags are the same store"
    )
    added = sagemaker.add_tags(ResourceArn=model_arn, Tags=tag_list({"team": "research", "stage": "dev"}))
    assert added["Tags"] == tag_list({"team": "research", "stage": "dev"})
    assert sagemaker.list_tags(ResourceArn=model_arn)["Tags"] == tag_list(
        {"team": "research", "stage": "dev"}
    ), "AddTags overwrites an existing key in place"
    response = sagemaker.delete_tags(ResourceArn=model_arn, TagKeys=["team", "never-there"])
    assert {key: value for key, value in response.items() if key != "ResponseMetadata"} == {}
    assert listed(sagemaker, model_arn) == {"stage": "dev"}
    sagemaker.delete_tags(ResourceArn=model_arn, TagKeys=["stage"])
    assert sagemaker.list_tags(ResourceArn=model_arn)["Tags"] == []


def test_the_arn_is_case_insensitive_in_the_name_as_sagemaker_lower_cases_it(sagemaker: Any) -> None:
    sagemaker.create_model(**create_model_request(ModelName="Mixed-Case-Model"))
    arn = sagemaker.describe_model(ModelName="mixed-case-model")["ModelArn"]
    sagemaker.add_tags(
        ResourceArn=arn.replace("mixed-case-model", "Mixed-Case-Model"), Tags=tag_list({"a": "1"})
    )
    assert listed(sagemaker, arn) == {"a": "1"}


def test_job_tags_round_trip_and_show_in_the_job_detail(
    sagemaker: Any, live_server: LiveServer, account: AccountCredentials
) -> None:
    body = create_optimization_job_request(Tags=tag_list({"team": "ml", "cost-center": "42"}))
    arn = sagemaker.create_optimization_job(**body)["OptimizationJobArn"]
    assert listed(sagemaker, arn) == {"team": "ml", "cost-center": "42"}
    sagemaker.add_tags(ResourceArn=arn, Tags=tag_list({"owner": "alice@example.com"}))
    sagemaker.delete_tags(ResourceArn=arn, TagKeys=["cost-center"])
    assert listed(sagemaker, arn) == {"team": "ml", "owner": "alice@example.com"}
    # The dashboard's job page reads the job detail, which carries the same tags.
    detail = rest_call(
        "GET", live_server.url, f"/v1/optimization-jobs/{body['OptimizationJobName']}", account
    )
    assert detail.status_code == 200, detail.text
    assert detail.json()["Tags"] == tag_list({"team": "ml", "owner": "alice@example.com"})


def test_deleting_the_resource_deletes_its_tags(sagemaker: Any, model_arn: str) -> None:
    name = model_arn.rsplit("/", 1)[1]
    sagemaker.delete_model(ModelName=name)
    with pytest.raises(ClientError) as raised:
        sagemaker.list_tags(ResourceArn=model_arn)
    assert error_of(raised) == ("ResourceNotFound", f'Could not find model "{model_arn}".')
    sagemaker.create_model(**create_model_request(ModelName=name))
    assert sagemaker.list_tags(ResourceArn=model_arn)["Tags"] == [], "a new model of that name starts bare"


def test_the_aws_cli_round_trip(aws_cli: AwsCli, sagemaker: Any, model_arn: str) -> None:
    added = aws_cli(
        "add-tags", "--resource-arn", model_arn, "--tags", "Key=env,Value=prod", "Key=team,Value=x"
    )
    assert added.returncode == 0, added.stderr
    assert added.json() == {"Tags": tag_list({"env": "prod", "team": "x"})}
    shown = aws_cli("list-tags", "--resource-arn", model_arn)
    assert shown.returncode == 0, shown.stderr
    assert shown.json() == {"Tags": tag_list({"team": "x", "env": "prod"})}
    deleted = aws_cli("delete-tags", "--resource-arn", model_arn, "--tag-keys", "team", "absent")
    assert deleted.returncode == 0, deleted.stderr
    assert aws_cli("list-tags", "--resource-arn", model_arn).json() == {"Tags": tag_list({"env": "prod"})}
    missing = aws_cli("list-tags", "--resource-arn", model_arn.replace("model/", "model/nope-"))
    assert missing.returncode == 255
    assert "An error occurred (ResourceNotFound) when calling the ListTags operation" in missing.stderr


def test_fifty_tags_per_resource(sagemaker: Any, model_arn: str) -> None:
    fifty = {f"k{index:02d}": str(index) for index in range(49)}
    sagemaker.add_tags(ResourceArn=model_arn, Tags=tag_list(fifty))  # with "team": 50
    sagemaker.add_tags(ResourceArn=model_arn, Tags=tag_list({"k00": "overwritten", "team": "y"}))
    with pytest.raises(ClientError) as raised:
        sagemaker.add_tags(ResourceArn=model_arn, Tags=tag_list({"k00": "z", "one-too-many": "1"}))
    assert error_of(raised) == (
        "ResourceLimitExceeded",
        f'Adding 2 tag(s) to "{model_arn}" would give it 51 tags; a resource can have at most 50.',
    )
    everything = sagemaker.list_tags(ResourceArn=model_arn, MaxResults=50)
    assert len(everything["Tags"]) == 50
    assert "NextToken" not in everything
    assert {tag["Key"]: tag["Value"] for tag in everything["Tags"]}["k00"] == "overwritten"
    sagemaker.delete_tags(ResourceArn=model_arn, TagKeys=["k01"])
    sagemaker.add_tags(ResourceArn=model_arn, Tags=tag_list({"one-more": "1"}))


def test_more_than_fifty_in_one_request_fails_the_service_model(
    live_server: LiveServer, account: AccountCredentials, model_arn: str
) -> None:
    body = {"ResourceArn": model_arn, "Tags": tag_list({f"k{index}": "v" for index in range(51)})}
    status, code, message = raw_error(call_operation(live_server.url, account, "AddTags", body))
    assert (status, code) == (400, "ValidationException")
    assert message.endswith(
        "at 'tags' failed to satisfy constraint: Member must have length less than or equal to 50"
    )


@pytest.mark.parametrize(
    ("operation", "extra", "message"),
    [
        (
            "AddTags",
            {"Tags": [{"Key": "k" * 129, "Value": "v"}]},
            f"1 validation error detected: Value '{'k' * 129}' at 'tags.1.member.key' failed to satisfy "
            "constraint: Member must have length less than or equal to 128",
        ),
        (
            "AddTags",
            {"Tags": [{"Key": "", "Value": "v"}]},
            "1 validation error detected: Value '' at 'tags.1.member.key' failed to satisfy constraint: "
            "Member must have length greater than or equal to 1",
        ),
        (
            "AddTags",
            {"Tags": [{"Key": "k", "Value": "v" * 257}]},
            f"1 validation error detected: Value '{'v' * 257}' at 'tags.1.member.value' failed to satisfy "
            "constraint: Member must have length less than or equal to 256",
        ),
        (
            "AddTags",
            {"Tags": [{"Key": "ok", "Value": ""}, {"Key": "aws:owner", "Value": "x"}]},
            "1 validation error detected: Value 'aws:owner' at 'tags.2.member.key' failed to satisfy "
            "constraint: Member must not start with the reserved prefix 'aws:'",
        ),
        (
            "AddTags",
            {"Tags": [{"Key": "a", "Value": "1"}, {"Key": "a", "Value": "2"}]},
            "1 validation error detected: Value '[a=1, a=2]' at 'tags' failed to satisfy constraint: "
            "Member must have unique tag keys; duplicated: a",
        ),
        (
            "DeleteTags",
            {"TagKeys": ["AWS:Name"]},
            "1 validation error detected: Value 'AWS:Name' at 'tagKeys.1.member' failed to satisfy "
            "constraint: Member must not start with the reserved prefix 'aws:'",
        ),
        (
            "DeleteTags",
            {"TagKeys": []},
            "1 validation error detected: Value '[]' at 'tagKeys' failed to satisfy constraint: "
            "Member must have length greater than or equal to 1",
        ),
        (
            "ListTags",
            {"MaxResults": 10},
            "1 validation error detected: Value '10' at 'maxResults' failed to satisfy constraint: "
            "Member must have value greater than or equal to 50",
        ),
        ("ListTags", {"NextToken": "not-a-token"}, "Invalid NextToken 'not-a-token'."),
    ],
)
def test_validation_errors(
    *,
    live_server: LiveServer,
    account: AccountCredentials,
    model_arn: str,
    operation: str,
    extra: dict[str, Any],
    message: str,
) -> None:
    response = call_operation(live_server.url, account, operation, {"ResourceArn": model_arn, **extra})
    assert raw_error(response) == (400, "ValidationException", message)


@pytest.mark.parametrize(
    ("operation", "request_factory", "name_member"),
    [
        ("CreateModel", create_model_request, "ModelName"),
        ("CreateOptimizationJob", create_optimization_job_request, "OptimizationJobName"),
    ],
)
def test_create_refuses_a_reserved_tag_key_as_add_tags_does(
    *,
    sagemaker: Any,
    live_server: LiveServer,
    account: AccountCredentials,
    operation: str,
    request_factory: Callable[..., dict[str, Any]],
    name_member: str,
) -> None:
    body = request_factory(
        Tags=[{"Key": "team", "Value": "ml"}, {"Key": "AWS:CloudFormation:stack", "Value": "x"}]
    )
    response = call_operation(live_server.url, account, operation, body)
    assert raw_error(response) == (
        400,
        "ValidationException",
        "1 validation error detected: Value 'AWS:CloudFormation:stack' at 'tags.2.member.key' failed to "
        "satisfy constraint: Member must not start with the reserved prefix 'aws:'",
    )
    # Refused before anything was created.
    if operation == "CreateModel":
        assert sagemaker.list_models(NameContains=body[name_member])["Models"] == []
    else:
        listed_jobs = sagemaker.list_optimization_jobs(NameContains=body[name_member])
        assert listed_jobs["OptimizationJobSummaries"] == []


@pytest.mark.parametrize(
    "resource",
    ["inference-component/my-component", "training-job/job-1", "model", "model/", "optimization-job"],
)
def test_an_arn_of_another_resource_type_is_a_validation_error(
    sagemaker: Any, account: AccountCredentials, resource: str
) -> None:
    arn = f"arn:aws:sagemaker:us-west-2:{account.aws_account_id}:{resource}"
    for call in tag_operations(sagemaker, arn):
        with pytest.raises(ClientError) as raised:
            call()
        code, message = error_of(raised)
        assert code == "ValidationException"
        assert f"'{arn}'" in message


def test_a_malformed_arn_fails_the_pattern(sagemaker: Any) -> None:
    with pytest.raises(ClientError) as raised:
        sagemaker.list_tags(ResourceArn="model/not-an-arn")
    assert error_of(raised) == (
        "ValidationException",
        "1 validation error detected: Value 'model/not-an-arn' at 'resourceArn' failed to satisfy "
        "constraint: Member must satisfy regular expression pattern: "
        "^arn:aws[a-z-]*:sagemaker:[a-z0-9-]*:[0-9]{12}:.+$",
    )


def test_unknown_resources_are_not_found(sagemaker: Any, account: AccountCredentials, model_arn: str) -> None:
    prefix = f"arn:aws:sagemaker:us-west-2:{account.aws_account_id}"
    for arn, kind in (
        (f"{prefix}:model/no-such-model", "model"),
        (f"{prefix}:optimization-job/no-such-job", "optimization job"),
        (model_arn.replace(":us-west-2:", ":eu-west-1:"), "model"),
        (model_arn.replace("arn:aws:", "arn:aws-cn:"), "model"),
    ):
        for call in tag_operations(sagemaker, arn):
            with pytest.raises(ClientError) as raised:
                call()
            assert error_of(raised) == ("ResourceNotFound", f'Could not find {kind} "{arn}".')


def test_another_accounts_resources_are_invisible(
    sagemaker: Any, live_server: LiveServer, other_account: AccountCredentials, model_arn: str
) -> None:
    job_arn = sagemaker.create_optimization_job(**create_optimization_job_request())["OptimizationJobArn"]
    intruder = sagemaker_client(live_server, other_account, retries={"max_attempts": 1, "mode": "legacy"})
    for arn, kind in ((model_arn, "model"), (job_arn, "optimization job")):
        for call in tag_operations(intruder, arn):
            with pytest.raises(ClientError) as raised:
                call()
            assert error_of(raised) == ("ResourceNotFound", f'Could not find {kind} "{arn}".')
        assert listed(sagemaker, arn) == {"team": "ml"}, "the owner's tags are untouched"
    # The same name in the other account is a different resource with its own tags.
    name = model_arn.rsplit("/", 1)[1]
    own_arn = intruder.create_model(**create_model_request(ModelName=name))["ModelArn"]
    assert own_arn != model_arn
    assert intruder.list_tags(ResourceArn=own_arn)["Tags"] == []


def test_list_tags_pages_with_next_token(
    sagemaker: Any, model_arn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # MaxResults may not go below 50 (= the tag limit), so pages are made smaller by the default.
    sagemaker.add_tags(ResourceArn=model_arn, Tags=tag_list({f"k{index}": str(index) for index in range(4)}))
    monkeypatch.setattr(tags_service, "DEFAULT_MAX_RESULTS", 2)
    first = sagemaker.list_tags(ResourceArn=model_arn)
    assert [tag["Key"] for tag in first["Tags"]] == ["team", "k0"]
    second = sagemaker.list_tags(ResourceArn=model_arn, NextToken=first["NextToken"])
    assert [tag["Key"] for tag in second["Tags"]] == ["k1", "k2"]
    third = sagemaker.list_tags(ResourceArn=model_arn, NextToken=second["NextToken"])
    assert [tag["Key"] for tag in third["Tags"]] == ["k3"]
    assert "NextToken" not in third
    keys = [
        tag["Key"]
        for page in sagemaker.get_paginator("list_tags").paginate(ResourceArn=model_arn)
        for tag in page["Tags"]
    ]
    assert keys == ["team", "k0", "k1", "k2", "k3"]
    other_arn = sagemaker.create_model(**create_model_request())["ModelArn"]
    with pytest.raises(ClientError) as raised:
        sagemaker.list_tags(ResourceArn=other_arn, NextToken=first["NextToken"])
    assert error_of(raised)[0] == "ValidationException", "a token is only good for the ARN it was issued for"
