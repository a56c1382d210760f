"""Training checkpoints: enough to continue a run exactly where it stopped.

Layout under the run's ``checkpoints/`` directory::

    step-00000200/
        head.safetensors   trainable weights + d2t/t2d (no target embeddings), float32
        optimizer.pt       AdamW moments and step counts
        rng.pt             torch and Python RNG states
        state.json         step, schedule plan, elapsed time, metrics, both configs
    latest                 name of the newest complete checkpoint
    best                   name of the checkpoint with the lowest held-out loss

A checkpoint is written into a temporary directory and renamed into place before the
pointers move, so a crash mid-write leaves the previous one usable.
"""

from __future__ import annotations

import json
import os
import random
import shutil
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file

from engine.heads.head_format import head_tensors
from engine.heads.model import Eagle3DraftModel
from trainer.eagle.optimizer import HeadOptimizer

HEAD_FILE = "head.safetensors"
OPTIMIZER_FILE = "optimizer.pt"
RNG_FILE = "rng.pt"
STATE_FILE = "state.json"
LATEST = "latest"
BEST = "best"


def _write_pointer(root: Path, pointer: str, name: str) -> None:
    temporary = root / f".{pointer}.tmp"
    temporary.write_text(name + "\n")
    os.replace(temporary, root / pointer)


def _read_pointer(root: Path, pointer: str) -> Path | None:
    path = root / pointer
    if not path.is_file():
        return None
    target = root / path.read_text().strip()
    return target if (target / STATE_FILE).is_file() else None


def latest_checkpoint(root: Path | str) -> Path | None:
    return _read_pointer(Path(root), LATEST)


def best_checkpoint(root: Path | str) -> Path | None:
    return _read_pointer(Path(root), BEST)


def save_checkpoint(
    root: Path | str,
    *,
    step: int,
    head: Eagle3DraftModel,
    optimizer: HeadOptimizer,
    state: dict[str, Any],
    is_best: bool = False,
    keep_last: int = 2,
) -> Path:
    """Write checkpoint ``step`` and move the pointers; checkpoints older than the last
    ``keep_last`` are deleted, except the best one."""
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    name = f"step-{step:08d}"
    staging = root / f".{name}.partial"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    save_file(head_tensors(head), str(staging / HEAD_FILE))
    torch.save(optimizer.state_dict(), staging / OPTIMIZER_FILE)
    torch.save({"torch": torch.get_rng_state(), "python": random.getstate()}, staging / RNG_FILE)
    (staging / STATE_FILE).write_text(json.dumps({**state, "step": step}, indent=2) + "\n")
    final = root / name
    shutil.rmtree(final, ignore_errors=True)
    os.replace(staging, final)
    _write_pointer(root, LATEST, name)
    if is_best:
        _write_pointer(root, BEST, name)
    _prune(root, keep_last)
    return final


def _prune(root: Path, keep_last: int) -> None:
    keep = {p.name for p in (latest_checkpoint(root), best_checkpoint(root)) if p is not None}
    checkpoints = sorted(p for p in root.iterdir() if p.is_dir() and p.name.startswith("step-"))
    keep.update(p.name for p in checkpoints[-max(keep_last, 1) :])
    for path in checkpoints:
        if path.name not in keep:
            shutil.rmtree(path, ignore_errors=True)


def read_checkpoint_state(path: Path | str) -> dict[str, Any]:
    state: dict[str, Any] = json.loads((Path(path) / STATE_FILE).read_text())
    return state


def load_head_weights(path: Path | str, head: Eagle3DraftModel) -> None:
    """Copy a checkpoint's head weights (and d2t/t2d) into ``head``; embeddings stay as they are."""
    tensors = load_file(str(Path(path) / HEAD_FILE))
    missing, unexpected = head.load_state_dict(tensors, strict=False)
    missing = [name for name in missing if not name.startswith("embed_tokens.")]
    if missing or unexpected:
        raise ValueError(
            f"{path}: checkpoint does not fit the head (missing {missing}, unexpected {unexpected})"
        )


def load_checkpoint(path: Path | str, *, head: Eagle3DraftModel, optimizer: HeadOptimizer) -> dict[str, Any]:
    """Restore weights, optimizer and RNG state; returns the saved state dict."""
    path = Path(path)
    load_head_weights(path, head)
    # Onto the host first: torch.load puts each tensor back on the device it was saved from,
    # so a helper rank would build rank 0's AdamW moments on GPU 0 (a CUDA context and the
    # state's size there, kept by its allocator all run) and a CPU could not resume a GPU run
    # at all. load_state_dict moves every state tensor to its parameter's device.
    optimizer.load_state_dict(torch.load(path / OPTIMIZER_FILE, map_location="cpu", weights_only=True))
    rng = torch.load(path / RNG_FILE, weights_only=False)
    torch.set_rng_state(rng["torch"])
    random.setstate(rng["python"])
    return read_checkpoint_state(path)
