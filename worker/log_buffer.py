"""Log lines on their way to one CloudWatch stream: buffered, then written in batches.

Writers (a logging handler, a serving process's output reader) only append under a lock;
whoever owns the buffer flushes it on its own schedule, so a slow database never blocks the
code that logs. A batch that cannot be written stays buffered (up to a cap) for the next flush.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass

from sqlalchemy.orm import Session

from core.services.log_writer import now_ms, write_log_events
from db.queries.log_event import NewLogEvent

logger = logging.getLogger(__name__)

SessionScope = Callable[[], AbstractContextManager[Session]]
# What a buffer keeps while the database cannot take it; older lines are kept, newer dropped.
MAX_BUFFERED = 10_000


@dataclass(frozen=True)
class LogTarget:
    account_id: int
    region: str
    group_name: str
    stream_name: str
    retention_in_days: int


class LogBuffer:
    def __init__(self, session_scope: SessionScope, target: LogTarget) -> None:
        self._session_scope = session_scope
        self.target = target
        self._pending: list[NewLogEvent] = []
        self._lock = threading.Lock()

    def write(self, message: str, timestamp_ms: int | None = None) -> None:
        with self._lock:
            if len(self._pending) < MAX_BUFFERED:
                self._pending.append(NewLogEvent(timestamp_ms or now_ms(), message))

    def flush(self) -> None:
        with self._lock:
            batch, self._pending = self._pending, []
        if not batch:
            return
        target = self.target
        try:
            with self._session_scope() as session:
                write_log_events(
                    session,
                    account_id=target.account_id,
                    region=target.region,
                    group_name=target.group_name,
                    stream_name=target.stream_name,
                    events=batch,
                    retention_in_days=target.retention_in_days,
                )
        except Exception:
            logger.warning(
                "could not store %d log lines of %s %s; keeping them for the next flush",
                len(batch),
                target.group_name,
                target.stream_name,
            )
            with self._lock:
                self._pending[:0] = batch[: MAX_BUFFERED - len(self._pending)]
