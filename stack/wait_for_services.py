"""`eaglenest wait-for-services`: block until the database and the broker accept connections.

The prestart step of docker-compose runs it before `eaglenest migrate`; a container
healthcheck says a server is up, this says *we* can connect with our settings.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from kombu import Connection
from sqlalchemy import text

from db.session import create_db_engine
from db.settings import Settings


class ServiceUnavailableError(RuntimeError):
    pass


def database_answers(database_url: str) -> None:
    engine = create_db_engine(database_url, pool_size=1, max_overflow=0)
    try:
        with engine.connect() as connection:
            connection.execute(text("SELECT 1"))
    finally:
        engine.dispose()


def broker_answers(broker_url: str) -> None:
    with Connection(broker_url, connect_timeout=3) as connection:
        connection.ensure_connection(max_retries=1)


def wait_for(
    name: str, probe: Callable[[], None], *, timeout_seconds: float, interval_seconds: float = 1.0
) -> None:
    deadline = time.monotonic() + timeout_seconds
    while True:
        try:
            probe()
            return
        except Exception as error:
            if time.monotonic() >= deadline:
                raise ServiceUnavailableError(
                    f"{name} did not accept connections within {timeout_seconds:.0f} s: {error}"
                ) from error
        time.sleep(interval_seconds)


def wait_for_services(settings: Settings, *, timeout_seconds: float) -> None:
    wait_for("database", lambda: database_answers(settings.database_url), timeout_seconds=timeout_seconds)
    if not settings.broker_url.startswith("filesystem://"):
        wait_for("broker", lambda: broker_answers(settings.broker_url), timeout_seconds=timeout_seconds)
