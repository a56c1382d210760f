"""Roles: per-account S3 identities that a job's RoleArn names (issue 15, part 1).

Revision ID: d4e8a1b2c3f5
Revises: c3a1f27d9e04
Create Date: 2026-11-25 14:40:00+00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import db.types

revision: str = "d4e8a1b2c3f5"
down_revision: str | None = "c3a1f27d9e04"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "roles",
        sa.Column("account_id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=512), nullable=False),
        sa.Column("s3_access_key_id", sa.String(length=128), nullable=False),
        sa.Column("s3_secret_ciphertext", sa.Text(), nullable=False),
        sa.Column("description", sa.String(length=256), nullable=True),
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("created_at", db.types.UtcDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["account_id"], ["accounts.id"], name=op.f("fk_roles_account_id_accounts"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_roles")),
        sa.UniqueConstraint("account_id", "name", name=op.f("uq_roles_account_id_name")),
    )
    op.create_index(op.f("ix_roles_account_id"), "roles", ["account_id"], unique=False)


def downgrade() -> None:
    op.drop_index(op.f("ix_roles_account_id"), table_name="roles")
    op.drop_table("roles")
