#!/usr/bin/env bash
# The GPU check's two uploads, run here on the CPU with only what the GPU image has: its torch
# (2.11, a CUDA build), transformers (5.17) and safetensors with their own dependencies, in a
# Python 3.12 venv, plus the wheels the uploads carry (.gpu/, scripts/gpu-payload.sh). The
# project's venv holds every package of the lock, so a wheel the uploads lack (as
# chitchat-dataset was until 2026-12-06) passes every test there and fails only on the GPU
# machine, after minutes of device time; here it fails at no cost.
#
# What differs from the GPU machine: DEVICE=cpu with the small settings of
# tests/benchmarks/test_gpu_check_on_cpu.py, stage.sh's nvidia-smi and CUDA lines left out (its
# tiny train and eval run on the CPU), and the CUDA tests skip. Like the uploads, it writes
# /tmp/site and /root/stage. The first run downloads about 3 GB (the CUDA build's wheels).
#
#   PYTHON312=/path/to/python3.12 OUT=/tmp/gpu-rehearsal bash scripts/gpu-image-rehearsal.sh
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON312=${PYTHON312:-python3.12}
VENV=${VENV:-.cache/gpu-image-venv}
export OUT=${OUT:-/tmp/gpu-rehearsal}

if [ ! -x "$VENV/bin/python3" ]; then
    "$PYTHON312" -m venv "$VENV"
    "$VENV/bin/pip" install -q torch==2.11.0 transformers==5.17.0 safetensors
fi
[ -d .gpu/data ] || bash scripts/gpu-payload.sh
rm -rf /tmp/site /root/stage "$OUT" && mkdir -p "$OUT"
# The image's python3 is the venv's; env.sh installs .gpu/whl and puts the project on PYTHONPATH.
export PATH="$(cd "$VENV/bin" && pwd):$PATH"

echo "rehearsal: upload 1 (stage.sh on the CPU)"
(
    . .gpu/bin/env.sh
    mkdir -p /root/stage && cp .gpu/a/part00 /root/stage/
    python3 -m trainer prepare-data humaneval --out "$OUT/data" > "$OUT/prep.log" 2>&1
    python3 -c "from trainer.models.tiny import write_tiny_target; write_tiny_target('LlamaForCausalLM', '$OUT/tiny')"
    python3 -m trainer train --model "$OUT/tiny" --data "$OUT/data" --out "$OUT/tiny-head" \
        --device cpu --regenerate --max-conversations 64 --max-steps 10 --no-resume --json > "$OUT/tiny_train.json"
    python3 -m trainer eval --model "$OUT/tiny" --head "$OUT/tiny-head" --prompts "$OUT/data" \
        --limit 4 --max-new-tokens 16 --device cpu --json "$OUT/tiny_eval.json" | tail -2
)

echo "rehearsal: upload 2 (run.sh, DEVICE=cpu)"
DEVICE=cpu MINUTES=0.3 ROWS=2 SELF_INSTRUCT=8 EVAL_LIMIT=2 EVAL_TOKENS=8 SPEED_TOKENS=16 SERVING_TOKENS=8 \
    SPEED_DTYPE=float32 SPEED_SECONDS=420 OPENERS=2 DEADLINE=1500 bash .gpu/bin/run.sh | tee "$OUT/run.log"
if grep -q "FAILED\|no manifest\|no engine table" "$OUT/run.log" "$OUT/gpu-check/summary.md"; then
    echo "rehearsal: a step failed on the image's packages (see $OUT/gpu-check/logs.txt)"
    exit 1
fi
echo "rehearsal: every step ran on the image's packages"
