"""Captured endpoint invocations waiting to be written to S3 (DataCaptureConfig, issue 20).

Revision ID: 2c0cd41f8e1d
Revises: 0e94558792f1
Create Date: 2026-11-26 09:50:56.040585+00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import db.types

revision: str = "2c0cd41f8e1d"
down_revision: str | None = "0e94558792f1"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "endpoint_captures",
        sa.Column("endpoint_id", sa.Integer(), nullable=False),
        sa.Column("captured_at", db.types.UtcDateTime(timezone=True), nullable=False),
        sa.Column("line", sa.Text(), nullable=False),
        sa.Column("id", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["endpoint_id"],
            ["endpoints.id"],
            name=op.f("fk_endpoint_captures_endpoint_id_endpoints"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_endpoint_captures")),
    )
    op.create_index(
        op.f("ix_endpoint_captures_endpoint_id"), "endpoint_captures", ["endpoint_id"], unique=False
    )


def downgrade() -> None:
    op.drop_index(op.f("ix_endpoint_captures_endpoint_id"), table_name="endpoint_captures")
    op.drop_table("endpoint_captures")
