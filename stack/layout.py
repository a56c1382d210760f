"""Where the embedded stack keeps each of its parts inside the state directory."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class StateLayout:
    root: Path

    @property
    def database_file(self) -> Path:
        return self.root / "eaglenest.sqlite3"

    @property
    def database_url(self) -> str:
        return f"sqlite:///{self.database_file}"

    @property
    def s3_root(self) -> Path:
        return self.root / "s3"

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    def log(self, name: str) -> Path:
        return self.logs / f"{name}.log"

    def create(self) -> None:
        """Create the directories, readable by their owner only (the database holds secrets).

        An existing state directory is tightened too; with the root at 0700, files inside it
        that an older version left world-readable are out of others' reach.
        """
        for directory in (self.root, self.s3_root, self.logs):
            directory.mkdir(mode=0o700, parents=True, exist_ok=True)
            directory.chmod(0o700)
