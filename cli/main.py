"""The `eaglenest` command.

Subcommands live in their own modules. To add one, add its "module:function" and the command
names it adds to SUBCOMMAND_REGISTRARS; the function receives argparse's subparsers and must
set a ``handler`` default on each parser it adds: ``handler(args) -> exit code``.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from collections.abc import Callable, Sequence
from typing import Any

# The command names each registrar adds, so that running one command imports only its module:
# `eaglenest base-heads ship` then runs where the control plane's packages are not installed
# (a GPU image: ../shared/gpu/README.md). Help, or an unknown command, loads them all.
SUBCOMMAND_REGISTRARS = {
    "cli.migrate:register": ("migrate",),
    "cli.keys:register": ("keys",),
    "cli.roles:register": ("roles",),
    "cli.serve:register": ("api",),
    # `up`, `worker` and `wait-for-services`: the embedded stack and the Celery worker.
    "stack.commands:register_stack_commands": ("up", "worker", "wait-for-services"),
    # `datasets`: the built-in dataset catalog on S3 (jobs without TrainingDataSource).
    "worker.dataset_commands:register_dataset_commands": ("datasets",),
    # `distillation-cache`: the conversations jobs distilled, kept for later jobs.
    "cli.distillation_cache:register": ("distillation-cache",),
    # `base-heads`: one Base EAGLE head per base model, trained on the built-in data.
    "cli.base_heads:register": ("base-heads",),
    # `client install-waiters`: the optimization-job waiter for `aws sagemaker wait`.
    "client.commands:register_client_commands": ("client",),
}


def _load(registrar: str) -> Callable[[Any], None]:
    module_name, _, function_name = registrar.partition(":")
    function: Callable[[Any], None] = getattr(importlib.import_module(module_name), function_name)
    return function


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser with ``command``'s subcommand only, or with every one when None or unknown."""
    registrars = [registrar for registrar, commands in SUBCOMMAND_REGISTRARS.items() if command in commands]
    parser = argparse.ArgumentParser(
        prog="eaglenest", description="Self-hosted SageMaker optimization jobs for EAGLE draft heads."
    )
    parser.add_argument("--log-level", default="INFO", help="logging level (default: INFO)")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for registrar in registrars or SUBCOMMAND_REGISTRARS:
        _load(registrar)(subparsers)
    return parser


def requested_command(argv: Sequence[str] | None) -> str | None:
    """The command word of ``argv``: None when there is none, or help is asked for before it."""
    words = list(sys.argv[1:] if argv is None else argv)
    while words and words[0].startswith("-"):
        if words[0] in ("-h", "--help"):
            return None
        words = words[2:] if words[0] == "--log-level" else words[1:]
    return words[0] if words else None


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser(requested_command(argv)).parse_args(argv)
    logging.basicConfig(
        level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    handler: Callable[[argparse.Namespace], int] = args.handler
    return handler(args)


if __name__ == "__main__":
    raise SystemExit(main())
