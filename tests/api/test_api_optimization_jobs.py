"""Create/Describe/List/Stop/DeleteOptimizationJob through boto3 against the live server."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
import redis
from botocore.exceptions import ClientError
from sqlalchemy.orm import Session, sessionmaker

from db.models.optimization_job import OptimizationJob
from db.models.optimization_job_status import OptimizationJobStatus as Status
from db.queries.optimization_job import (
    get_optimization_job_by_name,
    set_job_output,
    transition_optimization_job,
)
from tests.factories.accounts import AccountCredentials, create_account
from tests.factories.optimization_jobs import create_optimization_job_request
from tests.factories.sagemaker_models import create_model_request
from tests.fixtures.live_server import TEST_REGION, DispatchTarget

SessionFactory = sessionmaker[Session]
ECHOED = [
    "OptimizationJobName",
    "ModelSource",
    "OptimizationEnvironment",
    "DeploymentInstanceType",
    "MaxInstanceCount",
    "OptimizationConfigs",
    "OutputConfig",
    "RoleArn",
    "StoppingCondition",
    "VpcConfig",
]


def error_of(raised: pytest.ExceptionInfo[ClientError]) -> tuple[str, str]:
    error = raised.value.response["Error"]
    return error["Code"], error["Message"]


def load_job(factory: SessionFactory, account: AccountCredentials, name: str) -> OptimizationJob:
    with factory() as session:
        job = get_optimization_job_by_name(
            session, account_id=account.account_id, region=TEST_REGION, name=name
        )
        assert job is not None
        return job


def move_job(factory: SessionFactory, account: AccountCredentials, name: str, *statuses: Status) -> None:
    """Play the worker's part: walk the job through ``statuses``."""
    with factory() as session:
        job = get_optimization_job_by_name(
            session, account_id=account.account_id, region=TEST_REGION, name=name
        )
        assert job is not None
        for status in statuses:
            transition_optimization_job(session, job=job, status=status, message=f"worker: {status}")
        session.commit()


def test_create_and_describe_echo_every_member(sagemaker: Any, account: AccountCredentials) -> None:
    body = create_optimization_job_request(OptimizationJobName="Eagle-Job-1", RoleArn=account.role_arn)
    arn = sagemaker.create_optimization_job(**body)["OptimizationJobArn"]
    assert arn == f"arn:aws:sagemaker:us-west-2:{account.aws_account_id}:optimization-job/eagle-job-1"

    described = sagemaker.describe_optimization_job(OptimizationJobName="eagle-job-1")
    for member in ECHOED:
        assert described[member] == body[member], member
    assert "Tags" not in described
    assert described["OptimizationJobArn"] == arn
    assert described["OptimizationJobStatus"] == "STARTING"
    assert described["CreationTime"] == described["LastModifiedTime"]
    for absent in ("OptimizationStartTime", "OptimizationEndTime", "FailureReason", "OptimizationOutput"):
        assert absent not in described


def test_the_peagle_draft_variant_is_accepted(sagemaker: Any, account: AccountCredentials) -> None:
    body = create_optimization_job_request(
        OptimizationJobName="peagle-job",
        RoleArn=account.role_arn,
        OptimizationEnvironment={"EAGLE_VARIANT": "peagle", "EAGLE_NUM_SPECULATIVE_TOKENS": "4"},
    )
    sagemaker.create_optimization_job(**body)
    described = sagemaker.describe_optimization_job(OptimizationJobName="peagle-job")
    assert described["OptimizationEnvironment"]["EAGLE_VARIANT"] == "peagle"
    with pytest.raises(ClientError) as raised:
        sagemaker.create_optimization_job(
            **create_optimization_job_request(
                OptimizationJobName="medusa-job",
                RoleArn=account.role_arn,
                OptimizationEnvironment={"EAGLE_VARIANT": "medusa"},
            )
        )
    assert error_of(raised)[1].endswith("Member must satisfy enum value set: [eagle3, eagle2, peagle]")


def test_create_enqueues_the_job_after_commit(
    sagemaker: Any,
    account: AccountCredentials,
    committed_session_factory: SessionFactory,
    api_dispatch_env: DispatchTarget,
) -> None:
    body = create_optimization_job_request()
    sagemaker.create_optimization_job(**body)
    job = load_job(committed_session_factory, account, body["OptimizationJobName"])
    assert job.celery_task_id
    queued = redis.Redis.from_url(api_dispatch_env.broker_url).lrange(api_dispatch_env.queue, 0, -1)
    messages = [json.loads(raw) for raw in queued]
    (message,) = [m for m in messages if m["headers"]["id"] == job.celery_task_id]
    args, _kwargs, _embed = json.loads(base64.b64decode(message["body"]))
    assert args == [job.id]


def test_duplicate_names_are_resource_in_use_ignoring_case(
    sagemaker: Any, account: AccountCredentials
) -> None:
    sagemaker.create_optimization_job(**create_optimization_job_request(OptimizationJobName="dup-job"))
    with pytest.raises(ClientError) as raised:
        sagemaker.create_optimization_job(**create_optimization_job_request(OptimizationJobName="DUP-job"))
    assert error_of(raised) == (
        "ResourceInUse",
        "Optimization job names must be unique within an AWS account and region, and an optimization job "
        f"with this name already exists (arn:aws:sagemaker:us-west-2:{account.aws_account_id}:"
        "optimization-job/dup-job).",
    )
    assert isinstance(raised.value, sagemaker.exceptions.ResourceInUse)


@pytest.mark.parametrize(
    "operation", ["describe_optimization_job", "stop_optimization_job", "delete_optimization_job"]
)
def test_unknown_job_is_resource_not_found(sagemaker: Any, operation: str) -> None:
    with pytest.raises(sagemaker.exceptions.ResourceNotFound) as raised:
        getattr(sagemaker, operation)(OptimizationJobName="no-such-job")
    assert error_of(raised) == ("ResourceNotFound", 'Could not find optimization job "no-such-job".')


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            {"OptimizationJobName": "bad_name__"},
            "1 validation error detected: Value 'bad_name__' at 'optimizationJobName' failed to satisfy "
            "constraint: Member must satisfy regular expression pattern: ^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$",
        ),
        (
            {"OptimizationConfigs": [{"ModelQuantizationConfig": {"Image": "img"}}]},
            "1 validation error detected: Value 'ModelQuantizationConfig' at "
            "'optimizationConfigs.1.member' failed to satisfy constraint: ModelQuantizationConfig is not "
            "supported: this deployment supports speculative decoding only "
            "(ModelSpeculativeDecodingConfig with Technique EAGLE)",
        ),
        (
            {"OptimizationConfigs": []},
            "1 validation error detected: Value '0 ModelSpeculativeDecodingConfig' at 'optimizationConfigs' "
            "failed to satisfy constraint: Member must contain exactly one ModelSpeculativeDecodingConfig: "
            "this deployment supports speculative decoding only",
        ),
        (
            {"OptimizationEnvironment": {"EAGLE_TTT_STEPS": "99", "EAGLE_TYPO": "1", "OTHER": "kept"}},
            "2 validation errors detected: Value '99' at 'optimizationEnvironment.EAGLE_TTT_STEPS' "
            "failed to satisfy constraint: Member must be an integer between 1 and 10; Value '1' at "
            "'optimizationEnvironment.EAGLE_TYPO' failed to satisfy constraint: Unknown EAGLE_ key; "
            "supported keys: EAGLE_DRAFT_VOCAB_SIZE, EAGLE_LEARNING_RATE, EAGLE_NUM_SPECULATIVE_TOKENS, "
            "EAGLE_REGENERATE, EAGLE_SELF_INSTRUCT_CONVERSATIONS, EAGLE_SELF_INSTRUCT_OPENINGS, "
            "EAGLE_TRAIN_MAX_MINUTES, EAGLE_TTT_STEPS, EAGLE_VARIANT",
        ),
        (
            {"ModelSource": {}},
            "1 validation error detected: Value '{}' at 'modelSource' failed to satisfy constraint: "
            "Member must specify exactly one of S3 and SageMakerModel",
        ),
        (
            {"ModelSource": {"S3": {"S3Uri": "https://bucket.s3.amazonaws.com/model/"}}},
            "1 validation error detected: Value 'https://bucket.s3.amazonaws.com/model/' at "
            "'modelSource.s3.s3Uri' failed to satisfy constraint: Member must be an s3://bucket/prefix URI "
            "(this deployment reads and writes S3 only)",
        ),
        (
            {
                "DeploymentInstanceType": "ml.t2.medium",
                "StoppingCondition": {"MaxPendingTimeInSeconds": 9**9},
            },
            "2 validation errors detected: Value 'ml.t2.medium' at 'deploymentInstanceType' failed to "
            "satisfy constraint: Member must satisfy enum value set: [ml.p4d.24xlarge, ml.p4de.24xlarge",
        ),
        (
            {"Tags": [{"Key": "team", "Value": "a"}, {"Key": "team", "Value": "b"}]},
            "1 validation error detected: Value '[team=a, team=b]' at 'tags' failed to satisfy constraint: "
            "Member must have unique tag keys; duplicated: team",
        ),
    ],
)
def test_create_validation_errors(sagemaker: Any, overrides: dict[str, Any], message: str) -> None:
    with pytest.raises(ClientError) as raised:
        sagemaker.create_optimization_job(**create_optimization_job_request(**overrides))
    code, text = error_of(raised)
    assert code == "ValidationException"
    assert text.startswith(message), text


def test_source_model_must_exist_and_is_snapshotted(
    sagemaker: Any, account: AccountCredentials, committed_session_factory: SessionFactory
) -> None:
    source = {"SageMakerModel": {"ModelName": "base-llama"}}
    with pytest.raises(ClientError) as raised:
        sagemaker.create_optimization_job(**create_optimization_job_request(ModelSource=source))
    assert error_of(raised) == (
        "ValidationException",
        f'Could not find model "arn:aws:sagemaker:us-west-2:{account.aws_account_id}:model/base-llama".',
    )
    model_body = create_model_request(ModelName="base-llama")
    sagemaker.create_model(**model_body)
    job_body = create_optimization_job_request(ModelSource=source)
    sagemaker.create_optimization_job(**job_body)
    sagemaker.delete_model(ModelName="base-llama")  # the job keeps what it was created with
    job = load_job(committed_session_factory, account, job_body["OptimizationJobName"])
    assert job.source_model_container == model_body["PrimaryContainer"]
    described = sagemaker.describe_optimization_job(OptimizationJobName=job_body["OptimizationJobName"])
    assert described["ModelSource"] == source


def test_a_model_without_model_data_cannot_be_optimized(sagemaker: Any) -> None:
    sagemaker.create_model(ModelName="image-only", PrimaryContainer={"Image": "repo/image:1"})
    with pytest.raises(ClientError) as raised:
        sagemaker.create_optimization_job(
            **create_optimization_job_request(ModelSource={"SageMakerModel": {"ModelName": "image-only"}})
        )
    assert error_of(raised)[0] == "ValidationException"
    assert "has no model data to optimize" in error_of(raised)[1]


def test_stop_and_delete_follow_the_life_cycle(
    sagemaker: Any, account: AccountCredentials, committed_session_factory: SessionFactory
) -> None:
    name = create_optimization_job_request()["OptimizationJobName"]
    sagemaker.create_optimization_job(**create_optimization_job_request(OptimizationJobName=name))
    move_job(committed_session_factory, account, name, Status.INPROGRESS)

    with pytest.raises(ClientError) as raised:
        sagemaker.delete_optimization_job(OptimizationJobName=name)
    assert error_of(raised) == (
        "ValidationException",
        f'Cannot delete optimization job "{name}" in status INPROGRESS. Stop the job and delete it after it '
        "reaches COMPLETED, FAILED or STOPPED.",
    )

    sagemaker.stop_optimization_job(OptimizationJobName=name)
    described = sagemaker.describe_optimization_job(OptimizationJobName=name)
    assert described["OptimizationJobStatus"] == "STOPPING"
    assert described["LastModifiedTime"] > described["CreationTime"]
    assert "OptimizationStartTime" in described
    sagemaker.stop_optimization_job(OptimizationJobName=name)  # stopping again is harmless

    move_job(committed_session_factory, account, name, Status.STOPPED)
    described = sagemaker.describe_optimization_job(OptimizationJobName=name)
    assert described["OptimizationJobStatus"] == "STOPPED"
    assert described["OptimizationEndTime"] >= described["OptimizationStartTime"]
    with pytest.raises(ClientError) as raised:
        sagemaker.stop_optimization_job(OptimizationJobName=name)
    assert error_of(raised) == (
        "ValidationException",
        f'The optimization job "{name}" is in status STOPPED; only jobs in STARTING or INPROGRESS status '
        "can be stopped.",
    )

    sagemaker.delete_optimization_job(OptimizationJobName=name)
    with pytest.raises(sagemaker.exceptions.ResourceNotFound):
        sagemaker.describe_optimization_job(OptimizationJobName=name)


def test_completed_job_shows_output_and_failed_job_its_reason(
    sagemaker: Any, account: AccountCredentials, committed_session_factory: SessionFactory
) -> None:
    done, failed = (create_optimization_job_request() for _ in range(2))
    sagemaker.create_optimization_job(**done)
    sagemaker.create_optimization_job(**failed)
    with committed_session_factory() as session:
        job = get_optimization_job_by_name(
            session, account_id=account.account_id, region=TEST_REGION, name=done["OptimizationJobName"]
        )
        assert job is not None
        transition_optimization_job(session, job=job, status=Status.INPROGRESS, message="run")
        set_job_output(
            session, job=job, optimization_output={"RecommendedInferenceImage": "vllm/vllm-openai:v0.11"}
        )
        transition_optimization_job(session, job=job, status=Status.COMPLETED, message="done")
        session.commit()
    move_job(committed_session_factory, account, failed["OptimizationJobName"], Status.INPROGRESS)
    with committed_session_factory() as session:
        job = get_optimization_job_by_name(
            session, account_id=account.account_id, region=TEST_REGION, name=failed["OptimizationJobName"]
        )
        assert job is not None
        transition_optimization_job(
            session, job=job, status=Status.FAILED, message="x", failure_reason="No config.json at s3://m/"
        )
        session.commit()

    completed = sagemaker.describe_optimization_job(OptimizationJobName=done["OptimizationJobName"])
    assert completed["OptimizationJobStatus"] == "COMPLETED"
    assert completed["OptimizationOutput"] == {"RecommendedInferenceImage": "vllm/vllm-openai:v0.11"}
    assert completed["OptimizationEndTime"] >= completed["OptimizationStartTime"]
    broken = sagemaker.describe_optimization_job(OptimizationJobName=failed["OptimizationJobName"])
    assert (broken["OptimizationJobStatus"], broken["FailureReason"]) == (
        "FAILED",
        "No config.json at s3://m/",
    )


def test_create_refuses_a_role_of_another_account(
    sagemaker: Any, account: AccountCredentials, committed_session_factory: SessionFactory
) -> None:
    with committed_session_factory() as session:
        other = create_account(session)
        session.commit()
    # The other account's role exists and is registered, but to that account only.
    body = create_optimization_job_request(RoleArn=other.role_arn)
    with pytest.raises(ClientError) as raised:
        sagemaker.create_optimization_job(**body)
    assert error_of(raised) == (
        "ValidationException",
        f"Could not assume role {other.role_arn}. Please ensure that the role exists and allows "
        "principal 'sagemaker.amazonaws.com' to assume the role.",
    )
    with pytest.raises(ClientError) as missing:
        sagemaker.describe_optimization_job(OptimizationJobName=body["OptimizationJobName"])
    assert error_of(missing)[0] == "ResourceNotFound"
