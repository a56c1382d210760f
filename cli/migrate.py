"""`eaglenest migrate`: bring the database schema to the newest migration (alembic upgrade head)."""

from __future__ import annotations

import argparse
from typing import Any

from db.settings import get_settings
from migrations.runner import upgrade_to_head


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("migrate", help="apply database migrations (alembic upgrade head)")
    parser.add_argument(
        "--database-url", help="database to migrate (default: EAGLENEST_DATABASE_URL or the built-in default)"
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    url = args.database_url or get_settings().database_url
    upgrade_to_head(url)
    print("database is at the newest migration")
    return 0
