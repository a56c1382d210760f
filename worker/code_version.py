"""Which code produced a job's outputs, for lineage.json."""

from __future__ import annotations

import importlib.metadata
import subprocess
from functools import lru_cache
from pathlib import Path

PACKAGE = "eaglenest"
SOURCE_ROOT = Path(__file__).resolve().parents[1]


@lru_cache(maxsize=1)
def code_version() -> dict[str, str | bool | None]:
    """The installed package version and, when running from a git checkout, its commit and
    whether the working tree had uncommitted changes (then the commit alone does not say)."""
    try:
        version: str | None = importlib.metadata.version(PACKAGE)
    except importlib.metadata.PackageNotFoundError:
        version = None
    commit = _git("rev-parse", "HEAD")
    status = _git("status", "--porcelain", "--untracked-files=no") if commit else None
    return {
        "package": PACKAGE,
        "version": version,
        "git_commit": commit,
        "git_dirty": None if status is None else bool(status),
    }


def _git(*args: str) -> str | None:
    if not (SOURCE_ROOT / ".git").exists():
        return None
    try:
        completed = subprocess.run(
            ["git", "-C", str(SOURCE_ROOT), *args], capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return completed.stdout.strip() if completed.returncode == 0 else None
