"""Settings: environment variables, and the production safety checks."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from db.settings import DEVELOPMENT_SECRET_KEY, Settings


def test_reads_prefixed_environment_and_ignores_empty(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EAGLENEST_API_PORT", "9123")
    monkeypatch.setenv("EAGLENEST_DEFAULT_REGION", "")
    settings = Settings()
    assert settings.api_port == 9123
    assert settings.default_region == "us-east-1", "an empty variable keeps the default"
    assert settings.database_url.startswith("postgresql+psycopg://")
    assert not settings.is_sqlite
    assert Settings(database_url="sqlite:///x.db").is_sqlite


def test_production_needs_a_private_secret_key() -> None:
    with pytest.raises(ValidationError, match="EAGLENEST_SECRET_KEY must be set"):
        Settings(environment="production")
    assert Settings(environment="production", secret_key="a-real-secret").secret_key.get_secret_value()


def test_production_refuses_to_seed_the_dev_key_unless_allowed() -> None:
    with pytest.raises(ValidationError, match="EAGLENEST_ALLOW_DEV_KEY"):
        Settings(environment="production", secret_key="s3cr3t", seed_dev_key=True)
    allowed = Settings(environment="production", secret_key="s3cr3t", seed_dev_key=True, allow_dev_key=True)
    assert allowed.seed_dev_key
    assert Settings(seed_dev_key=True).secret_key.get_secret_value() == DEVELOPMENT_SECRET_KEY


def test_served_host_names(monkeypatch: pytest.MonkeyPatch) -> None:
    assert Settings().served_hostnames == ["localhost", "127.0.0.1", "::1"]
    monkeypatch.setenv("EAGLENEST_API_HOSTNAMES", " api.example.com, ,10.0.0.7 ")
    assert Settings().api_hostnames == ["api.example.com", "10.0.0.7"]
    # The one address the api binds is served too; a wildcard address names no host.
    assert Settings(api_host="10.0.0.9").served_hostnames == ["api.example.com", "10.0.0.7", "10.0.0.9"]
    assert Settings(api_host="0.0.0.0").served_hostnames == ["api.example.com", "10.0.0.7"]
