#!/usr/bin/env bash
# eval.sh NAME HEAD_DIR [unlike|chat]: `trainer eval` of one head, K=3, 64 new tokens, one thread.
#
#   unlike (default): the 40 prompts unlike the training chats ($BENCH_DIR/data/eval40.jsonl,
#                     20 HumanEval + 20 CHAMP) -> $BENCH_DIR/runs/NAME.eval.json (+ .eval.log)
#   chat:             40 held-out chats ($BENCH_DIR/data/chat40.jsonl)
#                     -> $BENCH_DIR/runs/NAME.chat.json (+ .chat.log)
# HEAD_DIR is a head (speculators: OUT_DIR/head) or one of our training runs (runs/NAME).
# Env: NICE (default 0, as recorded), and env.sh's BENCH_DIR, MODEL, MAIN_PY.
set -euo pipefail
source "$(dirname "$0")/env.sh"

if [ $# -lt 2 ] || [ $# -gt 3 ]; then
  echo "usage: $0 NAME HEAD_DIR [unlike|chat]" >&2
  exit 2
fi
name=$1
head=$(realpath "$2")
case ${3:-unlike} in
  unlike) prompts=eval40.jsonl suffix=eval ;;
  chat) prompts=chat40.jsonl suffix=chat ;;
  *) echo "prompt set must be unlike or chat, not $3" >&2; exit 2 ;;
esac
mkdir -p "$BENCH_DIR/runs"
cd "$REPO"
OMP_NUM_THREADS=1 nice -n "${NICE:-0}" "$MAIN_PY" -m trainer eval --model "$MODEL" \
  --head "$head" --prompts "$BENCH_DIR/data/$prompts" --k 3 --max-new-tokens 64 --threads 1 \
  --json "$BENCH_DIR/runs/$name.$suffix.json" > "$BENCH_DIR/runs/$name.$suffix.log" 2>&1
