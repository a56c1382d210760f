"""A log stream in a group: one optimization job, or one endpoint variant's instance."""

from __future__ import annotations

from sqlalchemy import BigInteger, ForeignKey, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from db.base import Base, CreatedAtMixin, IdMixin


class LogStream(IdMixin, CreatedAtMixin, Base):
    __tablename__ = "log_streams"
    __table_args__ = (UniqueConstraint("log_group_id", "name"),)

    log_group_id: Mapped[int] = mapped_column(ForeignKey("log_groups.id", ondelete="CASCADE"))
    name: Mapped[str] = mapped_column(String(512))
    # Milliseconds since the epoch, as the Logs API reports them (DescribeLogStreams).
    first_event_timestamp: Mapped[int | None] = mapped_column(BigInteger)
    last_event_timestamp: Mapped[int | None] = mapped_column(BigInteger)
    last_ingestion_time: Mapped[int | None] = mapped_column(BigInteger)
