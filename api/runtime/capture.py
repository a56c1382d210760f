"""DataCaptureConfig on the api side: sample an invocation, shape it as one line of SageMaker's
capture format, make it durable in the api's spool (api/runtime/capture_spool.py) before the
invocation's response returns, and store it (endpoint_captures) from a background thread.

The worker then writes the stored lines to DestinationS3Uri as the endpoint's role
(worker/endpoints/capture_upload.py); trainer.data.formats.capture reads the same format, so
the capture prefix is a TrainingDataSource as it is.
"""

from __future__ import annotations

import json
import logging
import random
import threading
import time
from datetime import UTC, datetime
from typing import Any

from sqlalchemy.orm import Session, sessionmaker

from api.runtime.capture_spool import CaptureSpool, Segment
from db.queries.endpoint_capture import CaptureRow, add_endpoint_captures

logger = logging.getLogger(__name__)
# A short pause before each store lets a burst of invocations share one file and one commit.
GATHER_SECONDS = 0.05
# How often to look for files left by api processes that died (a sibling uvicorn worker).
ORPHAN_SCAN_SECONDS = 30.0
RETRY_SECONDS = 2.0


def should_capture(config: dict[str, Any] | None) -> bool:
    if not config or config.get("EnableCapture", True) is False:
        return False
    return random.uniform(0, 100) < float(config["InitialSamplingPercentage"])


def capture_line(
    config: dict[str, Any],
    *,
    event_id: str,
    request_body: bytes,
    content_type: str,
    response_body: bytes | None,
) -> str:
    """One invocation as SageMaker writes it; CaptureOptions picks Input, Output or both."""
    modes = {option["CaptureMode"] for option in config.get("CaptureOptions", [])}
    data: dict[str, Any] = {}
    if "Input" in modes:
        data["endpointInput"] = _section(request_body, content_type, "INPUT")
    if "Output" in modes and response_body is not None:
        data["endpointOutput"] = _section(response_body, "application/json", "OUTPUT")
    metadata = {
        "eventId": event_id,
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
    """``put`` returns once the line is in the spool; a daemon thread stores spooled lines.

    The thread seals the spool's file, stores its records in one transaction and removes it;
    at start-up, and every ORPHAN_SCAN_SECONDS, it also stores the files of api processes
    that died. If the database is down, files wait on disk and are retried.
    """

    def __init__(self, session_factory: sessionmaker[Session], spool: CaptureSpool) -> None:
        self._session_factory = session_factory
        self.spool = spool
        self._pending: list[Segment] = []
        self._cycle_lock = threading.Lock()
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._start_lock = threading.Lock()

    def start(self) -> None:
        """Start the thread (its first cycle stores what dead processes left); idempotent."""
        with self._start_lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="endpoint-capture", daemon=True)
                self._thread.start()

    def put(self, row: CaptureRow) -> None:
        """Blocking (an fsync): call it from a worker thread, never on the event loop."""
        self.spool.append(row)
        self.start()
        self._wake.set()

    def _run(self) -> None:
        next_scan = 0.0
        while not self._stopping.is_set():
            scan = time.monotonic() >= next_scan
            if scan:
                next_scan = time.monotonic() + ORPHAN_SCAN_SECONDS
            if not self.flush(claim_orphans=scan):
                self._stopping.wait(RETRY_SECONDS)
                continue
            self._wake.wait(timeout=ORPHAN_SCAN_SECONDS)
            self._wake.clear()
            self._stopping.wait(GATHER_SECONDS)

    def flush(self, *, claim_orphans: bool = False) -> bool:
        """Store everything spooled so far; False when some files must wait (the database failed)."""
        with self._cycle_lock:
            sealed = self.spool.seal()
            if sealed is not None:
                self._pending.append(sealed)
            if claim_orphans:
                self._pending.extend(self.spool.claim_orphans())
            left: list[Segment] = []
            for segment in self._pending:
                try:
                    with self._session_factory() as session:
                        add_endpoint_captures(session, captures=segment.records())
                        session.commit()
                except Exception:
                    logger.exception("could not store the captured invocations of %s; kept", segment.path)
                    left.append(segment)
                    continue
                segment.remove()
            self._pending = left
            return not left

    def close(self) -> None:
        """Stop the thread and store what is spooled; what cannot be stored stays for the next start."""
        self._stopping.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
        self.flush()
        with self._cycle_lock:
            for segment in self._pending:
                segment.release()
            self._pending = []
        self.spool.close()
