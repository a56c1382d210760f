"""Engines, session factories and the unit-of-work context manager."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache
from typing import Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.orm import Session, sessionmaker

from db.settings import get_settings


def _enable_sqlite_foreign_keys(dbapi_connection: Any, _record: Any) -> None:
    # SQLite ignores FOREIGN KEY ... ON DELETE CASCADE unless asked on every connection.
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA busy_timeout=30000")
    cursor.close()


def create_db_engine(
    database_url: str, *, pool_size: int = 10, max_overflow: int = 20, pre_ping: bool = True
) -> Engine:
    """An engine for Postgres (psycopg 3) or SQLite, configured the same way everywhere.

    ``pre_ping`` tests each pooled connection with a round trip before use. Long-lived,
    rarely-busy processes (the worker) want it; the api turns it off because it costs a
    round trip per request, and after a database restart SQLAlchemy invalidates the whole
    pool on the first failed query anyway (one request fails with a retryable 500).
    """
    if database_url.startswith("sqlite"):
        # The api's thread pool and the worker share one file: allow cross-thread use and
        # let writers wait for the lock rather than fail.
        engine = create_engine(database_url, connect_args={"check_same_thread": False, "timeout": 30})
        event.listen(engine, "connect", _enable_sqlite_foreign_keys)
        return engine
    return create_engine(
        database_url,
        pool_pre_ping=pre_ping,
        pool_recycle=1800,
        pool_size=pool_size,
        max_overflow=max_overflow,
    )


def create_session_factory(engine: Engine) -> sessionmaker[Session]:
    # expire_on_commit=False: handlers shape responses from rows after committing.
    return sessionmaker(bind=engine, expire_on_commit=False)


def create_read_session_factory(engine: Engine) -> sessionmaker[Session]:
    """Sessions whose statements run in autocommit mode, for requests that only read.

    A single SELECT needs no transaction; skipping BEGIN and ROLLBACK saves two of the
    three database round trips a Describe or List request would otherwise make.
    """
    return sessionmaker(bind=engine.execution_options(isolation_level="AUTOCOMMIT"), expire_on_commit=False)


@lru_cache(maxsize=1)
def get_engine() -> Engine:
    """The process-wide engine for ``get_settings().database_url``."""
    return create_db_engine(get_settings().database_url)


@lru_cache(maxsize=1)
def get_session_factory() -> sessionmaker[Session]:
    return create_session_factory(get_engine())


@contextmanager
def session_scope(factory: sessionmaker[Session] | None = None) -> Iterator[Session]:
    """One unit of work: commits when the block succeeds, rolls back when it raises."""
    session = (factory or get_session_factory())()
    try:
        yield session
        session.commit()
    except BaseException:
        session.rollback()
        raise
    finally:
        session.close()
