#!/usr/bin/env bash
# setup_spec_venv.sh: build the speculators 0.9.0 venv at $BENCH_DIR/spec-venv, CPU-patched.
#
# torch goes in first, pinned: speculators' own range (torch>=2.9,<=2.14.1) would otherwise let
# pip pick a multi-GB CUDA build. speculators is then resolved against that same torch
# (spec-constraints.txt). Env: PYTHON (default python3; the measured venv was CPython 3.11.7).
set -euo pipefail
source "$(dirname "$0")/env.sh"
PYTHON=${PYTHON:-python3}
VENV=$BENCH_DIR/spec-venv

if [ -e "$VENV" ]; then
  echo "$VENV exists; remove it to rebuild" >&2
  exit 2
fi
mkdir -p "$BENCH_DIR"
"$PYTHON" -m venv "$VENV"
"$VENV/bin/pip" install torch==2.13.0
"$VENV/bin/pip" install -c "$SCRIPTS/spec-constraints.txt" speculators==0.9.0
# speculators pulls torchvision and torchaudio, resolved to releases built for other torch
# versions; nothing here needs them (text only) and transformers imports torchvision when it is
# present, so a mismatched one can only break imports.
"$VENV/bin/pip" uninstall -y torchvision torchaudio
# The CPU patch: speculators' Trainer assumes an accelerator (synchronize, .to(local_rank)).
SITE=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
patch -p1 -d "$SITE" < "$SCRIPTS/speculators-cpu.patch"
"$VENV/bin/pip" list 2>/dev/null | grep -E '^(speculators|torch|transformers) '
