"""Endpoints keep their supervisor's heartbeat, so a lost supervisor is replaced (issue 20).

Revision ID: 965f65633009
Revises: 2c0cd41f8e1d
Create Date: 2026-11-26 10:07:58.101690+00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import db.types

revision: str = "965f65633009"
down_revision: str | None = "2c0cd41f8e1d"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column(
        "endpoints", sa.Column("supervisor_heartbeat_at", db.types.UtcDateTime(timezone=True), nullable=True)
    )


def downgrade() -> None:
    op.drop_column("endpoints", "supervisor_heartbeat_at")
