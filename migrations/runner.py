"""Apply or revert migrations from code: `eaglenest migrate`, the embedded stack and tests."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config

_MIGRATIONS_DIR = Path(__file__).resolve().parent
_ALEMBIC_INI = _MIGRATIONS_DIR.parent / "alembic.ini"


def alembic_config(database_url: str | None = None) -> Config:
    """Alembic's config, usable from any working directory (and without alembic.ini installed)."""
    config = Config(str(_ALEMBIC_INI)) if _ALEMBIC_INI.exists() else Config()
    config.set_main_option("script_location", str(_MIGRATIONS_DIR))
    config.attributes["configure_logging"] = False
    if database_url is not None:
        # ConfigParser treats % as interpolation; URLs may contain %-escapes.
        config.set_main_option("sqlalchemy.url", database_url.replace("%", "%%"))
    return config


def upgrade_to_head(database_url: str | None = None) -> None:
    command.upgrade(alembic_config(database_url), "head")


def downgrade_to_base(database_url: str | None = None) -> None:
    command.downgrade(alembic_config(database_url), "base")
