"""SageMakerModel rows as DescribeModel / ListModels shapes."""

from __future__ import annotations

from core.sagemaker.shapes.common import Tag, VpcConfig
from core.sagemaker.shapes.sagemaker_models import (
    ContainerDefinition,
    DescribeModelOutput,
    InferenceExecutionConfig,
    ModelDetail,
    ModelSummary,
)
from db.models.resource_tag import ResourceTag
from db.models.sagemaker_model import SageMakerModel


def describe_sagemaker_model(model: SageMakerModel) -> DescribeModelOutput:
    return DescribeModelOutput(
        model_name=model.name,
        primary_container=None
        if model.primary_container is None
        else ContainerDefinition.model_validate(model.primary_container),
        containers=None
        if model.containers is None
        else [ContainerDefinition.model_validate(container) for container in model.containers],
        inference_execution_config=None
        if model.inference_execution_config is None
        else InferenceExecutionConfig.model_validate(model.inference_execution_config),
        execution_role_arn=model.execution_role_arn,
        vpc_config=None if model.vpc_config is None else VpcConfig.model_validate(model.vpc_config),
        creation_time=model.created_at,
        model_arn=model.arn,
        enable_network_isolation=model.enable_network_isolation,
    )


def sagemaker_model_detail(model: SageMakerModel, tags: list[ResourceTag]) -> ModelDetail:
    return ModelDetail(
        **dict(describe_sagemaker_model(model)),
        tags=[Tag(key=tag.key, value=tag.value) for tag in tags],
    )


def summarize_sagemaker_model(model: SageMakerModel) -> ModelSummary:
    return ModelSummary(model_name=model.name, model_arn=model.arn, creation_time=model.created_at)
