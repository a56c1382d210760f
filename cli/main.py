"""The `eaglenest` command.

Subcommands live in their own modules. To add one, append "module:function" to
SUBCOMMAND_REGISTRARS; the function receives argparse's subparsers and must set a
``handler`` default on each parser it adds: ``handler(args) -> exit code``.
"""

from __future__ import annotations

import argparse
import importlib
import logging
from collections.abc import Callable, Sequence
from typing import Any

SUBCOMMAND_REGISTRARS = [
    "cli.migrate:register",
    "cli.keys:register",
    "cli.roles:register",
    "cli.serve:register",
    # `up`, `worker` and `wait-for-services`: the embedded stack and the Celery worker.
    "stack.commands:register_stack_commands",
    # `datasets`: the built-in dataset catalog on S3 (jobs without TrainingDataSource).
    "worker.dataset_commands:register_dataset_commands",
    # `distillation-cache`: the conversations jobs distilled, kept for later jobs.
    "cli.distillation_cache:register",
    # `base-heads`: one Base EAGLE head per base model, trained on the built-in data.
    "cli.base_heads:register",
    # `client install-waiters`: the optimization-job waiter for `aws sagemaker wait`.
    "client.commands:register_client_commands",
]


def _load(registrar: str) -> Callable[[Any], None]:
    module_name, _, function_name = registrar.partition(":")
    function: Callable[[Any], None] = getattr(importlib.import_module(module_name), function_name)
    return function


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="eaglenest", description="Self-hosted SageMaker optimization jobs for EAGLE draft heads."
    )
    parser.add_argument("--log-level", default="INFO", help="logging level (default: INFO)")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for registrar in SUBCOMMAND_REGISTRARS:
        _load(registrar)(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    handler: Callable[[argparse.Namespace], int] = args.handler
    return handler(args)


if __name__ == "__main__":
    raise SystemExit(main())
