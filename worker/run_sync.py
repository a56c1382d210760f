"""Mirror of the trainer's run directory under the job's staging prefix on S3.

Each new checkpoint is uploaded as soon as the trainer has written it (files first, the
``latest``/``best`` pointers last), together with the prepared samples, the held-out
conversations and metrics.jsonl. A redelivered job - on this machine or another - restores
the mirror into an empty run directory, and the trainer resumes from its latest checkpoint.
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path
from typing import Any

from core.s3 import S3Location
from core.s3_store import S3Store
from trainer.eagle.checkpoint import BEST, LATEST, latest_checkpoint, read_checkpoint_state
from trainer.eagle.data import HELDOUT_FILE, REGENERATED_FILE
from trainer.eagle.prepared import PREPARED_DIR
from trainer.train import CHECKPOINT_DIRNAME, METRICS_FILE

logger = logging.getLogger(__name__)

# Written once, right after data preparation; a resumed run reuses them as they are.
RUN_DATA_FILES = (HELDOUT_FILE, REGENERATED_FILE)


class RunDirectorySync:
    def __init__(self, store: S3Store, remote: S3Location, run_dir: Path) -> None:
        self.store = store
        self.remote = remote.as_directory
        self.run_dir = run_dir
        self._uploaded_checkpoint: str | None = None
        self._uploaded_data = False

    @property
    def checkpoints(self) -> Path:
        return self.run_dir / CHECKPOINT_DIRNAME

    def restore(self) -> dict[str, Any] | None:
        """Replace the local run directory with the S3 mirror; the latest checkpoint's state or None."""
        shutil.rmtree(self.run_dir, ignore_errors=True)
        self.run_dir.mkdir(parents=True)
        objects = self.store.list_objects(self.remote)
        for obj in objects:
            relative = obj.location.key[len(self.remote.key) :]
            self.store.download(obj.location, self.run_dir / relative)
        latest = latest_checkpoint(self.checkpoints)
        if latest is None:
            return None
        self._uploaded_checkpoint = latest.name
        self._uploaded_data = True
        return read_checkpoint_state(latest)

    def sync(self) -> bool:
        """Upload the newest checkpoint if it is not on S3 yet; True when something was uploaded."""
        latest = latest_checkpoint(self.checkpoints)
        if latest is None or latest.name == self._uploaded_checkpoint:
            return False
        if not self._uploaded_data:
            self._upload_data()
        for path in sorted(p for p in latest.rglob("*") if p.is_file()):
            self._upload(path)
        self._upload(self.run_dir / METRICS_FILE)
        # Pointers last: a reader that sees them finds the files they name.
        for pointer in (LATEST, BEST):
            self._upload(self.checkpoints / pointer)
        self._uploaded_checkpoint = latest.name
        self._drop_pruned_checkpoints()
        logger.info("checkpoint %s mirrored to %s", latest.name, self.remote.uri)
        return True

    def _upload_data(self) -> None:
        prepared = self.run_dir / PREPARED_DIR
        files = sorted(p for p in prepared.rglob("*") if p.is_file()) if prepared.is_dir() else []
        files += [self.run_dir / name for name in RUN_DATA_FILES]
        for path in files:
            self._upload(path)
        self._uploaded_data = True

    def _upload(self, path: Path) -> None:
        if path.is_file():
            self.store.upload_file(path, self.remote.child(path.relative_to(self.run_dir).as_posix()))

    def _drop_pruned_checkpoints(self) -> None:
        """Delete checkpoints on S3 that the trainer pruned locally (it keeps the last few + best)."""
        remote_checkpoints = self.remote.child(CHECKPOINT_DIRNAME + "/")
        kept = {p.name for p in self.checkpoints.iterdir() if p.is_dir()}
        names = {
            obj.location.key[len(remote_checkpoints.key) :].split("/", 1)[0]
            for obj in self.store.list_objects(remote_checkpoints)
            if "/" in obj.location.key[len(remote_checkpoints.key) :]
        }
        for name in sorted(names - kept):
            self.store.delete_prefix(remote_checkpoints.child(name + "/"))
