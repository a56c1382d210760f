"""Alembic is the only way a schema is made: upgrade, no autogenerate diff, downgrade, on both backends."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import inspect

import db.models
from db.session import create_db_engine
from migrations.runner import alembic_config, downgrade_to_base, upgrade_to_head
from tests.fixtures.database import create_postgres_database, drop_postgres_database

TABLES = {
    "accounts",
    "access_keys",
    "roles",
    "sagemaker_models",
    "optimization_jobs",
    "job_events",
    "resource_tags",
}


@pytest.fixture(params=["postgresql", "sqlite"])
def empty_database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'migrations.db'}"
        return
    name, url = create_postgres_database("eaglenest_migrations")
    try:
        yield url
    finally:
        drop_postgres_database(name)


def test_upgrade_matches_models_and_downgrade_removes_everything(empty_database_url: str) -> None:
    engine = create_db_engine(empty_database_url, pool_size=1, max_overflow=0)
    try:
        upgrade_to_head(empty_database_url)
        with engine.connect() as connection:
            assert set(inspect(connection).get_table_names()) >= TABLES
            context = MigrationContext.configure(connection, opts={"compare_type": True})
            assert compare_metadata(context, db.models.Base.metadata) == []
        downgrade_to_base(empty_database_url)
        with engine.connect() as connection:
            assert set(inspect(connection).get_table_names()) <= {"alembic_version"}
    finally:
        engine.dispose()


def test_revisions_form_one_line_with_date_stamped_files() -> None:
    script = ScriptDirectory.from_config(alembic_config())
    assert len(script.get_heads()) == 1
    for revision in script.walk_revisions():
        assert revision.path is not None
        assert Path(revision.path).name[:4].isdigit(), f"{revision.path} is not date-stamped"
