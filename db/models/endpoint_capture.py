"""One captured invocation (DataCaptureConfig), waiting for the endpoint's supervisor to write it to S3.

The api records it (it sees the request and the answer); the worker, which does every S3
write as the endpoint's role, moves batches of them to DestinationS3Uri and deletes them.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import ForeignKey, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from db.base import Base, IdMixin
from db.types import UtcDateTime, utc_now


class EndpointCapture(IdMixin, Base):
    __tablename__ = "endpoint_captures"

    endpoint_id: Mapped[int] = mapped_column(ForeignKey("endpoints.id", ondelete="CASCADE"), index=True)
    captured_at: Mapped[datetime] = mapped_column(UtcDateTime(), default=utc_now, nullable=False)
    # One line of SageMaker's capture format (captureData/eventMetadata/eventVersion), as JSON text.
    line: Mapped[str] = mapped_column(Text)
    # The line's eventMetadata.eventId: replaying the api's capture spool stores a line once.
    event_id: Mapped[str | None] = mapped_column(String(64), unique=True)
