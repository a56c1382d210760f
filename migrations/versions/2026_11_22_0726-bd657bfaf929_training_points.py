"""Training points: each job's loss and per-position draft accuracy by step, for the dashboard.

Revision ID: bd657bfaf929
Revises: b9063cb439cf
Create Date: 2026-11-22 07:26:34.469849+00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

import db.types

revision: str = "bd657bfaf929"
down_revision: str | None = "b9063cb439cf"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "training_points",
        sa.Column("job_id", sa.Integer(), nullable=False),
        sa.Column("recorded_at", db.types.UtcDateTime(timezone=True), nullable=False),
        sa.Column("step", sa.Integer(), nullable=False),
        sa.Column("total_steps", sa.Integer(), nullable=False),
        sa.Column("elapsed_seconds", sa.Float(), nullable=False),
        sa.Column("loss", sa.Float(), nullable=True),
        sa.Column(
            "step_accuracy",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.Column("id", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["job_id"],
            ["optimization_jobs.id"],
            name=op.f("fk_training_points_job_id_optimization_jobs"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_training_points")),
    )
    op.create_index("ix_training_points_job_id_step", "training_points", ["job_id", "step"], unique=False)


def downgrade() -> None:
    op.drop_index("ix_training_points_job_id_step", table_name="training_points")
    op.drop_table("training_points")
