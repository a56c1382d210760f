#!/usr/bin/env bash
# .gpu/ for a GPU session (docs/engine.md, "Running the GPU check"): ../shared/gpu/make-payload.sh
# (the wheels the GPU image lacks for the trainer and the head build, and the model in two
# halves), plus the pure-Python wheels that steps 3 and 4 of scripts/gpu-check.sh import beyond
# that list: prometheus_client (the serving engine's counters, imported with serving/) and pytest
# with its own dependencies (the CUDA tests). Versions come from requirements.lock; env.sh on the
# GPU machine installs every wheel in .gpu/whl.
set -euo pipefail
cd "$(dirname "$0")/.."
bash ../shared/gpu/make-payload.sh
for pin in $(grep -E "^($(tr ' ' '|' < scripts/gpu-payload-extras.txt))==" requirements.lock); do
    python3 -m pip download -q --no-deps --only-binary=:all: -d .gpu/whl "$pin"
done
ls .gpu/whl
