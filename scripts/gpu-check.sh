#!/usr/bin/env bash
# The GPU benchmark (issue #30), within about 8 minutes of one CUDA GPU, ending in one table:
#   1. benchmarks/engine_speed.py: one sync, batch-1 decode ms/token, distillation reply
#      tokens/s with features at 64 and 256 rows (GPU utilisation), serving at 8 concurrent
#      plain and with the shipped head (K=3), the head's draft step at 1 and 8 sequences;
#   2. the CUDA-only tests (tests/engine/test_engine_cuda.py: decode, verify and draft-chain
#      graphs against eager steps, serving on the GPU, replies and features vs CPU);
#   3. a short job's head: MINUTES of wall clock, self-instruct prompts + chit-chat, then
#      `trainer eval` on HumanEval + CHAMP prompts (unlike its data), timed.
#
#   PY=/path/to/python MINUTES=3 OUT=dir scripts/gpu-check.sh
#
# Needs a CUDA build of torch in $PY's environment (`make venv` installs the CPU build: on a GPU
# machine use the image's own torch, with the project on PYTHONPATH: ../shared/gpu/README.md).
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PY:-.venv/bin/python}
OUT=${OUT:-gpu-check}
MINUTES=${MINUTES:-3}
SELF_INSTRUCT=${SELF_INSTRUCT:-20000}
MODEL=.cache/models/smollm2-135m-instruct
mkdir -p "$OUT"

"$PY" - <<'PYEOF'
import sys

import torch

if not torch.cuda.is_available():
    sys.exit(f"gpu-check: torch {torch.__version__} sees no CUDA GPU (no GPU, no driver, or a CPU-only build)")
print(f"gpu-check: torch {torch.__version__}, {torch.cuda.device_count()} x {torch.cuda.get_device_name(0)}")
PYEOF
test -f "$MODEL/config.json" || "$PY" -m trainer fetch-model smollm2-135m-instruct --out "$MODEL"

step() { echo "gpu-check: $* ($(date +%T))"; }

step "engine speed"
timeout 200 "$PY" benchmarks/engine_speed.py --model "$MODEL" --device cuda --dtype bfloat16 \
    --rows 64 256 --max-new-tokens 128 2>"$OUT/engine_speed.log" | tee "$OUT/engine_speed.md" || echo "gpu-check: engine speed FAILED (see engine_speed.log)"

step "CUDA tests"
timeout 120 "$PY" -m pytest tests/engine/test_engine_cuda.py -q -p no:cacheprovider > "$OUT/cuda_tests.txt" 2>&1 \
    && tail -1 "$OUT/cuda_tests.txt" || { tail -30 "$OUT/cuda_tests.txt"; echo "gpu-check: CUDA tests FAILED"; }

step "a ${MINUTES}-minute job: self-instruct + chit-chat, then eval on HumanEval + CHAMP"
test -d "$OUT/data" || "$PY" -m trainer prepare-data chitchat --out "$OUT/data" > /dev/null
test -d "$OUT/unlike" || "$PY" -m trainer prepare-data humaneval champ --out "$OUT/unlike" > /dev/null
"$PY" -m trainer train --model "$MODEL" --data "$OUT/data" --out "$OUT/run" --no-resume --device cuda \
    --self-instruct-conversations "$SELF_INSTRUCT" --time-budget-minutes "$MINUTES" --budget-clock wall \
    --json > "$OUT/train.json" 2> "$OUT/train.log" || { tail -30 "$OUT/train.log"; echo "gpu-check: training FAILED"; }
started=$(date +%s%N)
timeout 240 "$PY" -m trainer eval --model "$MODEL" --head "$OUT/run" --prompts "$OUT/unlike" --limit 40 --k 3 \
    --max-new-tokens 128 --device cuda --json "$OUT/eval.json" > "$OUT/eval.txt" 2>&1 \
    || { tail -20 "$OUT/eval.txt"; echo "gpu-check: eval FAILED or over 240 s"; }
echo "$(( ($(date +%s%N) - started) / 1000000 )) ms" > "$OUT/eval_seconds.txt"

step "summary"
"$PY" - "$OUT" <<'PYEOF'
import json
import sys
from pathlib import Path

out = Path(sys.argv[1])
print((out / "engine_speed.md").read_text() if (out / "engine_speed.md").exists() else "(no engine table)")
train = json.loads((out / "train.json").read_text()) if (out / "train.json").exists() else {}
flat = {**train, **{k: v for group in train.values() if isinstance(group, dict) for k, v in group.items()}}
evaluation = json.loads((out / "eval.json").read_text()) if (out / "eval.json").exists() else {}
seconds = (out / "eval_seconds.txt").read_text().strip() if (out / "eval_seconds.txt").exists() else "?"
rows = [
    ("job: conversations distilled", flat.get("regenerated_conversations")),
    ("job: distillation seconds", flat.get("regeneration_seconds")),
    ("job: training steps / tokens/s", f"{flat.get('steps')} / {flat.get('train_tokens_per_s')}"),
    ("eval (HumanEval + CHAMP, 40 x 128, K=3): seconds", seconds),
    ("eval: summary", {k: v for k, v in evaluation.items() if not isinstance(v, (list, dict))}),
]
print("| job figure | value |\n|---|---|")
for name, value in rows:
    print(f"| {name} | {value} |")
PYEOF
echo "gpu-check: done; results in $OUT/"
