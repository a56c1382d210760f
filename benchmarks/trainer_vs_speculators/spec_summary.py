"""Write and print ``OUT_DIR/summary.json`` of one run_speculators.sh run (its last step).

    python3 spec_summary.py OUT_DIR T0 T_DUMP_END T_TRAIN_END T_END BUDGET_S CHECKPOINT THREADS \\
        DUMP_FRACTION TRAIN_DATA_RATIO

The times are unix seconds taken by run_speculators.sh; the dump and training figures come from
the ``dump_stats.json`` and ``train_stats.json`` that dump_hidden.py and spec_train.py wrote.
Standard library only: it runs with any python3.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main() -> None:
    out, t0_arg, t_dump_arg, t_train_arg, t_end_arg, budget_arg, checkpoint, threads, fraction, ratio = (
        sys.argv[1:]
    )
    t0, t_dump, t_train, t_end, budget = map(float, (t0_arg, t_dump_arg, t_train_arg, t_end_arg, budget_arg))
    dump = json.loads(Path(out, "dump_stats.json").read_text())
    train = json.loads(Path(out, "train_stats.json").read_text())
    summary = {
        "budget_s": budget,
        "threads": int(threads),
        "dump_fraction": float(fraction),
        "dump_s": round(t_dump - t0, 2),
        "rows_dumped": dump["rows_dumped"],
        "tokens_dumped": dump["tokens_dumped"],
        "dump_tokens_per_s": dump["tokens_per_s"],
        "train_data_ratio": float(ratio),
        "train_s": round(t_train - t_dump, 2),
        "steps": train["steps"],
        "tokens_trained": train["tokens_trained"],
        "steps_per_epoch": train.get("steps_per_epoch"),
        "step_s_median": train.get("step_s_median"),
        "stopped_by": train.get("stopped_by"),
        "final_lr": train.get("last_lr"),
        "val_s": round(train.get("val_s", 0.0), 2),
        "checkpoint": checkpoint,
        "convert_s": round(t_end - t_train, 2),
        "wall_total_s": round(t_end - t0, 2),
        "head": f"{out}/head",
        "step_count_policy": "stop by wall clock; linear-schedule horizon re-estimated every step "
        "from the median of the last 20 step times",
    }
    Path(out, "summary.json").write_text(json.dumps(summary, indent=1))
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
