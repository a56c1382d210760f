#!/usr/bin/env bash
# ours.sh NAME MINUTES [extra trainer args...]: eaglenest's trainer on the protocol data, one
# thread, stopping by wall clock after MINUTES (everything included: load, tokenize, train, save).
#
# Trains on $BENCH_DIR/data/train.jsonl as written (--no-regenerate: no self-distillation, the
# same chats speculators trains on), 512 tokens, no hold-out (make_data.py split already),
# aux layers 2 15 27 and a 16384-token draft vocab and 3 TTT steps (speculators' settings);
# every other setting is the trainer's default, so pass any you want pinned as extra args.
# Writes $BENCH_DIR/runs/NAME/ (replaced; the head is NAME/eagle_model/) and
# $BENCH_DIR/runs/NAME.log (the trainer's output, then /usr/bin/time -v's resource report).
# Env: NICE (default 0: the recorded runs ran this unniced), and env.sh's BENCH_DIR, MODEL, MAIN_PY.
set -euo pipefail
source "$(dirname "$0")/env.sh"

if [ $# -lt 2 ]; then
  echo "usage: $0 NAME MINUTES [extra trainer args...]" >&2
  exit 2
fi
name=$1
minutes=$2
shift 2
out=$BENCH_DIR/runs/$name
rm -rf "$out"
mkdir -p "$BENCH_DIR/runs"
cd "$REPO"
OMP_NUM_THREADS=1 nice -n "${NICE:-0}" /usr/bin/time -v "$MAIN_PY" -m trainer train \
  --model "$MODEL" --data "$BENCH_DIR/data/train.jsonl" --out "$out" \
  --no-regenerate --max-length 512 --holdout-fraction 0 --aux-layer-ids 2 15 27 \
  --draft-vocab-size 16384 --ttt-steps 3 --time-budget-minutes "$minutes" --budget-clock wall \
  --num-threads 1 "$@" > "$BENCH_DIR/runs/$name.log" 2>&1
