"""Repository functions for SageMaker models (CreateModel and friends)."""

from __future__ import annotations

from typing import Any, cast

from sqlalchemy import CursorResult, delete, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from db.errors import NameAlreadyExistsError
from db.models.sagemaker_model import SageMakerModel
from db.queries.listing import ANY_TIME, NamedTable, Page, PageRequest, TimeRange, list_named_rows
from db.types import utc_now

_TABLE = NamedTable(
    what="models",
    id_column=SageMakerModel.id,
    name_key=SageMakerModel.name_key,
    created_at=SageMakerModel.created_at,
)


def get_sagemaker_model_by_name(
    session: Session, *, account_id: int, region: str, name: str
) -> SageMakerModel | None:
    return session.scalar(
        select(SageMakerModel).where(
            SageMakerModel.account_id == account_id,
            SageMakerModel.region == region,
            SageMakerModel.name_key == name.lower(),
        )
    )


def create_sagemaker_model(
    session: Session,
    *,
    account_id: int,
    name: str,
    region: str,
    arn: str,
    primary_container: dict[str, Any] | None = None,
    containers: list[dict[str, Any]] | None = None,
    inference_execution_config: dict[str, Any] | None = None,
    execution_role_arn: str | None = None,
    vpc_config: dict[str, Any] | None = None,
    enable_network_isolation: bool | None = None,
) -> SageMakerModel:
    """Insert a model; raises NameAlreadyExistsError when the account has that name in the region."""
    if get_sagemaker_model_by_name(session, account_id=account_id, region=region, name=name) is not None:
        raise NameAlreadyExistsError(name)
    now = utc_now()
    model = SageMakerModel(
        account_id=account_id,
        name=name,
        name_key=name.lower(),
        region=region,
        arn=arn,
        primary_container=primary_container,
        containers=containers,
        inference_execution_config=inference_execution_config,
        execution_role_arn=execution_role_arn,
        vpc_config=vpc_config,
        enable_network_isolation=enable_network_isolation,
        created_at=now,
        last_modified_at=now,
    )
    try:
        with session.begin_nested():
            session.add(model)
    except IntegrityError as error:  # a concurrent CreateModel with the same name won the race
        raise NameAlreadyExistsError(name) from error
    return model


def delete_sagemaker_model(session: Session, *, model: SageMakerModel) -> bool:
    """One DELETE ... WHERE; returns whether it deleted the row (of parallel deletes, exactly one)."""
    session.flush()
    result = cast(
        CursorResult[Any],
        session.execute(
            delete(SageMakerModel)
            .where(SageMakerModel.id == model.id)
            .execution_options(synchronize_session=False)
        ),
    )
    if result.rowcount != 1:
        return False
    if model in session:
        session.expunge(model)  # its row is gone: a later flush must not write it back
    return True


def list_sagemaker_models(
    session: Session,
    *,
    account_id: int,
    region: str,
    page: PageRequest,
    name_contains: str | None = None,
    created: TimeRange = ANY_TIME,
) -> Page[SageMakerModel]:
    """One page of the account's models in the region, filtered and sorted as ListModels asks."""
    statement = select(SageMakerModel).where(
        SageMakerModel.account_id == account_id, SageMakerModel.region == region
    )
    return list_named_rows(
        session, statement, table=_TABLE, page=page, name_contains=name_contains, created=created
    )
