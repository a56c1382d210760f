from __future__ import annotations

import time

import pytest

from cli.main import main
from db.settings import Settings, get_settings
from stack.ports import free_port
from stack.wait_for_services import ServiceUnavailableError, wait_for_services


def test_returns_once_database_and_broker_answer(database_url: str) -> None:
    started = time.monotonic()
    wait_for_services(
        Settings(database_url=database_url, broker_url="redis://127.0.0.1:6379/15"), timeout_seconds=10
    )
    assert time.monotonic() - started < 10


def test_a_database_that_never_answers_fails_naming_it() -> None:
    url = f"postgresql+psycopg://postgres@127.0.0.1:{free_port()}/nothing"
    with pytest.raises(ServiceUnavailableError, match=r"^database did not accept connections within 1 s"):
        wait_for_services(Settings(database_url=url), timeout_seconds=1)


def test_a_broker_that_never_answers_fails_naming_it(database_url: str) -> None:
    settings = Settings(database_url=database_url, broker_url=f"redis://127.0.0.1:{free_port()}/0")
    with pytest.raises(ServiceUnavailableError, match=r"^broker did not accept connections within 1 s"):
        wait_for_services(settings, timeout_seconds=1)


def test_the_command_exits_non_zero_with_the_reason(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("EAGLENEST_DATABASE_URL", f"postgresql+psycopg://postgres@127.0.0.1:{free_port()}/x")
    get_settings.cache_clear()
    try:
        assert main(["wait-for-services", "--timeout", "1"]) == 1
    finally:
        monkeypatch.undo()
        get_settings.cache_clear()
    assert "database did not accept connections" in capsys.readouterr().err
