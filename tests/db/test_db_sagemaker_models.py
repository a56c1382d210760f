"""Repository functions for SageMaker models."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy.orm import Session

from db.errors import NameAlreadyExistsError
from db.queries.listing import PageRequest, SortKey, TimeRange
from db.queries.sagemaker_model import (
    delete_sagemaker_model,
    get_sagemaker_model_by_name,
    list_sagemaker_models,
)
from db.types import utc_now
from tests.factories.accounts import create_account
from tests.factories.rows import DEFAULT_REGION
from tests.factories.sagemaker_models import create_sagemaker_model


def test_create_get_delete(db_session: Session) -> None:
    owner = create_account(db_session)
    model = create_sagemaker_model(
        db_session, account_id=owner.account_id, aws_account_id=owner.aws_account_id, name="Llama-Base"
    )
    assert model.arn.endswith(":model/llama-base")
    found = get_sagemaker_model_by_name(
        db_session, account_id=owner.account_id, region=DEFAULT_REGION, name="LLAMA-BASE"
    )
    assert found is not None
    assert found.primary_container is not None
    assert found.primary_container["AdditionalModelDataSources"][0]["ChannelName"] == "eagle_model"
    with pytest.raises(NameAlreadyExistsError):
        create_sagemaker_model(
            db_session, account_id=owner.account_id, aws_account_id=owner.aws_account_id, name="llama-base"
        )
    delete_sagemaker_model(db_session, model=model)
    assert (
        get_sagemaker_model_by_name(
            db_session, account_id=owner.account_id, region=DEFAULT_REGION, name="llama-base"
        )
        is None
    )


def test_list_is_per_account_filtered_sorted_and_paged(db_session: Session) -> None:
    owner = create_account(db_session)
    stranger = create_account(db_session)
    start = utc_now() - timedelta(minutes=1)
    for index, name in enumerate(["m-b", "m-a", "x-c"]):
        create_sagemaker_model(
            db_session,
            account_id=owner.account_id,
            aws_account_id=owner.aws_account_id,
            name=name,
            created_at=start + timedelta(seconds=index),
        )
    create_sagemaker_model(db_session, account_id=stranger.account_id, aws_account_id=stranger.aws_account_id)

    def names(page: PageRequest, **kwargs: object) -> list[str]:
        result = list_sagemaker_models(
            db_session, account_id=owner.account_id, region=DEFAULT_REGION, page=page, **kwargs
        )  # type: ignore[arg-type]
        return [model.name for model in result.items]

    assert names(PageRequest()) == ["x-c", "m-a", "m-b"]
    assert names(PageRequest(sort_key=SortKey.NAME, descending=False)) == ["m-a", "m-b", "x-c"]
    assert names(PageRequest(), name_contains="M-") == ["m-a", "m-b"]
    inclusive = TimeRange(after=start + timedelta(seconds=1), after_inclusive=True)
    assert names(PageRequest(), created=inclusive) == ["x-c", "m-a"]
    first = list_sagemaker_models(
        db_session, account_id=owner.account_id, region=DEFAULT_REGION, page=PageRequest(limit=2)
    )
    assert [m.name for m in first.items] == ["x-c", "m-a"]
    assert first.next_cursor is not None
    second = list_sagemaker_models(
        db_session,
        account_id=owner.account_id,
        region=DEFAULT_REGION,
        page=PageRequest(limit=2, cursor=first.next_cursor),
    )
    assert [m.name for m in second.items] == ["m-b"]
    assert second.next_cursor is None
    with pytest.raises(ValueError, match="cannot be sorted by Status"):
        list_sagemaker_models(
            db_session,
            account_id=owner.account_id,
            region=DEFAULT_REGION,
            page=PageRequest(sort_key=SortKey.STATUS),
        )
