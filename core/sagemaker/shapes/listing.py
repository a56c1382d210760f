"""The members List* inputs share: SageMaker pages, sorts and filters its lists alike."""

from __future__ import annotations

from core.sagemaker.shapes.base import AwsRequest, AwsTimestamp


class ListByNameInput(AwsRequest):
    """Paging, sorting, and the name and creation-time filters every List* operation takes."""

    sort_by: str | None = None
    sort_order: str | None = None
    next_token: str | None = None
    max_results: int | None = None
    name_contains: str | None = None
    creation_time_before: AwsTimestamp | None = None
    creation_time_after: AwsTimestamp | None = None


class ListByStatusInput(ListByNameInput):
    """The lists of resources that change state also filter by status and last modification."""

    last_modified_time_before: AwsTimestamp | None = None
    last_modified_time_after: AwsTimestamp | None = None
    status_equals: str | None = None
