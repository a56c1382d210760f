"""Training steps/s on SmolLM2: one process with T threads versus N processes with T/N threads.

    .venv/bin/python benchmarks/train_nproc.py [--model .cache/models/smollm2-135m-instruct]
        [--layouts 1x2 2x1] [--max-conversations 48] [--batch-tokens 2048]

Each layout (processes x threads) runs ``python -m trainer train --nproc P --num-threads T``
for two epochs of the same prepared data (code + maths prompts from ``prepare-data
humaneval champ``, not regenerated) and the same global batches. The first epoch computes
the target's features (a full forward of the 135M target per batch); the second reads them
from the feature cache, so it times the head alone. Printed: steps/s of each epoch and the
final loss, plus the load average before and after (the machine may be shared).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]


def _run(layout: str, args: argparse.Namespace, data_dir: Path, out: Path) -> dict[str, float]:
    processes, threads = (int(part) for part in layout.split("x"))
    command = [
        sys.executable, "-m", "trainer", "train",
        "--model", str(args.model), "--data", str(data_dir), "--out", str(out),
        "--max-conversations", str(args.max_conversations), "--max-length", "384",
        "--batch-tokens", str(args.batch_tokens), "--epochs", "2", "--ttt-steps", "3",
        "--checkpoint-every", "1000", "--eval-fraction", "0", "--draft-vocab-size", "8192",
        "--num-threads", str(threads), "--nproc", str(processes), "--no-resume",
    ]  # fmt: skip
    environment = {**os.environ, "OMP_NUM_THREADS": str(threads)}
    subprocess.run(command, check=True, cwd=REPO_ROOT, env=environment, capture_output=True)
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    # The first step of each epoch also pays for warm-up (allocation, the collectives' set-up).
    first = [r["step_seconds"] for r in rows if r["epoch"] <= 1.0][1:]
    second = [r["step_seconds"] for r in rows if r["epoch"] > 1.0][1:]
    return {
        "steps": len(rows),
        "epoch1_steps_per_s": 1.0 / statistics.mean(first),
        "epoch2_steps_per_s": 1.0 / statistics.mean(second),
        "final_loss": rows[-1]["loss"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", type=Path, default=REPO_ROOT / ".cache/models/smollm2-135m-instruct")
    parser.add_argument("--layouts", nargs="+", default=["1x2", "2x1"], help="PROCESSESxTHREADS")
    parser.add_argument("--max-conversations", type=int, default=48)
    parser.add_argument("--batch-tokens", type=int, default=2048)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        data_dir = Path(scratch) / "data"
        subprocess.run(
            [sys.executable, "-m", "trainer", "prepare-data", "humaneval", "champ", "--out", str(data_dir)],
            check=True,
            cwd=REPO_ROOT,
            capture_output=True,
        )
        for layout in args.layouts:
            load_before = os.getloadavg()[0]
            result = _run(layout, args, data_dir, Path(scratch) / layout)
            print(
                f"{layout}: {result['steps']:.0f} steps, epoch 1 (target features) "
                f"{result['epoch1_steps_per_s']:.3f} steps/s, epoch 2 (cached features) "
                f"{result['epoch2_steps_per_s']:.3f} steps/s, final loss {result['final_loss']:.3f}, "
                f"load average {load_before:.1f} -> {os.getloadavg()[0]:.1f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
