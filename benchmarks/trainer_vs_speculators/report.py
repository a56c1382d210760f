"""One table of the protocol's results: tau and speedup of each head on both prompt sets.

    python3 benchmarks/trainer_vs_speculators/report.py [--bench-dir DIR] NAME...

NAME is a run as eval.sh named it (ours-default-12, spec-12, ...); its figures come from
``runs/NAME.eval.json`` (40 unlike prompts) and ``runs/NAME.chat.json`` (40 held-out chats).
For speculators runs the table adds how the budget went (``spec-runs/NAME/summary.json``).
A missing file shows as "-". Standard library only: it runs with any python3.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
PROMPT_SETS = (("eval", "unlike"), ("chat", "chat"))


def read_json(path: Path) -> dict[str, Any] | None:
    return json.loads(path.read_text()) if path.is_file() else None


def figure(result: dict[str, Any] | None, key: str, digits: int) -> str:
    if result is None or result.get(key) is None:
        return "-"
    return f"{result[key]:.{digits}f}"


def budget_note(summary: dict[str, Any] | None) -> str:
    if summary is None:
        return ""
    return (
        f"dump {summary['dump_s']:.0f} s ({summary['rows_dumped']} rows), "
        f"train {summary['train_s']:.0f} s ({summary['steps']} steps, {summary['stopped_by']})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("names", nargs="+", metavar="NAME")
    parser.add_argument("--bench-dir", type=Path, default=REPO / ".cache/peer-speculators")
    args = parser.parse_args()

    header = ["run"]
    for _, label in PROMPT_SETS:
        header += [f"tau {label}", f"speedup {label}"]
    header.append("speculators budget")
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for name in args.names:
        cells = [name]
        for suffix, _ in PROMPT_SETS:
            result = read_json(args.bench_dir / "runs" / f"{name}.{suffix}.json")
            cells += [figure(result, "tau", 3), figure(result, "speedup", 2)]
        cells.append(budget_note(read_json(args.bench_dir / "spec-runs" / name / "summary.json")))
        print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
