"""CreateModel, DescribeModel, ListModels and DeleteModel through boto3 against the live server."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError

from tests.factories.accounts import AccountCredentials
from tests.factories.sagemaker_models import create_model_request, s3_prefix_source


def error_of(raised: pytest.ExceptionInfo[ClientError]) -> tuple[str, str]:
    error = raised.value.response["Error"]
    return error["Code"], error["Message"]


def test_create_and_describe_echo_every_member(sagemaker: Any, account: AccountCredentials) -> None:
    body = create_model_request(
        ModelName="Llama-With-Eagle",
        ExecutionRoleArn=account.role_arn,
        InferenceExecutionConfig={"Mode": "Serial"},
        VpcConfig={"SecurityGroupIds": ["sg-1"], "Subnets": ["subnet-1"]},
        EnableNetworkIsolation=True,
        Tags=[{"Key": "team", "Value": "ml"}],
    )
    arn = sagemaker.create_model(**body)["ModelArn"]
    assert arn == f"arn:aws:sagemaker:us-west-2:{account.aws_account_id}:model/llama-with-eagle"
    described = sagemaker.describe_model(ModelName="llama-with-eagle")
    for member in (
        "ModelName",
        "PrimaryContainer",
        "InferenceExecutionConfig",
        "ExecutionRoleArn",
        "VpcConfig",
    ):
        assert described[member] == body[member], member
    assert described["EnableNetworkIsolation"] is True
    assert described["ModelArn"] == arn
    assert "Containers" not in described
    assert "Tags" not in described
    channel = described["PrimaryContainer"]["AdditionalModelDataSources"][0]
    assert channel["ChannelName"] == "eagle_model"


def test_an_eagle_model_channel_may_be_a_tar_gz(sagemaker: Any) -> None:
    source = {"S3Uri": "s3://m/head.tar.gz", "S3DataType": "S3Object", "CompressionType": "Gzip"}
    container = {
        "Image": "x",
        "ModelDataUrl": "s3://m/model.tar.gz",
        "AdditionalModelDataSources": [{"ChannelName": "eagle_model", "S3DataSource": source}],
    }
    sagemaker.create_model(ModelName="packed-head", PrimaryContainer=container)
    described = sagemaker.describe_model(ModelName="packed-head")["PrimaryContainer"]
    assert described["AdditionalModelDataSources"][0]["S3DataSource"] == source


def test_containers_instead_of_primary_container(sagemaker: Any) -> None:
    containers = [{"Image": "repo/a:1", "ModelDataUrl": "s3://m/a/"}, {"Image": "repo/b:1"}]
    sagemaker.create_model(ModelName="pipeline", Containers=containers)
    assert sagemaker.describe_model(ModelName="pipeline")["Containers"] == containers


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            {"PrimaryContainer": None},
            "Exactly one of PrimaryContainer and Containers must be specified; got neither.",
        ),
        (
            {"Containers": [{"Image": "x"}]},
            "Exactly one of PrimaryContainer and Containers must be specified; got both.",
        ),
        (
            {
                "PrimaryContainer": {
                    "Image": "x",
                    "AdditionalModelDataSources": [
                        {
                            "ChannelName": "eagle_model",
                            "S3DataSource": {
                                "S3Uri": "s3://m/head/",
                                "S3DataType": "S3Prefix",
                                "CompressionType": "Gzip",
                            },
                        }
                    ],
                }
            },
            "1 validation error detected: Value 'S3DataType=S3Prefix, CompressionType=Gzip' at "
            "'primaryContainer.additionalModelDataSources.1.member.s3DataSource' failed to satisfy "
            "constraint: The eagle_model channel must be an uncompressed directory (S3DataType S3Prefix, "
            "CompressionType None) or a model.tar.gz (S3DataType S3Object, CompressionType Gzip)",
        ),
        (
            {
                "PrimaryContainer": {
                    "Image": "x",
                    "AdditionalModelDataSources": [
                        {"ChannelName": "draft", **s3_prefix_source("s3://m/a/")},
                        {"ChannelName": "draft", **s3_prefix_source("s3://m/b/")},
                    ],
                }
            },
            "1 validation error detected: Value '[draft, draft]' at "
            "'primaryContainer.additionalModelDataSources' failed to satisfy constraint: "
            "Member must have unique ChannelName values; duplicated: draft",
        ),
        (
            {
                "ModelName": "bad_name",
                "PrimaryContainer": {"Image": "x", "Mode": "Weird", "Environment": {"1X": "v"}},
            },
            "3 validation errors detected: Value 'bad_name' at 'modelName' failed to satisfy "
            "constraint: Member must satisfy regular expression pattern: "
            "^[a-zA-Z0-9]([\\-a-zA-Z0-9]*[a-zA-Z0-9])?$; Value 'Weird' at 'primaryContainer.mode' failed "
            "to satisfy constraint: Member must satisfy enum value set: "
            "[SingleModel, MultiModel]; Value '{1X=v}' at 'primaryContainer.environment' failed to satisfy "
            "constraint: Map keys must satisfy constraint: [Member must satisfy regular expression pattern: "
            "^[a-zA-Z_][a-zA-Z0-9_]*$]",
        ),
    ],
)
def test_create_validation_errors(sagemaker: Any, overrides: dict[str, Any], message: str) -> None:
    body = {key: value for key, value in create_model_request(**overrides).items() if value is not None}
    with pytest.raises(ClientError) as raised:
        sagemaker.create_model(**body)
    assert error_of(raised) == ("ValidationException", message)


def test_duplicate_and_missing_models_are_validation_errors(
    sagemaker: Any, account: AccountCredentials
) -> None:
    arn = f"arn:aws:sagemaker:us-west-2:{account.aws_account_id}:model/twice"
    sagemaker.create_model(**create_model_request(ModelName="twice"))
    with pytest.raises(ClientError) as raised:
        sagemaker.create_model(**create_model_request(ModelName="Twice"))
    assert error_of(raised) == ("ValidationException", f'Cannot create already existing model "{arn}".')
    sagemaker.delete_model(ModelName="twice")
    for call in (sagemaker.describe_model, sagemaker.delete_model):
        with pytest.raises(ClientError) as raised:
            call(ModelName="twice")
        assert error_of(raised) == ("ValidationException", f'Could not find model "{arn}".')


def test_list_models_filters_sorts_and_paginates(sagemaker: Any) -> None:
    for name in ("m-cherry", "m-apple", "other-banana"):
        sagemaker.create_model(**create_model_request(ModelName=name))
    default = [m["ModelName"] for m in sagemaker.list_models()["Models"]]
    assert default == ["other-banana", "m-apple", "m-cherry"], "newest first by default"
    by_name = sagemaker.list_models(SortBy="Name", SortOrder="Ascending", NameContains="M-")
    assert [m["ModelName"] for m in by_name["Models"]] == ["m-apple", "m-cherry"]
    pages = sagemaker.get_paginator("list_models").paginate(SortBy="Name", PaginationConfig={"PageSize": 1})
    names = [model["ModelName"] for page in pages for model in page["Models"]]
    assert names == ["other-banana", "m-cherry", "m-apple"]
    first = sagemaker.list_models()["Models"][-1]
    assert set(first) == {"ModelName", "ModelArn", "CreationTime"}
    after = sagemaker.list_models(CreationTimeAfter=first["CreationTime"])
    assert first["ModelName"] in [m["ModelName"] for m in after["Models"]], "ListModels' After is inclusive"


@pytest.mark.parametrize("role_of", ["other-account", "unregistered-name"])
def test_create_model_refuses_a_role_the_caller_does_not_own(
    sagemaker: Any, account: AccountCredentials, role_of: str
) -> None:
    # A role of another account is refused exactly like one that does not exist.
    role = (
        "arn:aws:iam::111122223333:role/OtherAccountsRole"
        if role_of == "other-account"
        else f"arn:aws:iam::{account.aws_account_id}:role/NoSuchRole"
    )
    with pytest.raises(ClientError) as raised:
        sagemaker.create_model(**create_model_request(ExecutionRoleArn=role))
    assert error_of(raised) == (
        "ValidationException",
        f"Could not assume role {role}. Please ensure that the role exists and allows principal "
        "'sagemaker.amazonaws.com' to assume the role.",
    )
