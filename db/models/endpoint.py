"""An endpoint (CreateEndpoint): a deployed endpoint configuration and the state of its rollout.

The endpoint keeps a copy of its configuration's spec, as SageMaker does: deleting the
configuration later does not change what the endpoint serves.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Enum, ForeignKey, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column, relationship

from db.base import Base, IdMixin, TimestampMixin
from db.models.account import Account
from db.models.endpoint_status import EndpointStatus
from db.types import JsonDocument, UtcDateTime


def endpoint_status_type() -> Enum:
    """VARCHAR plus a CHECK constraint (portable to SQLite)."""
    return Enum(
        EndpointStatus,
        name="endpoint_status",
        native_enum=False,
        create_constraint=True,
        length=32,
        values_callable=lambda statuses: [status.value for status in statuses],
    )


class Endpoint(IdMixin, TimestampMixin, Base):
    __tablename__ = "endpoints"
    __table_args__ = (UniqueConstraint("account_id", "region", "name_key"),)

    account_id: Mapped[int] = mapped_column(ForeignKey("accounts.id", ondelete="CASCADE"), index=True)
    name: Mapped[str] = mapped_column(String(63))
    name_key: Mapped[str] = mapped_column(String(63))
    region: Mapped[str] = mapped_column(String(32))
    arn: Mapped[str] = mapped_column(String(2048))
    status: Mapped[EndpointStatus] = mapped_column(endpoint_status_type())
    failure_reason: Mapped[str | None] = mapped_column(Text)
    # The configuration being served, and (while Updating) the one being rolled out.
    config_name: Mapped[str] = mapped_column(String(63))
    config_spec: Mapped[dict[str, Any]] = mapped_column(JsonDocument)
    pending_config_name: Mapped[str | None] = mapped_column(String(63))
    pending_config_spec: Mapped[dict[str, Any] | None] = mapped_column(JsonDocument)
    pending_since: Mapped[datetime | None] = mapped_column(UtcDateTime())
    deployment_config: Mapped[dict[str, Any] | None] = mapped_column(JsonDocument)
    # Which rollout the serving instances belong to: UpdateEndpoint starts generation + 1 and
    # the supervisor moves this forward once the new instances answer.
    generation: Mapped[int] = mapped_column(default=0)
    task_id: Mapped[str | None] = mapped_column(String(255))
    # The supervisor's lease: refreshed while it runs; an endpoint whose supervisor stopped
    # refreshing it (its worker died) is queued again by another endpoint worker's reaper.
    supervisor_heartbeat_at: Mapped[datetime | None] = mapped_column(UtcDateTime())

    account: Mapped[Account] = relationship(lazy="raise")
