"""CloudWatch Logs: log groups (per account and region), streams and events (issue 32).

Revision ID: 8d2f3b0c5e21
Revises: 7c1e2a9b4d10
Create Date: 2026-11-27 09:45:00.000000+00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import db.types

revision: str = "8d2f3b0c5e21"
down_revision: str | None = "7c1e2a9b4d10"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "log_groups",
        sa.Column("account_id", sa.Integer(), nullable=False),
        sa.Column("region", sa.String(length=32), nullable=False),
        sa.Column("name", sa.String(length=512), nullable=False),
        sa.Column("retention_in_days", sa.Integer(), nullable=False),
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("created_at", db.types.UtcDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["account_id"],
            ["accounts.id"],
            name=op.f("fk_log_groups_account_id_accounts"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_log_groups")),
        sa.UniqueConstraint(
            "account_id", "region", "name", name=op.f("uq_log_groups_account_id_region_name")
        ),
    )
    op.create_index(op.f("ix_log_groups_account_id"), "log_groups", ["account_id"], unique=False)
    op.create_table(
        "log_streams",
        sa.Column("log_group_id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=512), nullable=False),
        sa.Column("first_event_timestamp", sa.BigInteger(), nullable=True),
        sa.Column("last_event_timestamp", sa.BigInteger(), nullable=True),
        sa.Column("last_ingestion_time", sa.BigInteger(), nullable=True),
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("created_at", db.types.UtcDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["log_group_id"],
            ["log_groups.id"],
            name=op.f("fk_log_streams_log_group_id_log_groups"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_log_streams")),
        sa.UniqueConstraint("log_group_id", "name", name=op.f("uq_log_streams_log_group_id_name")),
    )
    op.create_table(
        "log_events",
        sa.Column(
            "id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), autoincrement=True, nullable=False
        ),
        sa.Column("log_stream_id", sa.Integer(), nullable=False),
        sa.Column("log_group_id", sa.Integer(), nullable=False),
        sa.Column("timestamp", sa.BigInteger(), nullable=False),
        sa.Column("ingestion_time", sa.BigInteger(), nullable=False),
        sa.Column("message", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(
            ["log_group_id"],
            ["log_groups.id"],
            name=op.f("fk_log_events_log_group_id_log_groups"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["log_stream_id"],
            ["log_streams.id"],
            name=op.f("fk_log_events_log_stream_id_log_streams"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_log_events")),
    )
    op.create_index(
        "ix_log_events_group_time", "log_events", ["log_group_id", "timestamp", "id"], unique=False
    )
    op.create_index(
        "ix_log_events_stream_time", "log_events", ["log_stream_id", "timestamp", "id"], unique=False
    )


def downgrade() -> None:
    op.drop_index("ix_log_events_stream_time", table_name="log_events")
    op.drop_index("ix_log_events_group_time", table_name="log_events")
    op.drop_table("log_events")
    op.drop_table("log_streams")
    op.drop_index(op.f("ix_log_groups_account_id"), table_name="log_groups")
    op.drop_table("log_groups")
