"""SageMaker models: CreateModel request bodies and rows."""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy.orm import Session

from db.arns import sagemaker_model_arn
from db.models.sagemaker_model import SageMakerModel
from db.queries.sagemaker_model import create_sagemaker_model as insert_sagemaker_model
from tests.factories.accounts import FACTORY_ROLE_ARN
from tests.factories.rows import insert_named_row


def unique_model_name(prefix: str = "model") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def s3_prefix_source(uri: str) -> dict[str, Any]:
    return {"S3DataSource": {"S3Uri": uri, "S3DataType": "S3Prefix", "CompressionType": "None"}}


def create_model_request(**overrides: Any) -> dict[str, Any]:
    """A valid CreateModel body: base weights on S3 plus an existing EAGLE head (eagle_model)."""
    body: dict[str, Any] = {
        "ModelName": unique_model_name(),
        "ExecutionRoleArn": FACTORY_ROLE_ARN,
        "PrimaryContainer": {
            "Image": "763104351884.dkr.ecr.us-west-2.amazonaws.com/djl-inference:0.33.0-lmi15.0.0-cu128",
            "ModelDataSource": s3_prefix_source("s3://models/llama/"),
            "AdditionalModelDataSources": [
                {"ChannelName": "eagle_model", **s3_prefix_source("s3://models/llama-eagle3/")}
            ],
            "Environment": {"OPTION_TENSOR_PARALLEL_DEGREE": "1"},
        },
    }
    body.update(overrides)
    return body


def create_sagemaker_model(
    session: Session, *, account_id: int, aws_account_id: str, **overrides: Any
) -> SageMakerModel:
    """A model row as CreateModel stores it; keyword overrides replace column values."""
    return insert_named_row(
        session,
        insert_sagemaker_model,
        arn_for=sagemaker_model_arn,
        account_id=account_id,
        aws_account_id=aws_account_id,
        default_name=unique_model_name(),
        defaults={"primary_container": create_model_request()["PrimaryContainer"]},
        overrides=overrides,
    )
