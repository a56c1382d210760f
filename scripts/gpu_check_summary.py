"""The gpu-check's summary table from what its steps left in WORK and OUT (scripts/gpu-check.sh runs
it after every step, so a run cut short still brings back the tables of the steps it finished).

    python scripts/gpu_check_summary.py WORK OUT HEAD "EVAL_LIMIT x EVAL_TOKENS"
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

work, out, head, eval_shape = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3], sys.argv[4]


def read_json(path: Path) -> dict[str, Any]:
    """The file's object, or {} when there is none: a step stopped at its limit leaves its
    `--json` file empty (or cut short), and the other steps' rows must still be written."""
    try:
        value = json.loads(path.read_text()) if path.is_file() else {}
    except json.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}


def read_text(path: Path) -> str:
    return path.read_text().strip() if path.is_file() else "-"


def shown(*values: object) -> str:
    return " / ".join(
        (f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}") if isinstance(value, float) else str(value)
        for value in values
    )


engine = work / "engine_speed.md"
print(engine.read_text() if engine.is_file() and engine.read_text().strip() else "(no engine table)")
manifest = read_json(Path(head) / "manifest.json") if head else {}
train = read_json(work / "train.json")  # trainer train's report is flat
summary = manifest.get("data", {}).get("summary") or train
training = manifest.get("training") or train
budget = manifest.get("budget") or train
chat = manifest.get("evaluation", {})
unlike = read_json(out / "eval.json")
rows = [
    ("head build", "base-heads ship" if manifest else ("trainer train" if head else "none")),
    (
        "conversations distilled / seconds",
        shown(summary.get("regenerated_conversations"), summary.get("regeneration_seconds")),
    ),
    (
        "training steps / epochs / tokens/s",
        shown(training.get("steps"), training.get("epochs_completed"), budget.get("train_tokens_per_s")),
    ),
    (
        f"chit-chat openers ({chat.get('prompt_count', 0)} x {chat.get('max_new_tokens', 0)}): tau / speedup",
        shown(chat.get("tau"), chat.get("speedup")),
    ),
    (f"HumanEval + CHAMP ({eval_shape}, K=3): seconds", read_text(work / "eval_seconds")),
    (
        "HumanEval + CHAMP: tau / speedup / token agreement",
        shown(unlike.get("tau"), unlike.get("speedup"), unlike.get("token_agreement")),
    ),
]
print("| head figure | value |\n|---|---|")
for name, value in rows:
    print(f"| {name} | {value} |")
