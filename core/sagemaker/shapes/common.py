"""Shapes shared by several resources."""

from __future__ import annotations

from core.sagemaker.shapes.base import AwsShape


class Tag(AwsShape):
    key: str
    value: str


class VpcConfig(AwsShape):
    """Also botocore's OptimizationVpcConfig, which has the same members and constraints."""

    security_group_ids: list[str]
    subnets: list[str]
