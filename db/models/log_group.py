"""A CloudWatch Logs log group: per account *and* region, as on AWS.

SageMaker writes to two families: ``/aws/sagemaker/OptimizationJobs`` (one stream per job)
and ``/aws/sagemaker/Endpoints/<endpoint>`` (one stream per variant and instance). Groups
are created on the first event written to them, as SageMaker's own groups are.
"""

from __future__ import annotations

from sqlalchemy import ForeignKey, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from db.base import Base, CreatedAtMixin, IdMixin


class LogGroup(IdMixin, CreatedAtMixin, Base):
    __tablename__ = "log_groups"
    __table_args__ = (UniqueConstraint("account_id", "region", "name"),)

    account_id: Mapped[int] = mapped_column(ForeignKey("accounts.id", ondelete="CASCADE"), index=True)
    # The region the writer acted in (the resource's region), as the SigV4 scope names it.
    region: Mapped[str] = mapped_column(String(32))
    # logGroupName: 1..512 characters of [.-_/#A-Za-z0-9].
    name: Mapped[str] = mapped_column(String(512))
    # How long events are kept (DescribeLogGroups' retentionInDays); the server's default applies.
    retention_in_days: Mapped[int] = mapped_column()
