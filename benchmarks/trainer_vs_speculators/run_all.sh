#!/usr/bin/env bash
# run_all.sh [--out DIR] BUDGET_MINUTES...: the whole protocol, once per budget (README.md).
#
#   benchmarks/trainer_vs_speculators/run_all.sh 12 24
#
# Builds what is missing first (the speculators venv, the protocol data), then per budget N:
#   1. ours-$OURS_TAG-N (ours.sh) and spec-N (run_speculators.sh) side by side, one thread
#      each: two processes on the two cores, so both runs see the same machine;
#   2. both heads on the 40 unlike prompts, side by side; then on the 40 held-out chats.
# Ends with report.py's table. Everything goes under DIR (default $BENCH_DIR, else
# .cache/peer-speculators/). Env: OURS_TAG (default "default"), OURS_ARGS (extra trainer
# args for ours.sh, e.g. "--context-loss"; default none), TRAIN_DATA_RATIO (default 0.99, as
# in the recorded spec-12/spec-24 runs; run_speculators.sh alone defaults to speculators' 0.9),
# and whatever ours.sh, run_speculators.sh and eval.sh read.
set -euo pipefail
if [ "${1:-}" = --out ]; then
  export BENCH_DIR=$2
  shift 2
fi
source "$(dirname "$0")/env.sh"

if [ $# -lt 1 ]; then
  echo "usage: $0 [--out DIR] BUDGET_MINUTES..." >&2
  exit 2
fi
TAG=${OURS_TAG:-default}
read -r -a EXTRA_TRAINER_ARGS <<< "${OURS_ARGS:-}"
export TRAIN_DATA_RATIO=${TRAIN_DATA_RATIO:-0.99}

# Prerequisites, checked before any run starts so a long protocol does not die halfway.
if [ ! -x "$MAIN_PY" ] || [ ! -d "$MODEL" ]; then
  echo "need eaglenest's venv ($MAIN_PY) and the target ($MODEL): run make venv model" >&2
  exit 2
fi
for minutes in "$@"; do
  spec_out=$BENCH_DIR/spec-runs/spec-$minutes
  if [ -n "$(ls -A "$spec_out" 2>/dev/null)" ]; then
    echo "$spec_out exists: move it away first (run_speculators.sh never overwrites)" >&2
    exit 2
  fi
done
[ -x "$SPEC_PY" ] || "$SCRIPTS/setup_spec_venv.sh"
if [ ! -s "$BENCH_DIR/data/train_tokens.jsonl" ] || [ ! -s "$BENCH_DIR/data/chat40.jsonl" ]; then
  "$MAIN_PY" "$SCRIPTS/make_data.py" --bench-dir "$BENCH_DIR" --model "$MODEL"
fi
mkdir -p "$BENCH_DIR/runs" "$BENCH_DIR/spec-runs"

# Waits for both background jobs; fails if either did (after both ended, so none is left running).
wait_both() {
  local failed=0
  wait "$1" || failed=1
  wait "$2" || failed=1
  if [ "$failed" -ne 0 ]; then
    echo "[all] a run failed: see its log under $BENCH_DIR/runs or $BENCH_DIR/spec-runs" >&2
  fi
  return "$failed"
}

names=()
for minutes in "$@"; do
  ours=ours-$TAG-$minutes
  spec=spec-$minutes
  names+=("$ours" "$spec")
  echo "[all] $(date -u +%T) $minutes min: training $ours and $spec"
  "$SCRIPTS/ours.sh" "$ours" "$minutes" "${EXTRA_TRAINER_ARGS[@]}" &
  ours_job=$!
  "$SCRIPTS/run_speculators.sh" "$minutes" "$BENCH_DIR/spec-runs/$spec" > "$BENCH_DIR/spec-runs/$spec.log" 2>&1 &
  wait_both "$ours_job" $!
  for prompt_set in unlike chat; do
    echo "[all] $(date -u +%T) $minutes min: evaluating both on $prompt_set prompts"
    "$SCRIPTS/eval.sh" "$ours" "$BENCH_DIR/runs/$ours" "$prompt_set" &
    ours_job=$!
    "$SCRIPTS/eval.sh" "$spec" "$BENCH_DIR/spec-runs/$spec/head" "$prompt_set" &
    wait_both "$ours_job" $!
  done
done
python3 "$SCRIPTS/report.py" --bench-dir "$BENCH_DIR" "${names[@]}"
