"""Measure a shipped head where it will be judged: τ and speedup on prompts unlike its data.

``eaglenest base-heads ship`` measures the head it built on the device it trained on; ``eaglenest
base-heads evaluate`` measures any head again on this machine, and with ``--write`` records that
measurement in the head's manifest. That is how a head built on a GPU gets the CPU figures the
shipped head's goals are stated in, and how two heads built on different machines (whose speed
differs by 20 % between VMs of one name) are compared on one. Earlier measurements are kept in
the manifest's ``earlier_evaluations``, never dropped.

Both run ``python -m trainer eval`` (greedy plain and speculative decoding, same engine, same run)
on the first user turn of chit-chat conversations: casual human chat, a kind none of the
shipped recipe's data is (code, maths and the target's own prompts).
"""

from __future__ import annotations

import json
import os
import platform
import shlex
import subprocess
import sys
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from trainer.data.builtin import load_builtin
from trainer.data.schema import Conversation
from trainer.data.writer import write_conversations_jsonl
from trainer.file_digest import sha256_of
from worker.shipped_heads import (
    MANIFEST,
    ShippedHeadRefusedError,
    checkout_relative,
    differing_files,
    model_fingerprint,
    verify_shipped_head,
)

EVAL_DATASET = "chitchat"
# What a measurement keeps of `trainer eval --json`'s report.
_MEASURED_KEYS = (
    "tau",
    "speedup",
    "acceptance_by_position",
    "tokens_per_s_plain",
    "tokens_per_s_spec",
    "identical_outputs",
    "k",
    "max_new_tokens",
    "threads",
    "dtype",
    "draft_dtype",
    "device",
)


@dataclass(frozen=True)
class EvalSettings:
    prompts: int = 20
    max_new_tokens: int = 64
    k: int = 3
    threads: int = 1
    device: str = "cpu"


def evaluate_head(model_dir: Path, head_dir: Path, work_dir: Path, settings: EvalSettings) -> dict[str, Any]:
    """τ, speedup and acceptance of the head in ``head_dir`` on chit-chat openers, measured now,
    with the machine it was measured on."""
    work_dir.mkdir(parents=True, exist_ok=True)
    prompts = openers(work_dir, settings.prompts)
    report = work_dir / "eval.json"
    report.unlink(missing_ok=True)
    command = [
        sys.executable,
        *("-m", "trainer", "eval"),
        *("--model", str(model_dir), "--head", str(head_dir), "--prompts", str(prompts)),
        *("--k", str(settings.k), "--max-new-tokens", str(settings.max_new_tokens)),
        *("--threads", str(settings.threads), "--device", settings.device, "--json", str(report)),
    ]
    subprocess.run(command, check=True)
    measured = json.loads(report.read_text())
    shown = checkout_relative(shlex.join(["python", *command[1:]]).replace(str(work_dir), "<work>"))
    return {
        "prompts": f"the first user turn of the first {settings.prompts} {EVAL_DATASET} conversations",
        "prompts_sha256": sha256_of(prompts),
        "prompt_count": measured.get("prompts"),
        "command": shown,
        **{key: measured.get(key) for key in _MEASURED_KEYS},
        "measured_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "measured_on": _machine(),
    }


def record_evaluation(head_dir: Path, evaluation: dict[str, Any]) -> dict[str, Any]:
    """Make ``evaluation`` the manifest's, keeping the one it replaces; return the manifest.

    Only a head whose files still match its manifest is re-described (a tampered head is refused
    as `make model` refuses it), and the manifest is replaced whole, never half-written."""
    manifest = _read(head_dir)
    earlier = manifest.get("evaluation")
    if earlier:
        manifest["earlier_evaluations"] = [*manifest.get("earlier_evaluations", []), earlier]
    manifest["evaluation"] = evaluation
    _write(head_dir, manifest)
    return manifest


def _read(head_dir: Path) -> dict[str, Any]:
    """The manifest of a head whose files still match it (a tampered head is refused)."""
    verify_shipped_head(head_dir)
    manifest: dict[str, Any] = json.loads((head_dir / MANIFEST).read_text())
    return manifest


def _write(head_dir: Path, manifest: dict[str, Any]) -> None:
    """Replaced whole, never half-written."""
    path = head_dir / MANIFEST
    partial = path.with_name(f".{path.name}.partial")
    partial.write_text(json.dumps(manifest, indent=2) + "\n")
    partial.replace(path)


def bind_to_model(head_dir: Path, model_dir: Path) -> list[str]:
    """Name this machine's build of the model as the head's target; return the files that differed.

    A head built elsewhere (a GPU image with another transformers) names that machine's
    conversion of the model: its config.json carries the transformers version, so jobs here
    would not find the head. The weights must be the same bytes; only the other files (config,
    tokenizer, chat template: written by the converting library) may differ, and the manifest
    keeps what the head was built against in ``target.built_against``."""
    manifest = _read(head_dir)
    target = manifest.get("target", {})
    built_against: dict[str, str] = dict(target.get("files", {}))
    here = model_fingerprint(model_dir)
    differing = differing_files(here, built_against)
    if not differing:
        return []
    weights = sorted(name for name in differing if name.endswith(".safetensors"))
    if weights:
        raise ShippedHeadRefusedError(
            f"{head_dir}: the weights of {model_dir} ({', '.join(weights)}) are not the ones the head "
            "was trained for: it cannot be bound to this model"
        )
    manifest["target"] = {**target, "files": here, "built_against": built_against}
    _write(head_dir, manifest)
    return differing


def summary_line(evaluation: dict[str, Any]) -> str:
    return (
        f"tau {evaluation['tau']:.2f}, speedup {evaluation['speedup']:.2f}x "
        f"({evaluation['tokens_per_s_plain']:.1f} -> {evaluation['tokens_per_s_spec']:.1f} tokens/s, "
        f"{evaluation['identical_outputs']} of {evaluation['prompt_count']} outputs identical) on "
        f"{evaluation['prompts']}, {evaluation['device']}"
    )


def openers(work_dir: Path, count: int) -> Path:
    """The first user turn of the first ``count`` chit-chat conversations, as a JSONL file in
    ``work_dir``: prompts unlike any training data (the shipped head's evaluation protocol)."""
    first_turns = [
        Conversation(messages=[conversation.messages[0]], source=conversation.source)
        for conversation in load_builtin(EVAL_DATASET)
        if conversation.messages and conversation.messages[0].role == "user"
    ][:count]
    path = work_dir / f"eval-{EVAL_DATASET}-openers.jsonl"
    write_conversations_jsonl(first_turns, path)
    return path


def _machine() -> dict[str, Any]:
    """Enough to tell two VMs apart: speed figures are only comparable on one machine."""
    import torch  # noqa: PLC0415 - the caller has loaded it already; kept off the module's import

    return {
        "cpu": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "platform": platform.platform(),
        "torch": torch.__version__,
        "gpu": torch.cuda.get_device_name() if torch.cuda.is_available() else None,
    }


def _cpu_model() -> str | None:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None
