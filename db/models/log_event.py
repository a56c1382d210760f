"""One log line of a stream, with its event time and when it was stored (both epoch ms)."""

from __future__ import annotations

from sqlalchemy import BigInteger, ForeignKey, Index, Integer, Text
from sqlalchemy.orm import Mapped, mapped_column

from db.base import Base

# SQLite gives an auto-incrementing key only to an INTEGER PRIMARY KEY.
EventId = BigInteger().with_variant(Integer(), "sqlite")


class LogEvent(Base):
    __tablename__ = "log_events"
    __table_args__ = (
        # GetLogEvents reads one stream in time order; FilterLogEvents a whole group.
        Index("ix_log_events_stream_time", "log_stream_id", "timestamp", "id"),
        Index("ix_log_events_group_time", "log_group_id", "timestamp", "id"),
    )

    id: Mapped[int] = mapped_column(EventId, primary_key=True, autoincrement=True)
    log_stream_id: Mapped[int] = mapped_column(ForeignKey("log_streams.id", ondelete="CASCADE"))
    # Denormalised from the stream so a group-wide filter needs no join.
    log_group_id: Mapped[int] = mapped_column(ForeignKey("log_groups.id", ondelete="CASCADE"))
    timestamp: Mapped[int] = mapped_column(BigInteger)
    ingestion_time: Mapped[int] = mapped_column(BigInteger)
    message: Mapped[str] = mapped_column(Text)
