"""Engines, session factories and the unit-of-work context manager."""

from __future__ import annotations

from collections.abc import Callable, Iterator
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


AfterCommit = Callable[[Session], None]
"""Follow-up work for once a unit of work has committed (see ``UnitOfWork.after_commit``)."""


class UnitOfWork:
    """A session, and the work that may only run once its transaction has committed.

    Services write through ``session`` and never commit: the boundary that opened the unit
    (an api request, a worker step, a CLI command) commits it, with ``commit`` or by leaving
    ``unit_of_work``'s block. So a service called inside a larger unit - CreateModel inside
    the worker's publish step - can neither commit its caller's half-done work nor be
    committed without it.

    Some work must wait for the commit: a job is queued only once its row is committed,
    because a worker may pick it up at once; a stop is sent only once STOPPING is. A service
    registers such work with ``after_commit`` and the boundary runs it after a successful
    commit, never after a failed one or a rollback. This is a typed list on the unit, not
    SQLAlchemy's ``after_commit`` session event, because the follow-up writes to the
    database (the task id, or FAILED when the job cannot be queued), which an event handler
    must not do inside the commit, and because passing the unit shows in a service's
    signature that it leaves work for its caller's commit.
    """

    def __init__(self, session: Session) -> None:
        self.session = session
        self._after_commit: list[AfterCommit] = []

    def after_commit(self, action: AfterCommit) -> None:
        """Run ``action(session)`` once this unit has committed; its writes are committed after it.

        The action runs outside the committed transaction, so it must handle its own
        failures: an exception it raises rolls back only its own writes and reaches the
        boundary (an api request answers 500).
        """
        self._after_commit.append(action)

    def commit(self) -> None:
        """Commit, then run the after-commit actions in order, committing each one's writes."""
        actions, self._after_commit = self._after_commit, []
        self.session.commit()  # if this raises, no action runs
        for action in actions:
            action(self.session)
            self.session.commit()

    def rollback(self) -> None:
        """Roll back, and drop the after-commit actions: what they follow up never happened."""
        self._after_commit.clear()
        self.session.rollback()


@contextmanager
def unit_of_work(factory: sessionmaker[Session] | None = None) -> Iterator[UnitOfWork]:
    """One unit of work: commits (then runs its after-commit actions) when the block succeeds,
    rolls back when it raises."""
    unit = UnitOfWork((factory or get_session_factory())())
    try:
        yield unit
        unit.commit()
    except BaseException:
        unit.rollback()
        raise
    finally:
        unit.session.close()


@contextmanager
def session_scope(factory: sessionmaker[Session] | None = None) -> Iterator[Session]:
    """``unit_of_work`` for code that only needs the session: commits when the block succeeds,
    rolls back when it raises."""
    with unit_of_work(factory) as unit:
        yield unit.session
