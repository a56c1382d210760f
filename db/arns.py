"""ARNs the way SageMaker writes them: resource names lower-cased."""

from __future__ import annotations


def sagemaker_arn(*, region: str, aws_account_id: str, resource_type: str, name: str) -> str:
    return f"arn:aws:sagemaker:{region}:{aws_account_id}:{resource_type}/{name.lower()}"


def optimization_job_arn(*, region: str, aws_account_id: str, name: str) -> str:
    return sagemaker_arn(
        region=region, aws_account_id=aws_account_id, resource_type="optimization-job", name=name
    )


def sagemaker_model_arn(*, region: str, aws_account_id: str, name: str) -> str:
    return sagemaker_arn(region=region, aws_account_id=aws_account_id, resource_type="model", name=name)
