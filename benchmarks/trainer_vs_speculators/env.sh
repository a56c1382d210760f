# Sourced by the benchmark's scripts: where the repo, the benchmark's files and the models are.
# BENCH_DIR holds everything a run makes (data, the speculators venv, runs); it is made absolute
# here because the scripts cd into the repo before running the trainer.
SCRIPTS=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$SCRIPTS/../.." && pwd)
BENCH_DIR=$(realpath -m "${BENCH_DIR:-$REPO/.cache/peer-speculators}")
MODEL=${MODEL:-$REPO/.cache/models/smollm2-135m-instruct}
MAIN_PY=${MAIN_PY:-$REPO/.venv/bin/python}
SPEC_PY=${SPEC_PY:-$BENCH_DIR/spec-venv/bin/python}
export BENCH_DIR
