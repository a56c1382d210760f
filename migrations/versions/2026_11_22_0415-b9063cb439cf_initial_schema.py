"""Initial schema: accounts, access keys, SageMaker models, optimization jobs, job events, tags.

Revision ID: b9063cb439cf
Revises:
Create Date: 2026-11-22 04:15:16.459554+00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

import db.types

revision: str = "b9063cb439cf"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "accounts",
        sa.Column("aws_account_id", sa.String(length=12), nullable=False),
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("created_at", db.types.UtcDateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_accounts")),
        sa.UniqueConstraint("aws_account_id", name=op.f("uq_accounts_aws_account_id")),
    )
    op.create_table(
        "access_keys",
        sa.Column("access_key_id", sa.String(length=128), nullable=False),
        sa.Column("secret_ciphertext", sa.Text(), nullable=False),
        sa.Column("description", sa.String(length=256), nullable=True),
        sa.Column("account_id", sa.Integer(), nullable=False),
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("created_at", db.types.UtcDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["account_id"],
            ["accounts.id"],
            name=op.f("fk_access_keys_account_id_accounts"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_access_keys")),
        sa.UniqueConstraint("access_key_id", name=op.f("uq_access_keys_access_key_id")),
    )
    op.create_index(op.f("ix_access_keys_account_id"), "access_keys", ["account_id"], unique=False)
    op.create_table(
        "optimization_jobs",
        sa.Column("account_id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=63), nullable=False),
        sa.Column("name_key", sa.String(length=63), nullable=False),
        sa.Column("region", sa.String(length=32), nullable=False),
        sa.Column("arn", sa.String(length=256), nullable=False),
        sa.Column("role_arn", sa.String(length=2048), nullable=False),
        sa.Column(
            "model_source",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.Column("deployment_instance_type", sa.String(length=64), nullable=False),
        sa.Column("max_instance_count", sa.Integer(), nullable=True),
        sa.Column(
            "optimization_environment",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=True,
        ),
        sa.Column(
            "optimization_configs",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.Column(
            "output_config",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.Column(
            "stopping_condition",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.Column(
            "vpc_config",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=True,
        ),
        sa.Column(
            "training_plan_arns",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=True,
        ),
        sa.Column("optimization_types", sa.String(length=256), nullable=False),
        sa.Column(
            "source_model_container",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=True,
        ),
        sa.Column(
            "status",
            sa.Enum(
                "INPROGRESS",
                "COMPLETED",
                "FAILED",
                "STARTING",
                "STOPPING",
                "STOPPED",
                name="optimization_job_status",
                native_enum=False,
                create_constraint=True,
                length=16,
            ),
            nullable=False,
        ),
        sa.Column("stage", sa.String(length=64), nullable=True),
        sa.Column("progress_percent", sa.Float(), nullable=True),
        sa.Column("estimated_completion_at", db.types.UtcDateTime(timezone=True), nullable=True),
        sa.Column("progress_updated_at", db.types.UtcDateTime(timezone=True), nullable=True),
        sa.Column("last_message", sa.Text(), nullable=True),
        sa.Column("failure_reason", sa.Text(), nullable=True),
        sa.Column(
            "optimization_output",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=True,
        ),
        sa.Column("celery_task_id", sa.String(length=255), nullable=True),
        sa.Column("started_at", db.types.UtcDateTime(timezone=True), nullable=True),
        sa.Column("ended_at", db.types.UtcDateTime(timezone=True), nullable=True),
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("last_modified_at", db.types.UtcDateTime(timezone=True), nullable=False),
        sa.Column("created_at", db.types.UtcDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["account_id"],
            ["accounts.id"],
            name=op.f("fk_optimization_jobs_account_id_accounts"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_optimization_jobs")),
        sa.UniqueConstraint("account_id", "name_key", name=op.f("uq_optimization_jobs_account_id_name_key")),
    )
    op.create_index(
        "ix_optimization_jobs_account_id_created_at",
        "optimization_jobs",
        ["account_id", "created_at"],
        unique=False,
    )
    op.create_index(
        "ix_optimization_jobs_account_id_status", "optimization_jobs", ["account_id", "status"], unique=False
    )
    op.create_table(
        "resource_tags",
        sa.Column("account_id", sa.Integer(), nullable=False),
        sa.Column("resource_arn", sa.String(length=2048), nullable=False),
        sa.Column("key", sa.String(length=128), nullable=False),
        sa.Column("value", sa.String(length=256), nullable=False),
        sa.Column("id", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["account_id"],
            ["accounts.id"],
            name=op.f("fk_resource_tags_account_id_accounts"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_resource_tags")),
        sa.UniqueConstraint("resource_arn", "key", name=op.f("uq_resource_tags_resource_arn_key")),
    )
    op.create_index(op.f("ix_resource_tags_account_id"), "resource_tags", ["account_id"], unique=False)
    op.create_table(
        "sagemaker_models",
        sa.Column("account_id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=63), nullable=False),
        sa.Column("name_key", sa.String(length=63), nullable=False),
        sa.Column("region", sa.String(length=32), nullable=False),
        sa.Column("arn", sa.String(length=2048), nullable=False),
        sa.Column(
            "primary_container",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=True,
        ),
        sa.Column(
            "containers",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=True,
        ),
        sa.Column(
            "inference_execution_config",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=True,
        ),
        sa.Column("execution_role_arn", sa.String(length=2048), nullable=True),
        sa.Column(
            "vpc_config",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=True,
        ),
        sa.Column("enable_network_isolation", sa.Boolean(), nullable=True),
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("last_modified_at", db.types.UtcDateTime(timezone=True), nullable=False),
        sa.Column("created_at", db.types.UtcDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["account_id"],
            ["accounts.id"],
            name=op.f("fk_sagemaker_models_account_id_accounts"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_sagemaker_models")),
        sa.UniqueConstraint("account_id", "name_key", name=op.f("uq_sagemaker_models_account_id_name_key")),
    )
    op.create_index(op.f("ix_sagemaker_models_account_id"), "sagemaker_models", ["account_id"], unique=False)
    op.create_table(
        "job_events",
        sa.Column("job_id", sa.Integer(), nullable=False),
        sa.Column("occurred_at", db.types.UtcDateTime(timezone=True), nullable=False),
        sa.Column(
            "status",
            sa.Enum(
                "INPROGRESS",
                "COMPLETED",
                "FAILED",
                "STARTING",
                "STOPPING",
                "STOPPED",
                name="optimization_job_status",
                native_enum=False,
                create_constraint=True,
                length=16,
            ),
            nullable=False,
        ),
        sa.Column("stage", sa.String(length=64), nullable=True),
        sa.Column("message", sa.Text(), nullable=False),
        sa.Column("id", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["job_id"],
            ["optimization_jobs.id"],
            name=op.f("fk_job_events_job_id_optimization_jobs"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_job_events")),
    )
    op.create_index("ix_job_events_job_id_occurred_at", "job_events", ["job_id", "occurred_at"], unique=False)


def downgrade() -> None:
    op.drop_index("ix_job_events_job_id_occurred_at", table_name="job_events")
    op.drop_table("job_events")
    op.drop_index(op.f("ix_sagemaker_models_account_id"), table_name="sagemaker_models")
    op.drop_table("sagemaker_models")
    op.drop_index(op.f("ix_resource_tags_account_id"), table_name="resource_tags")
    op.drop_table("resource_tags")
    op.drop_index("ix_optimization_jobs_account_id_status", table_name="optimization_jobs")
    op.drop_index("ix_optimization_jobs_account_id_created_at", table_name="optimization_jobs")
    op.drop_table("optimization_jobs")
    op.drop_index(op.f("ix_access_keys_account_id"), table_name="access_keys")
    op.drop_table("access_keys")
    op.drop_table("accounts")
