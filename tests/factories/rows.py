"""The part every row factory shares: an account's named row with its ARN, built through the
repository's own insert function so that tests store rows exactly as the api does."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

from sqlalchemy.orm import Session

RowT = TypeVar("RowT")

DEFAULT_REGION = "us-west-2"


class ArnBuilder(Protocol):
    def __call__(self, *, region: str, aws_account_id: str, name: str) -> str: ...


def insert_named_row(
    session: Session,
    insert: Callable[..., RowT],
    *,
    arn_for: ArnBuilder,
    account_id: int,
    aws_account_id: str,
    default_name: str,
    defaults: dict[str, Any],
    overrides: dict[str, Any],
) -> RowT:
    """Insert with ``defaults`` plus the ``overrides`` that ``insert`` takes, then set the other
    overrides (created_at, status, ...) on the row, so tests can build any state directly.

    ``name`` and ``region`` overrides also decide the row's ARN.
    """
    overrides = dict(overrides)
    name = overrides.pop("name", default_name)
    region = overrides.pop("region", DEFAULT_REGION)
    accepted = set(inspect.signature(insert).parameters)
    fields: dict[str, Any] = {
        "account_id": account_id,
        "name": name,
        "region": region,
        "arn": arn_for(region=region, aws_account_id=aws_account_id, name=name),
        **defaults,
    }
    fields.update({key: value for key, value in overrides.items() if key in accepted})
    row = insert(session, **fields)
    for key, value in overrides.items():
        if key not in accepted:
            setattr(row, key, value)
    session.flush()
    return row
