"""AWS handlers for AddTags, ListTags and DeleteTags (models and optimization jobs, by ARN)."""

from __future__ import annotations

from api.operations.registry import OperationContext, aws_operation
from core.sagemaker.shapes.common import Tag
from core.sagemaker.shapes.tags import (
    AddTagsInput,
    AddTagsOutput,
    DeleteTagsInput,
    DeleteTagsOutput,
    ListTagsInput,
    ListTagsOutput,
)
from core.services import tags as service


@aws_operation("AddTags", AddTagsInput)
def add_tags(context: OperationContext, request: AddTagsInput) -> AddTagsOutput:
    added = service.add_tags(context.session, principal=context.principal, request=request)
    return AddTagsOutput(tags=added)


@aws_operation("ListTags", ListTagsInput, read_only=True)
def list_tags(context: OperationContext, request: ListTagsInput) -> ListTagsOutput:
    page = service.list_tags(context.session, principal=context.principal, request=request)
    return ListTagsOutput(
        tags=[Tag(key=tag.key, value=tag.value) for tag in page.tags], next_token=page.next_token
    )


@aws_operation("DeleteTags", DeleteTagsInput)
def delete_tags(context: OperationContext, request: DeleteTagsInput) -> DeleteTagsOutput:
    service.delete_tags(context.session, principal=context.principal, request=request)
    return DeleteTagsOutput()
