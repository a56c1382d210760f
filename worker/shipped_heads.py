"""Base EAGLE heads shipped with the code: ``heads/<model>/`` (config.json, model.safetensors,
manifest.json), each trained ahead of time for one exact model by ``eaglenest base-heads ship``.

A job whose model has no head in the base-head store yet looks here before building one: a
shipped head whose manifest names exactly the job's model files (their sha256) is checked
against the sha256 its manifest commits for each of its own files, then published into the
store under the model's key like a head a job built, so every later job reuses it the usual
way. A head whose files do not match its manifest is refused and never used; the job says why
and builds its own. A model no shipped head names (any other model) is not affected.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.head_files import HEAD_FILES
from trainer.file_digest import sha256_of

# The repository's heads/ folder (the worker image copies it to /app/heads).
SHIPPED_HEADS_DIR = Path(__file__).resolve().parents[1] / "heads"
MANIFEST = "manifest.json"
# The model files a head is trained for: weights, config, tokenizer and chat template. Not the
# conversion's notes (eaglenest-source.json records how long it took) or generation defaults.
_MODEL_FILE_PATTERNS = ("config.json", "*.safetensors", "tokenizer.json", "tokenizer_config.json", "*.jinja")


class ShippedHeadRefusedError(Exception):
    """A shipped head that names the model but cannot be used: say why, never use it."""


@dataclass(frozen=True)
class ShippedHead:
    name: str
    directory: Path
    manifest: dict[str, Any]
    manifest_sha256: str

    @property
    def sha256(self) -> dict[str, str]:
        return dict(self.manifest["files"])

    def lineage(self) -> dict[str, Any]:
        """What lineage.json and the store's manifest say about it: which head, exactly."""
        return {
            "name": self.name,
            "manifest_sha256": self.manifest_sha256,
            "sha256": self.sha256,
            "rebuild": self.manifest.get("rebuild"),
            "evaluation": self.manifest.get("evaluation"),
        }


def model_fingerprint(model_dir: Path) -> dict[str, str]:
    """sha256 of each model file a head depends on, by its path under ``model_dir``."""
    files = {path for pattern in _MODEL_FILE_PATTERNS for path in model_dir.glob(pattern) if path.is_file()}
    return {path.relative_to(model_dir).as_posix(): sha256_of(path) for path in sorted(files)}


def differing_files(model: dict[str, str], committed: dict[str, str]) -> list[str]:
    """The files whose sha256 differ between a model's fingerprint and what a manifest names
    (a file on one side only counts)."""
    return sorted(name for name in set(model) | set(committed) if model.get(name) != committed.get(name))


def checkout_relative(command: str) -> str:
    """Paths under the checkout as the checkout names them: a manifest is read on other machines."""
    return command.replace(f"{Path.cwd()}/", "")


def shipped_head_for(model_dir: Path, heads_dir: Path | None = None) -> ShippedHead | None:
    """The shipped head trained for exactly the model in ``model_dir``, verified; None when no
    shipped head names this model's config. Raises ShippedHeadRefusedError when one does but its
    files, or the model's other files, differ from what its manifest committed."""
    heads_dir = SHIPPED_HEADS_DIR if heads_dir is None else heads_dir
    if not heads_dir.is_dir() or not (model_dir / "config.json").is_file():
        return None
    # config.json first: hashing the weights is left for the head that names this config.
    config_sha256 = sha256_of(model_dir / "config.json")
    for manifest_path in sorted(heads_dir.glob(f"*/{MANIFEST}")):
        manifest = _read_manifest(manifest_path)
        target = manifest.get("target", {}).get("files", {})
        if target.get("config.json") != config_sha256:
            continue
        differing = differing_files(model_fingerprint(model_dir), target)
        if differing:
            raise ShippedHeadRefusedError(
                f"Shipped base head {manifest_path.parent.name} was trained for another build of this "
                f"model: {', '.join(differing)} differ from the sha256 its manifest names"
            )
        return verify_shipped_head(manifest_path.parent)
    return None


def verify_shipped_head(directory: Path) -> ShippedHead:
    """The head in ``directory``, once each of its files matches the sha256 its manifest commits."""
    manifest_path = directory / MANIFEST
    manifest = _read_manifest(manifest_path)
    committed = manifest.get("files")
    if not isinstance(committed, dict) or set(committed) != set(HEAD_FILES):
        raise ShippedHeadRefusedError(
            f"Shipped base head {directory.name}: {MANIFEST} must give the sha256 of exactly "
            f"{', '.join(HEAD_FILES)}"
        )
    for name, expected in committed.items():
        path = directory / name
        if not path.is_file():
            raise ShippedHeadRefusedError(f"Shipped base head {directory.name}: {name} is missing")
        actual = sha256_of(path)
        if actual != expected:
            raise ShippedHeadRefusedError(
                f"Shipped base head {directory.name}: {name} has sha256 {actual[:16]}…, its manifest "
                f"commits {str(expected)[:16]}… (changed or corrupted since it was built): refused"
            )
    digest = hashlib.sha256(manifest_path.read_bytes()).hexdigest()
    return ShippedHead(name=directory.name, directory=directory, manifest=manifest, manifest_sha256=digest)


def _read_manifest(path: Path) -> dict[str, Any]:
    try:
        manifest = json.loads(path.read_text())
    except (OSError, ValueError) as error:
        raise ShippedHeadRefusedError(
            f"Shipped base head {path.parent.name}: unreadable {MANIFEST} ({error})"
        ) from None
    if not isinstance(manifest, dict):
        raise ShippedHeadRefusedError(
            f"Shipped base head {path.parent.name}: {MANIFEST} is not a JSON object"
        )
    return manifest
