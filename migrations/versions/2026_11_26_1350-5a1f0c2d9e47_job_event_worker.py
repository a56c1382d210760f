"""Job events name the worker process that recorded them (hostname, pid, device; issue 17).

Revision ID: 5a1f0c2d9e47
Revises: 965f65633009
Create Date: 2026-11-26 13:50:00.000000+00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "5a1f0c2d9e47"
down_revision: str | None = "965f65633009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column(
        "job_events",
        sa.Column(
            "worker",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=True,
        ),
    )


def downgrade() -> None:
    op.drop_column("job_events", "worker")
