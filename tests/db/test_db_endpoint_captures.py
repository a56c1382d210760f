"""Storing captured lines is idempotent: the api's spool may replay lines the database holds."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from db.models.endpoint_capture import EndpointCapture
from db.queries.endpoint import create_endpoint, delete_endpoint_row
from db.queries.endpoint_capture import CaptureRow, add_endpoint_captures
from db.session import create_db_engine, create_session_factory
from migrations.runner import upgrade_to_head
from tests.factories.accounts import create_account
from tests.factories.rows import DEFAULT_REGION


@pytest.fixture(params=["postgresql", "sqlite"])
def session(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Session]:
    """Both backends: the insert that skips stored event ids is written per dialect."""
    if request.param == "postgresql":
        yield request.getfixturevalue("db_session")
        return
    url = f"sqlite:///{tmp_path / 'captures.db'}"
    upgrade_to_head(url)
    engine = create_db_engine(url)
    with create_session_factory(engine)() as sqlite_session:
        yield sqlite_session
    engine.dispose()


def test_a_replayed_line_is_stored_once_and_a_deleted_endpoint_takes_none(session: Session) -> None:
    db_session = session
    owner = create_account(db_session)
    endpoints = [
        create_endpoint(
            db_session,
            account_id=owner.account_id,
            name=name,
            region=DEFAULT_REGION,
            arn=f"arn:aws:sagemaker:{DEFAULT_REGION}:{owner.aws_account_id}:endpoint/{name}",
            config_name="c",
            config_spec={},
            deployment_config=None,
        )
        for name in ("kept", "gone")
    ]
    db_session.flush()
    kept, gone = (endpoint.id for endpoint in endpoints)
    first = [CaptureRow(kept, "e-1", "one"), CaptureRow(kept, "e-2", "two")]
    add_endpoint_captures(db_session, captures=first)
    delete_endpoint_row(db_session, endpoint=endpoints[1])
    # The same records again (a replay), one new, one of the deleted endpoint, one twice in a batch.
    replay = [*first, CaptureRow(kept, "e-3", "three"), CaptureRow(gone, "e-4", "x"), first[0]]
    add_endpoint_captures(db_session, captures=replay)
    stored = db_session.execute(
        # Only this test's endpoints: other tests' live apis commit captures to the same database.
        select(EndpointCapture.event_id, EndpointCapture.line)
        .where(EndpointCapture.endpoint_id.in_([kept, gone]))
        .order_by(EndpointCapture.id)
    )
    assert [tuple(row) for row in stored] == [("e-1", "one"), ("e-2", "two"), ("e-3", "three")]
