"""Names are unique per account *and region*; captured invocations carry an idempotency key (issue 32).

Every SageMaker resource row already records the region its create request was signed for
(its ARN carries it), so no row moves: a model created in us-west-2 stays in us-west-2, and
its ARN, its tags (addressed by ARN) and clients that hold the ARN stay valid. What changes
is uniqueness: the same name may now exist once in each region of an account. Roles stay
account-wide, as IAM is global.

``endpoint_captures.event_id`` is the line's ``eventMetadata.eventId``: the api's capture
spool may replay a line the database already holds (a crash between commit and truncation),
and the unique key turns that replay into a no-op.

Downgrading fails if one account holds the same name in two regions; delete one first.

Revision ID: 7c1e2a9b4d10
Revises: 5a1f0c2d9e47
Create Date: 2026-11-27 09:25:00.000000+00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "7c1e2a9b4d10"
down_revision: str | None = "5a1f0c2d9e47"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

REGIONAL_TABLES = ("sagemaker_models", "optimization_jobs", "endpoint_configs", "endpoints")


def upgrade() -> None:
    for table in REGIONAL_TABLES:
        # Batch mode: SQLite rebuilds the table; Postgres alters it in place.
        with op.batch_alter_table(table) as batch:
            batch.drop_constraint(f"uq_{table}_account_id_name_key", type_="unique")
            batch.create_unique_constraint(
                f"uq_{table}_account_id_region_name_key", ["account_id", "region", "name_key"]
            )
    with op.batch_alter_table("endpoint_captures") as batch:
        batch.add_column(sa.Column("event_id", sa.String(length=64), nullable=True))
        batch.create_unique_constraint("uq_endpoint_captures_event_id", ["event_id"])


def downgrade() -> None:
    with op.batch_alter_table("endpoint_captures") as batch:
        batch.drop_constraint("uq_endpoint_captures_event_id", type_="unique")
        batch.drop_column("event_id")
    for table in REGIONAL_TABLES:
        with op.batch_alter_table(table) as batch:
            batch.drop_constraint(f"uq_{table}_account_id_region_name_key", type_="unique")
            batch.create_unique_constraint(f"uq_{table}_account_id_name_key", ["account_id", "name_key"])
