"""Optimization jobs: CreateOptimizationJob request bodies and rows."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

from sqlalchemy.orm import Session

from core.sagemaker.shapes.optimization_jobs import CreateOptimizationJobRequest
from db.arns import optimization_job_arn
from db.models.optimization_job import OptimizationJob
from db.models.optimization_job_status import OptimizationJobStatus
from db.queries.optimization_job import create_optimization_job as insert_optimization_job
from db.queries.role import role_arn
from tests.factories.accounts import FACTORY_ROLE_ARN, TEST_ROLE_NAME
from tests.factories.rows import insert_named_row


def unique_job_name(prefix: str = "job") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def create_optimization_job_request(**overrides: Any) -> dict[str, Any]:
    """A valid CreateOptimizationJob body (every optional member set), as the AWS CLI sends it."""
    body: dict[str, Any] = {
        "OptimizationJobName": unique_job_name(),
        "RoleArn": FACTORY_ROLE_ARN,
        "ModelSource": {"S3": {"S3Uri": "s3://models/llama/", "ModelAccessConfig": {"AcceptEula": True}}},
        "DeploymentInstanceType": "ml.p5.48xlarge",
        "MaxInstanceCount": 1,
        "OptimizationEnvironment": {
            "OPTION_TENSOR_PARALLEL_DEGREE": "8",
            "EAGLE_NUM_SPECULATIVE_TOKENS": "3",
        },
        "OptimizationConfigs": [
            {
                "ModelSpeculativeDecodingConfig": {
                    "Technique": "EAGLE",
                    "TrainingDataSource": {"S3Uri": "s3://data/train/", "S3DataType": "S3Prefix"},
                }
            }
        ],
        "OutputConfig": {
            "S3OutputLocation": "s3://out/jobs/",
            "KmsKeyId": "arn:aws:kms:us-west-2:111122223333:key/abcd",
            "SageMakerModel": {"ModelName": "optimized-model"},
        },
        "StoppingCondition": {"MaxRuntimeInSeconds": 36000, "MaxPendingTimeInSeconds": 7200},
        "Tags": [{"Key": "team", "Value": "ml"}],
        "VpcConfig": {"SecurityGroupIds": ["sg-0123456789"], "Subnets": ["subnet-0123456789"]},
    }
    body.update(overrides)
    return body


def create_optimization_job(
    session: Session, *, account_id: int, aws_account_id: str, **overrides: Any
) -> OptimizationJob:
    """A STARTING job row as CreateOptimizationJob stores it; keyword overrides replace column values."""
    return insert_named_row(
        session,
        insert_optimization_job,
        arn_for=optimization_job_arn,
        account_id=account_id,
        aws_account_id=aws_account_id,
        default_name=unique_job_name(),
        defaults={
            # The owner's own role, as CreateOptimizationJob requires (create_account registers it).
            "role_arn": role_arn(aws_account_id=aws_account_id, name=TEST_ROLE_NAME),
            "model_source": {"S3": {"S3Uri": "s3://models/llama/"}},
            "deployment_instance_type": "ml.g5.2xlarge",
            "optimization_configs": [{"ModelSpeculativeDecodingConfig": {"Technique": "EAGLE"}}],
            "output_config": {"S3OutputLocation": "s3://out/jobs/"},
            "stopping_condition": {"MaxRuntimeInSeconds": 3600},
            "optimization_types": ["SpeculativeDecoding"],
        },
        overrides=overrides,
    )


def unsaved_job_row(request: dict[str, Any] | None = None, **columns: Any) -> OptimizationJob:
    """An IN_PROGRESS job row, never inserted, whose request columns hold ``request`` (default:
    ``create_optimization_job_request()``) as CreateOptimizationJob stores it: each member's
    wire form. Keyword ``columns`` replace column values."""
    parsed = CreateOptimizationJobRequest.model_validate(request or create_optimization_job_request())
    stored: dict[str, Any] = {
        "id": 7,
        "account_id": 3,
        "name": "job",
        "region": "us-west-2",
        "arn": "arn:aws:sagemaker:us-west-2:111122223333:optimization-job/job",
        "role_arn": FACTORY_ROLE_ARN,
        "status": OptimizationJobStatus.INPROGRESS,
        "started_at": None,
        "created_at": datetime(2025, 1, 2, tzinfo=UTC),
        "model_source": parsed.model_source.to_wire(),
        "optimization_environment": parsed.optimization_environment,
        "optimization_configs": [config.to_wire() for config in parsed.optimization_configs],
        "output_config": parsed.output_config.to_wire(),
        "stopping_condition": parsed.stopping_condition.to_wire(),
        "source_model_container": None,
    }
    return OptimizationJob(**(stored | columns))
