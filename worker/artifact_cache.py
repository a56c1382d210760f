"""Local copies of S3 snapshots (models, heads, data), keyed by their objects' ETags.

A snapshot is downloaded into a private temporary directory and renamed into place, so
a reader never sees half a model and two workers filling the same entry at once both
end up using one complete copy (the loser of the rename discards its own). Later jobs on
the same objects find the directory and download nothing.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import uuid
from collections.abc import Callable
from pathlib import Path

from core.s3_store import S3Store
from db.settings import Settings
from worker.model_archive import unpack_model_archive
from worker.s3_snapshot import S3Snapshot

logger = logging.getLogger(__name__)

# A dot-file, so data loaders (which skip hidden files) never read it as training data.
SNAPSHOT_FILE = ".eaglenest-snapshot.json"

DownloadProgress = Callable[[int, int], None]  # (bytes done, bytes total)
# The layout an archive is unpacked to is part of its entry's name: from v2 on, a single
# top-level folder is lifted (worker.model_archive). A v1 entry of such an archive still holds
# the folder, and reusing it would fail validation again.
UNPACKED_LAYOUT = "unpacked-v2"


def cache_root(settings: Settings) -> Path:
    return (settings.cache_dir or settings.state_dir / "cache").resolve()


class ArtifactCache:
    def __init__(self, root: Path) -> None:
        self.root = root

    def path_for(self, kind: str, snapshot: S3Snapshot) -> Path:
        return self.root / kind / snapshot.digest

    def archive_path_for(self, kind: str, snapshot: S3Snapshot) -> Path:
        return self.root / kind / f"{snapshot.digest}-{UNPACKED_LAYOUT}"

    def fetch(
        self,
        store: S3Store,
        snapshot: S3Snapshot,
        *,
        kind: str,
        progress: DownloadProgress | None = None,
    ) -> Path:
        """The snapshot's local directory, downloading it unless the cache already holds it."""
        final = self.path_for(kind, snapshot)
        if final.is_dir():
            logger.info("cache hit for %s: %s", snapshot.source, final)
            return final
        final.parent.mkdir(parents=True, exist_ok=True)
        partial = final.parent / f".{final.name}.{uuid.uuid4().hex[:8]}.partial"
        try:
            self._download(store, snapshot, partial, progress)
            try:
                os.rename(partial, final)
            except OSError:
                if not final.is_dir():
                    raise
                logger.info("another worker cached %s first; using its copy", snapshot.source)
        finally:
            shutil.rmtree(partial, ignore_errors=True)
        return final

    def fetch_archive(
        self,
        store: S3Store,
        snapshot: S3Snapshot,
        *,
        kind: str,
        max_unpacked_bytes: int,
        progress: DownloadProgress | None = None,
    ) -> Path:
        """The directory a one-object snapshot (a model.tar.gz) unpacks to, keyed by its ETag.

        The archive is downloaded next to the entry, unpacked (refusing unsafe members; see
        worker.model_archive) into a private directory, renamed into place and deleted.
        """
        if len(snapshot.entries) != 1:
            raise ValueError(f"an archive snapshot holds exactly one object, got {len(snapshot.entries)}")
        entry = snapshot.entries[0]
        final = self.archive_path_for(kind, snapshot)
        if final.is_dir():
            logger.info("cache hit for %s: %s", snapshot.source, final)
            return final
        final.parent.mkdir(parents=True, exist_ok=True)
        token = uuid.uuid4().hex[:8]
        partial = final.parent / f".{final.name}.{token}.partial"
        archive = final.parent / f".{final.name}.{token}.archive"
        total = entry.object.size
        done = 0

        def advance(chunk: int) -> None:
            nonlocal done
            done += chunk
            if progress is not None:
                progress(done, total)

        try:
            store.download(entry.object.location, archive, progress=advance)
            unpack_model_archive(
                archive, partial, uri=entry.object.uri, max_unpacked_bytes=max_unpacked_bytes
            )
            (partial / SNAPSHOT_FILE).write_text(
                json.dumps(snapshot.to_lineage(), indent=2) + "\n", encoding="utf-8"
            )
            try:
                os.rename(partial, final)
            except OSError:
                if not final.is_dir():
                    raise
                logger.info("another worker cached %s first; using its copy", snapshot.source)
        finally:
            archive.unlink(missing_ok=True)
            shutil.rmtree(partial, ignore_errors=True)
        return final

    def _download(
        self, store: S3Store, snapshot: S3Snapshot, directory: Path, progress: DownloadProgress | None
    ) -> None:
        total = snapshot.total_bytes
        done = 0

        def advance(chunk: int) -> None:
            nonlocal done
            done += chunk
            if progress is not None:
                progress(done, total)

        for entry in snapshot.entries:
            path = directory / entry.path
            store.download(entry.object.location, path, progress=advance)
            # The object's own time, not the download's: a file's (size, mtime) is part of the
            # trainer's data fingerprint, which must not change between two copies of one object.
            stamp = entry.object.last_modified.timestamp()
            os.utime(path, (stamp, stamp))
        (directory / SNAPSHOT_FILE).write_text(
            json.dumps(snapshot.to_lineage(), indent=2) + "\n", encoding="utf-8"
        )
