"""``python -m trainer prepare-data`` and ``python -m trainer check-data``."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from trainer.cli import Subparsers
from trainer.data.builtin import BUILTIN_DATASETS, CATALOG_FILE, prepare_builtin
from trainer.data.loader import load_conversations


def register(subparsers: Subparsers) -> None:
    prepare = subparsers.add_parser(
        "prepare-data",
        help="write built-in datasets as ShareGPT JSONL plus a catalog.json",
        description="Built-in datasets: "
        + "; ".join(f"{d.name}: {d.description}" for d in BUILTIN_DATASETS.values()),
    )
    prepare.add_argument("names", nargs="+", choices=sorted(BUILTIN_DATASETS), metavar="NAME")
    prepare.add_argument("--out", type=Path, required=True, help="output directory (created)")
    prepare.set_defaults(handler=run_prepare)

    check = subparsers.add_parser(
        "check-data",
        help="read data files the way a job would and print what was read and skipped",
    )
    check.add_argument("paths", nargs="+", type=Path, metavar="PATH", help="files or directories")
    check.add_argument(
        "--max-skip-fraction", type=float, default=1.0, help="fail when more than this fraction is skipped"
    )
    check.set_defaults(handler=run_check)


def run_prepare(args: argparse.Namespace) -> int:
    for entry in prepare_builtin(args.names, args.out):
        print(f"{args.out / entry.file}: {entry.records} records (sha256 {entry.sha256[:12]}...)")
    print(f"{args.out / CATALOG_FILE}: updated")
    return 0


def run_check(args: argparse.Namespace) -> int:
    result = load_conversations(args.paths, max_skip_fraction=args.max_skip_fraction)
    print(json.dumps(result.summary.to_dict(), indent=2, ensure_ascii=False))
    return 0
