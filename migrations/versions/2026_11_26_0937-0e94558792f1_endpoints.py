"""Endpoint configurations, endpoints and their serving instances (issue 20).

Revision ID: 0e94558792f1
Revises: d4e8a1b2c3f5
Create Date: 2026-11-26 09:37:42.931961+00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

import db.types

revision: str = "0e94558792f1"
down_revision: str | None = "d4e8a1b2c3f5"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "endpoint_configs",
        sa.Column("account_id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=63), nullable=False),
        sa.Column("name_key", sa.String(length=63), nullable=False),
        sa.Column("region", sa.String(length=32), nullable=False),
        sa.Column("arn", sa.String(length=2048), nullable=False),
        sa.Column(
            "spec",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("created_at", db.types.UtcDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["account_id"],
            ["accounts.id"],
            name=op.f("fk_endpoint_configs_account_id_accounts"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_endpoint_configs")),
        sa.UniqueConstraint("account_id", "name_key", name=op.f("uq_endpoint_configs_account_id_name_key")),
    )
    op.create_index(op.f("ix_endpoint_configs_account_id"), "endpoint_configs", ["account_id"], unique=False)
    op.create_table(
        "endpoints",
        sa.Column("account_id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=63), nullable=False),
        sa.Column("name_key", sa.String(length=63), nullable=False),
        sa.Column("region", sa.String(length=32), nullable=False),
        sa.Column("arn", sa.String(length=2048), nullable=False),
        sa.Column(
            "status",
            sa.Enum(
                "OutOfService",
                "Creating",
                "Updating",
                "SystemUpdating",
                "RollingBack",
                "InService",
                "Deleting",
                "Failed",
                "UpdateRollbackFailed",
                name="endpoint_status",
                native_enum=False,
                create_constraint=True,
                length=32,
            ),
            nullable=False,
        ),
        sa.Column("failure_reason", sa.Text(), nullable=True),
        sa.Column("config_name", sa.String(length=63), nullable=False),
        sa.Column(
            "config_spec",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.Column("pending_config_name", sa.String(length=63), nullable=True),
        sa.Column(
            "pending_config_spec",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=True,
        ),
        sa.Column("pending_since", db.types.UtcDateTime(timezone=True), nullable=True),
        sa.Column(
            "deployment_config",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=True,
        ),
        sa.Column("generation", sa.Integer(), nullable=False),
        sa.Column("task_id", sa.String(length=255), nullable=True),
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("last_modified_at", db.types.UtcDateTime(timezone=True), nullable=False),
        sa.Column("created_at", db.types.UtcDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["account_id"], ["accounts.id"], name=op.f("fk_endpoints_account_id_accounts"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_endpoints")),
        sa.UniqueConstraint("account_id", "name_key", name=op.f("uq_endpoints_account_id_name_key")),
    )
    op.create_index(op.f("ix_endpoints_account_id"), "endpoints", ["account_id"], unique=False)
    op.create_table(
        "endpoint_instances",
        sa.Column("endpoint_id", sa.Integer(), nullable=False),
        sa.Column("generation", sa.Integer(), nullable=False),
        sa.Column("variant_name", sa.String(length=63), nullable=False),
        sa.Column("ordinal", sa.Integer(), nullable=False),
        sa.Column("url", sa.String(length=255), nullable=True),
        sa.Column("status", sa.String(length=32), nullable=False),
        sa.Column("message", sa.Text(), nullable=True),
        sa.Column("restarts", sa.Integer(), nullable=False),
        sa.Column("updated_at", db.types.UtcDateTime(timezone=True), nullable=False),
        sa.Column("id", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["endpoint_id"],
            ["endpoints.id"],
            name=op.f("fk_endpoint_instances_endpoint_id_endpoints"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_endpoint_instances")),
        sa.UniqueConstraint(
            "endpoint_id",
            "generation",
            "ordinal",
            name=op.f("uq_endpoint_instances_endpoint_id_generation_ordinal"),
        ),
    )
    op.create_index(
        op.f("ix_endpoint_instances_endpoint_id"), "endpoint_instances", ["endpoint_id"], unique=False
    )


def downgrade() -> None:
    op.drop_index(op.f("ix_endpoint_instances_endpoint_id"), table_name="endpoint_instances")
    op.drop_table("endpoint_instances")
    op.drop_index(op.f("ix_endpoints_account_id"), table_name="endpoints")
    op.drop_table("endpoints")
    op.drop_index(op.f("ix_endpoint_configs_account_id"), table_name="endpoint_configs")
    op.drop_table("endpoint_configs")
