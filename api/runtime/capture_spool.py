"""The api's capture spool: a captured invocation is on local disk before its response returns.

Appends go to one open file per process, ``<pid>-<n>-<token>.jsonl``, one JSON record per line
(endpoint id, event id, capture line). ``append`` returns only after an fsync covers its
record; concurrent appends share one fsync (group commit), so a burst of invocations pays for
a few syncs, not one each.

Every file is held with an exclusive ``flock`` by the process that writes or stores it. The
kernel drops the lock when that process dies, however it dies (kill -9 included), so a file
that can be locked belongs to nobody: the next api process to look claims it and stores its
records. Stored files are removed; a record stored twice (a crash between the database commit
and the removal) is skipped by its event id.
"""

from __future__ import annotations

import fcntl
import hashlib
import itertools
import json
import logging
import os
import threading
import time
import uuid
from pathlib import Path

from sqlalchemy import make_url

from db.queries.endpoint_capture import CaptureRow

logger = logging.getLogger(__name__)
SUFFIX = ".jsonl"


def spool_directory(state_dir: Path, database_url: str) -> Path:
    """One directory per database: endpoint ids mean nothing to another database, so two
    apis on one state directory (tests, a moved database) never replay each other's lines."""
    shown = make_url(database_url).render_as_string(hide_password=True)
    return state_dir / "capture-spool" / hashlib.sha256(shown.encode()).hexdigest()[:16]


class Segment:
    """One spool file, open and locked by this process until it is removed or released."""

    def __init__(self, path: Path, fd: int) -> None:
        self.path = path
        self.fd = fd

    def records(self) -> list[CaptureRow]:
        """The complete records; a torn last line (its writer died mid-write, before the fsync
        that would have let its response return) is dropped."""
        chunks: list[bytes] = []
        offset = 0
        while chunk := os.pread(self.fd, 1 << 20, offset):
            chunks.append(chunk)
            offset += len(chunk)
        rows: list[CaptureRow] = []
        for raw in b"".join(chunks).split(b"\n"):
            if not raw:
                continue
            try:
                record = json.loads(raw)
                rows.append(
                    CaptureRow(int(record["endpoint_id"]), str(record["event_id"]), str(record["line"]))
                )
            except (ValueError, KeyError, TypeError):
                logger.warning("capture spool %s: skipped an incomplete record", self.path.name)
        return rows

    def remove(self) -> None:
        """Unlink first, then unlock: no other process can claim a file whose records are stored."""
        self.path.unlink(missing_ok=True)
        os.close(self.fd)

    def release(self) -> None:
        """Keep the file for a later process (this one is shutting down without storing it)."""
        os.close(self.fd)


class CaptureSpool:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        # Lock order: _sync_lock, then _lock. _lock guards the active file and the counters.
        self._lock = threading.Lock()
        self._sync_lock = threading.Lock()
        self._active: Segment | None = None
        self._written = 0
        self._synced = 0
        self._numbers = itertools.count()

    def append(self, row: CaptureRow) -> None:
        """Write ``row`` and return once it is on disk."""
        data = json.dumps({"endpoint_id": row.endpoint_id, "event_id": row.event_id, "line": row.line})
        encoded = (data + "\n").encode()
        with self._lock:
            if self._active is None:
                self._active = self._create()
            view = memoryview(encoded)
            while view:
                view = view[os.write(self._active.fd, view) :]
            self._written += 1
            mine = self._written
        with self._sync_lock:
            if self._synced >= mine:
                return  # another append's fsync (or a seal) covered this record
            # While _sync_lock is held no seal runs, so this record is in the active file.
            with self._lock:
                target, active = self._written, self._active
            assert active is not None
            os.fsync(active.fd)
            self._synced = target

    def seal(self) -> Segment | None:
        """Hand over the active file (synced, still locked); later appends start a new one."""
        with self._sync_lock, self._lock:
            active, self._active = self._active, None
            if active is not None:
                os.fsync(active.fd)
                self._synced = self._written
            return active

    def claim_orphans(self) -> list[Segment]:
        """Files no live process holds (their writer died), locked now by this one, oldest first.

        This process's own files are never among them: its lock on them is on another open
        file description, so a second ``flock`` here fails too.
        """
        if not self.directory.is_dir():
            return []
        for hidden in self.directory.glob(".*.tmp"):
            # Only old ones: a fresh one may be between its creation and its lock.
            if _modified(hidden) < time.time() - 60:
                _remove_if_abandoned(hidden)
        claimed: list[Segment] = []
        for path in sorted(self.directory.glob(f"*{SUFFIX}"), key=_modified):
            try:
                fd = os.open(path, os.O_RDWR)
            except FileNotFoundError:
                continue
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                continue
            if os.fstat(fd).st_nlink == 0:  # stored and removed after we listed it
                os.close(fd)
                continue
            claimed.append(Segment(path, fd))
        return claimed

    def _create(self) -> Segment:
        self.directory.mkdir(parents=True, exist_ok=True)
        name = f"{os.getpid()}-{next(self._numbers)}-{uuid.uuid4().hex[:8]}"
        # Locked under a name claim_orphans ignores, then renamed: no other process can take
        # (and remove) a fresh, empty file before this one holds its lock.
        hidden = self.directory / f".{name}.tmp"
        fd = os.open(hidden, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o600)
        fcntl.flock(fd, fcntl.LOCK_EX)
        path = self.directory / f"{name}{SUFFIX}"
        os.rename(hidden, path)
        _sync_directory(self.directory)
        return Segment(path, fd)

    def close(self) -> None:
        """Release the active file, if any, without storing it (a later process will)."""
        with self._sync_lock, self._lock:
            if self._active is not None:
                os.fsync(self._active.fd)
                self._active.release()
                self._active = None


def _remove_if_abandoned(hidden: Path) -> None:
    """A file _create made but never renamed (its process died in between): empty, unlocked."""
    try:
        fd = os.open(hidden, os.O_RDONLY)
    except FileNotFoundError:
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        hidden.unlink(missing_ok=True)
    except BlockingIOError:
        pass  # its process is about to rename it
    finally:
        os.close(fd)


def _modified(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except FileNotFoundError:
        return 0.0


def _sync_directory(directory: Path) -> None:
    """The new file's name must survive a power loss too, not only its contents."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
