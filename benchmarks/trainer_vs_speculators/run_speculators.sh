#!/usr/bin/env bash
# Measure speculators 0.9.0's EAGLE-3 trainer on CPU inside ONE wall-clock budget.
#
#   run_speculators.sh BUDGET_MINUTES OUT_DIR
#
# The budget starts when this script starts and covers: (a) the transformers hidden-state dump
# in speculators' offline format (rows of $BENCH_DIR/data/train_tokens.jsonl in file order,
# for DUMP_FRACTION of the budget), the HF dataset + token frequencies built with speculators'
# own functions; (b) `speculators train` (its cli.main, CPU-patched) for the rest, stopping by
# wall clock with the linear schedule's horizon re-estimated from measured step times;
# (c) conversion of the final checkpoint to eaglenest's native head in OUT_DIR/head;
# (d) OUT_DIR/summary.json.
#
# Env: THREADS (default 1), DUMP_FRACTION (0.3), TAIL_RESERVE_S (seconds kept at the end for
# the final checkpoint save + conversion, default 9), DUMP_FINALIZE_S (the dump's forwards stop
# this many seconds before the dump share ends, for the dataset/token-frequency build, default
# 4), STEP_TIME_GUESS (s/step used only for the schedule of the first 3 steps, default 0.75),
# DUMP_BATCH_TOKENS (512 = batch 1), HS_STORE_DTYPE (bfloat16: speculators casts hidden states
# to bf16 on load anyway), TRAIN_DATA_RATIO (speculators' train/val split of the dumped rows,
# its default 0.9; it validates on the rest at each epoch end; run_all.sh passes 0.99, as the
# recorded runs did), NICE (default 0, as recorded), and from env.sh: BENCH_DIR, MODEL, SPEC_PY, MAIN_PY;
# ROWS (default $BENCH_DIR/data/train_tokens.jsonl).
set -euo pipefail
source "$(dirname "$0")/env.sh"

if [ $# -ne 2 ]; then
  echo "usage: $0 BUDGET_MINUTES OUT_DIR" >&2
  exit 2
fi
T0=$(date +%s.%N)
BUDGET_MIN=$1
OUT=$(realpath -m "$2")
THREADS=${THREADS:-1}
DUMP_FRACTION=${DUMP_FRACTION:-0.3}
TAIL_RESERVE_S=${TAIL_RESERVE_S:-9}
DUMP_FINALIZE_S=${DUMP_FINALIZE_S:-4}
TRAIN_DATA_RATIO=${TRAIN_DATA_RATIO:-0.9}
STEP_TIME_GUESS=${STEP_TIME_GUESS:-0.75}
DUMP_BATCH_TOKENS=${DUMP_BATCH_TOKENS:-512}
HS_STORE_DTYPE=${HS_STORE_DTYPE:-bfloat16}
ROWS=${ROWS:-$BENCH_DIR/data/train_tokens.jsonl}
NICE=${NICE:-0}

export OMP_NUM_THREADS=$THREADS MKL_NUM_THREADS=$THREADS OPENBLAS_NUM_THREADS=$THREADS
export TOKENIZERS_PARALLELISM=false HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1
export PYTHONDONTWRITEBYTECODE=1 PYTHONWARNINGS=ignore

if [ -e "$OUT" ] && [ -n "$(ls -A "$OUT" 2>/dev/null)" ]; then
  echo "$OUT exists and is not empty" >&2
  exit 2
fi
mkdir -p "$OUT"
DATA=$OUT/spec_data
read -r BUDGET_S DUMP_DEADLINE TRAIN_DEADLINE < <(python3 -c "
b=float('$BUDGET_MIN')*60; t0=float('$T0')
print(b, t0+b*float('$DUMP_FRACTION')-float('$DUMP_FINALIZE_S'), t0+b-float('$TAIL_RESERVE_S'))")

echo "[run] budget ${BUDGET_S}s, dump forwards until +$(python3 -c "print(round($DUMP_DEADLINE-$T0,1))")s, train until +$(python3 -c "print(round($TRAIN_DEADLINE-$T0,1))")s, threads $THREADS"

# (a) hidden-state dump (transformers, fp32 target, file order) + dataset + token_freq.pt
nice -n "$NICE" "$SPEC_PY" "$SCRIPTS/dump_hidden.py" --model "$MODEL" --rows "$ROWS" --out "$DATA" \
  --deadline "$DUMP_DEADLINE" --threads "$THREADS" --batch-tokens "$DUMP_BATCH_TOKENS" \
  --store-dtype "$HS_STORE_DTYPE" --stats "$OUT/dump_stats.json" > "$OUT/dump.log" 2>&1
T_DUMP_END=$(date +%s.%N)
echo "[run] dump done: $(tr -d '\n ' < "$OUT/dump_stats.json")"

# (b) speculators training, classic EAGLE-3, default recipe; stop by wall clock
MAX_STEPS0=$(python3 -c "print(max(10, int(($TRAIN_DEADLINE - $T_DUMP_END - 15) / $STEP_TIME_GUESS)))")
set +e
THREADS=$THREADS nice -n "$NICE" "$SPEC_PY" "$SCRIPTS/spec_train.py" "$TRAIN_DEADLINE" "$OUT/train_stats.json" -- \
  --speculator-type eagle3 \
  --verifier-name-or-path "$MODEL" \
  --data-path "$DATA" \
  --save-path "$OUT/checkpoints" \
  --log-dir "$OUT/logs" \
  --draft-vocab-size 16384 \
  --ttt-steps 3 \
  --total-seq-len 512 \
  --train-data-ratio "$TRAIN_DATA_RATIO" \
  --no-norm-before-residual --no-norm-before-fc --no-norm-output \
  --draft-attn-impl sdpa \
  --loss-implementation eager \
  --num-workers 0 \
  --on-missing raise \
  --epochs 1000 \
  --max-steps "$MAX_STEPS0" \
  --no-resume-from-checkpoint \
  > "$OUT/train.log" 2>&1
TRAIN_RC=$?
set -e
T_TRAIN_END=$(date +%s.%N)
if [ $TRAIN_RC -ne 0 ]; then
  echo "[run] training failed (rc $TRAIN_RC), see $OUT/train.log" >&2
  tail -30 "$OUT/train.log" >&2
  exit 1
fi

# (c) convert the final checkpoint (highest epoch number) to the native head format
CKPT=$(ls -d "$OUT"/checkpoints/[0-9]* | awk -F/ '{print $NF" "$0}' | sort -n | tail -1 | cut -d' ' -f2)
nice -n "$NICE" "$MAIN_PY" "$SCRIPTS/convert_head.py" "$CKPT" "$OUT/head" --target "$MODEL" > "$OUT/convert.log" 2>&1
T_END=$(date +%s.%N)

# (d) summary
python3 "$SCRIPTS/spec_summary.py" "$OUT" "$T0" "$T_DUMP_END" "$T_TRAIN_END" "$T_END" "$BUDGET_S" "$CKPT" \
  "$THREADS" "$DUMP_FRACTION" "$TRAIN_DATA_RATIO"
