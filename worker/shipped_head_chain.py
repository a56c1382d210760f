"""Chaining shipped-head builds: each build continues the last and keeps everything it distilled.

A CPU buys a shipped head its data slowly (distillation writes tens of reply tokens a second on
two cores), far more slowly than training could use them, so one session's budget cannot build a
strong head. ``eaglenest base-heads ship --continue`` adds a session's budget to the head already
in ``--out``: it starts from that head (its draft vocabulary and aux layers kept), trains on every
reply the earlier builds distilled (``distilled.jsonl.gz``, committed beside the head: text, not
weights) plus the new ones it distils itself with a new seed (so the target writes new
self-instruct prompts), and writes the grown reply file back. The manifest's ``chain`` lists the
earlier builds (command, budget, data, τ) so the head's whole cost and lineage stay on record.
"""

from __future__ import annotations

import gzip
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.head_files import HEAD_FILES
from trainer.file_digest import sha256_of
from worker.shipped_heads import MANIFEST, ShippedHeadRefusedError, verify_shipped_head

# Every reply the chain distilled, one DistilledRecord per line (trainer.eagle.distilled), gzip.
DISTILLED_FILE = "distilled.jsonl.gz"


@dataclass(frozen=True)
class Continuation:
    """What a continuing build starts from: the earlier head, its replies, its manifest."""

    previous_manifest: dict[str, Any]
    head_dir: Path  # a copy of the earlier head (the build overwrites --out at its end)
    distilled: Path | None  # the earlier builds' replies, decompressed; None when none were kept
    seed: int  # the earlier build's seed + 1: new self-instruct prompts, new sampling

    def train_overrides(self) -> dict[str, Any]:
        overrides: dict[str, Any] = {"init_head_dir": self.head_dir, "seed": self.seed}
        if self.distilled is not None:
            overrides["distilled_paths"] = [self.distilled]
        return overrides

    def chain(self) -> list[dict[str, Any]]:
        """The manifest's ``chain`` for the new build: the earlier builds, oldest first."""
        previous = self.previous_manifest
        return [*previous.get("chain", []), _chain_entry(previous)]


def prepare_continuation(out_dir: Path, work_dir: Path) -> Continuation:
    """The head in ``out_dir``, checked against its manifest, copied into ``work_dir``."""
    if not (out_dir / MANIFEST).is_file():
        raise ShippedHeadRefusedError(
            f"--continue needs a built head in {out_dir} (with its {MANIFEST}); build one first without it"
        )
    head = verify_shipped_head(out_dir)
    head_dir = work_dir / "previous-head"
    shutil.rmtree(head_dir, ignore_errors=True)
    head_dir.mkdir(parents=True)
    for name in HEAD_FILES:
        shutil.copyfile(out_dir / name, head_dir / name)
    return Continuation(
        previous_manifest=head.manifest,
        head_dir=head_dir,
        distilled=_unpack_distilled(out_dir / DISTILLED_FILE, work_dir / "previous-distilled.jsonl"),
        seed=int(head.manifest.get("recipe", {}).get("seed", 0)) + 1,
    )


def _unpack_distilled(packed: Path, unpacked: Path) -> Path | None:
    """The earlier replies as the trainer reads them; None for a head built before they were
    kept, or one whose builds distilled nothing."""
    unpacked.unlink(missing_ok=True)
    if not packed.is_file():
        return None
    with gzip.open(packed, "rb") as source, unpacked.open("wb") as target:
        shutil.copyfileobj(source, target)
    return unpacked if unpacked.read_bytes().strip() else None


def save_distilled(out_dir: Path, parts: list[Path]) -> dict[str, Any]:
    """Write every reply of ``parts`` (earlier ones first) to ``out_dir``; the manifest's entry.

    gzip without a timestamp, so the same replies give the same bytes (and sha256)."""
    records = 0
    temporary = out_dir / (DISTILLED_FILE + ".tmp")
    with temporary.open("wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as packed:
        for part in parts:
            for line in part.read_bytes().splitlines():
                if line.strip():
                    packed.write(line + b"\n")
                    records += 1
    temporary.replace(out_dir / DISTILLED_FILE)
    return {"file": DISTILLED_FILE, "records": records, "sha256": sha256_of(out_dir / DISTILLED_FILE)}


def total_minutes(chain: list[dict[str, Any]], minutes: float) -> float:
    """The budget of the whole chain: the earlier builds' and this one's."""
    return sum(float(entry.get("minutes") or 0.0) for entry in chain) + minutes


def _chain_entry(manifest: dict[str, Any]) -> dict[str, Any]:
    budget = manifest.get("budget", {})
    evaluation = manifest.get("evaluation", {})
    summary = manifest.get("data", {}).get("summary", {})
    return {
        "built_at": manifest.get("built_at"),
        "rebuild": manifest.get("rebuild"),
        "git_commit": manifest.get("code_version", {}).get("git_commit"),
        "minutes": budget.get("minutes"),
        "clock": budget.get("clock"),
        "tokens_trained": budget.get("tokens_trained"),
        "conversations_used": summary.get("conversations_used"),
        "seed": manifest.get("recipe", {}).get("seed"),
        "tau": evaluation.get("tau"),
        "speedup": evaluation.get("speedup"),
        "files": manifest.get("files"),
    }
