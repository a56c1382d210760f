"""Shapes of AddTags, ListTags and DeleteTags (any taggable resource, addressed by ARN)."""

from __future__ import annotations

from typing import ClassVar

from core.sagemaker.shapes.base import AwsRequest, AwsShape
from core.sagemaker.shapes.common import Tag


class AddTagsInput(AwsRequest):
    aws_shape: ClassVar[str] = "AddTagsInput"

    resource_arn: str
    tags: list[Tag]


class AddTagsOutput(AwsShape):
    tags: list[Tag] | None = None


class ListTagsInput(AwsRequest):
    aws_shape: ClassVar[str] = "ListTagsInput"

    resource_arn: str
    next_token: str | None = None
    max_results: int | None = None


class ListTagsOutput(AwsShape):
    tags: list[Tag] | None = None
    next_token: str | None = None


class DeleteTagsInput(AwsRequest):
    aws_shape: ClassVar[str] = "DeleteTagsInput"

    resource_arn: str
    tag_keys: list[str]


class DeleteTagsOutput(AwsShape):
    pass
