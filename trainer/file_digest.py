"""The sha256 of a local file: data fingerprints, converted models, lineage.json and the base-head
store all record it this way. Light on purpose (no torch): the worker imports it too."""

from __future__ import annotations

import hashlib
from pathlib import Path


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
