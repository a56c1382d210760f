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
        for directory in (self.root, self.s3_root, self.logs):
            directory.mkdir(parents=True, exist_ok=True)
