"""One serving process of an endpoint, as its supervisor (a worker task) reports it."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import ForeignKey, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from db.base import Base, IdMixin
from db.types import UtcDateTime, utc_now


class EndpointInstance(IdMixin, Base):
    __tablename__ = "endpoint_instances"
    __table_args__ = (UniqueConstraint("endpoint_id", "generation", "ordinal"),)

    endpoint_id: Mapped[int] = mapped_column(ForeignKey("endpoints.id", ondelete="CASCADE"), index=True)
    generation: Mapped[int]
    variant_name: Mapped[str] = mapped_column(String(63))
    ordinal: Mapped[int]
    # The instance's base URL once it answers (http://host:port), else None.
    url: Mapped[str | None] = mapped_column(String(255))
    # Pending (starting), InService, or Failed (exited; the supervisor restarts it).
    status: Mapped[str] = mapped_column(String(32))
    message: Mapped[str | None] = mapped_column(Text)
    restarts: Mapped[int] = mapped_column(default=0)
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime(), default=utc_now, nullable=False)
