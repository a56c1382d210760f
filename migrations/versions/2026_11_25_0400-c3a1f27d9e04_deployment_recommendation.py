"""Optimization jobs keep their benchmark's deployment recommendation (the REST face shows it).

Revision ID: c3a1f27d9e04
Revises: bd657bfaf929
Create Date: 2026-11-25 04:00:00+00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "c3a1f27d9e04"
down_revision: str | None = "bd657bfaf929"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column(
        "optimization_jobs",
        sa.Column(
            "deployment_recommendation",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=True,
        ),
    )


def downgrade() -> None:
    with op.batch_alter_table("optimization_jobs") as batch:
        batch.drop_column("deployment_recommendation")
