"""DataCaptureConfig on the worker side: move the api's captured lines to DestinationS3Uri.

SageMaker's layout: ``<DestinationS3Uri>/<EndpointName>/<VariantName>/yyyy/mm/dd/hh/<id>.jsonl``,
one JSON line per invocation, written as the endpoint's role. Lines are deleted from the
database only after their object is written, so a failed upload is retried next time.
"""

from __future__ import annotations

import logging
import time
import uuid
from datetime import UTC, datetime
from typing import Any

from core.s3 import S3Location
from db.queries.endpoint_capture import delete_endpoint_captures, pending_endpoint_captures
from db.session import session_scope
from db.settings import Settings
from worker.endpoints.model_files import EndpointOwner, variant_model

logger = logging.getLogger(__name__)

FLUSH_INTERVAL_SECONDS = 5.0
MAX_LINES_PER_OBJECT = 1000


def capture_key(
    destination: str, endpoint_name: str, variant_name: str, now: datetime, token: str
) -> S3Location:
    base = S3Location.parse(destination, field="DataCaptureConfig.DestinationS3Uri").as_directory
    return base.child(f"{endpoint_name}/{variant_name}/{now:%Y/%m/%d/%H}/{token}.jsonl")


class CaptureUploader:
    def __init__(
        self, settings: Settings, *, endpoint_id: int, endpoint_name: str, owner: EndpointOwner
    ) -> None:
        self.settings = settings
        self.endpoint_id = endpoint_id
        self.endpoint_name = endpoint_name
        self.owner = owner
        self._last = time.monotonic()

    def flush_if_due(self, spec: dict[str, Any]) -> None:
        if time.monotonic() - self._last >= FLUSH_INTERVAL_SECONDS:
            self.flush(spec)

    def flush(self, spec: dict[str, Any]) -> int:
        """Write every pending line (in objects of at most MAX_LINES_PER_OBJECT); returns how many."""
        self._last = time.monotonic()
        capture = spec.get("DataCaptureConfig")
        if capture is None:
            return 0
        written = 0
        try:
            while True:
                with session_scope() as session:
                    rows = pending_endpoint_captures(
                        session, endpoint_id=self.endpoint_id, limit=MAX_LINES_PER_OBJECT
                    )
                    batch = [(row.id, row.line) for row in rows]
                if not batch:
                    return written
                model = variant_model(self.settings, owner=self.owner, spec=spec)
                variant = str(spec["ProductionVariants"][0]["VariantName"])
                location = capture_key(
                    str(capture["DestinationS3Uri"]),
                    self.endpoint_name,
                    variant,
                    datetime.now(UTC),
                    uuid.uuid4().hex,
                )
                body = "".join(f"{line}\n" for _, line in batch).encode()
                model.store.put_bytes(body, location, content_type="application/jsonl")
                with session_scope() as session:
                    delete_endpoint_captures(session, ids=[row_id for row_id, _ in batch])
                written += len(batch)
                logger.info(
                    "endpoint %s: wrote %d captured invocations to %s",
                    self.endpoint_id,
                    len(batch),
                    location.uri,
                )
        except Exception:
            # Kept in the database; the next flush tries again.
            logger.exception("endpoint %s: could not write captured data", self.endpoint_id)
            return written
