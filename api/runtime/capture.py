"""DataCaptureConfig on the api side: sample an invocation, shape it as one line of SageMaker's
capture format, and hand it to a background thread that stores it (endpoint_captures).

The worker then writes the stored lines to DestinationS3Uri as the endpoint's role
(worker/endpoints/capture_upload.py); trainer.data.formats.capture reads the same format, so
the capture prefix is a TrainingDataSource as it is.
"""

from __future__ import annotations

import json
import logging
import queue
import random
import threading
import uuid
from datetime import UTC, datetime
from typing import Any

from sqlalchemy.orm import Session, sessionmaker

from db.queries.endpoint_capture import add_endpoint_captures

logger = logging.getLogger(__name__)
BATCH = 256


def should_capture(config: dict[str, Any] | None) -> bool:
    if not config or config.get("EnableCapture", True) is False:
        return False
    return random.uniform(0, 100) < float(config["InitialSamplingPercentage"])


def capture_line(
    config: dict[str, Any], *, request_body: bytes, content_type: str, response_body: bytes | None
) -> str:
    """One invocation as SageMaker writes it; CaptureOptions picks Input, Output or both."""
    modes = {option["CaptureMode"] for option in config.get("CaptureOptions", [])}
    data: dict[str, Any] = {}
    if "Input" in modes:
        data["endpointInput"] = _section(request_body, content_type, "INPUT")
    if "Output" in modes and response_body is not None:
        data["endpointOutput"] = _section(response_body, "application/json", "OUTPUT")
    metadata = {
        "eventId": str(uuid.uuid4()),
        "inferenceTime": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    return json.dumps({"captureData": data, "eventMetadata": metadata, "eventVersion": "0"})


def _section(body: bytes, content_type: str, mode: str) -> dict[str, str]:
    return {
        "observedContentType": content_type,
        "mode": mode,
        "data": body.decode("utf-8", "replace"),
        "encoding": "JSON",
    }


class CaptureWriter:
    """Stores captured lines from a daemon thread, so an invocation never waits on the database."""

    def __init__(self, session_factory: sessionmaker[Session]) -> None:
        self._session_factory = session_factory
        self._queue: queue.Queue[tuple[int, str]] = queue.Queue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def put(self, endpoint_id: int, line: str) -> None:
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="endpoint-capture", daemon=True)
                self._thread.start()
        self._queue.put((endpoint_id, line))

    def _run(self) -> None:
        while True:
            batch = [self._queue.get()]
            while len(batch) < BATCH and not self._queue.empty():
                batch.append(self._queue.get_nowait())
            try:
                with self._session_factory() as session:
                    add_endpoint_captures(session, captures=batch)
                    session.commit()
            except Exception:
                # Capture is best effort, as on SageMaker: a lost line never fails an invocation.
                logger.exception("could not store %d captured invocations", len(batch))
            finally:
                for _ in batch:
                    self._queue.task_done()

    def join(self) -> None:
        """Wait until everything put so far is stored (tests, shutdown)."""
        self._queue.join()
