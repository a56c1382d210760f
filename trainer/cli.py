"""``python -m trainer <command>``: one argparse sub-command per feature module.

Each module listed in COMMAND_MODULES has ``register(subparsers)``, which adds its
parser and sets ``handler`` (a function taking the parsed args and returning an exit
code). Keep ``register`` light: import torch/transformers inside the handler, so
``--help`` and unrelated commands stay fast. To add a command, write such a module
and append its name here.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    Subparsers = argparse._SubParsersAction[argparse.ArgumentParser]
else:
    Subparsers = argparse._SubParsersAction

Handler = Callable[[argparse.Namespace], int]

COMMAND_MODULES: list[str] = [
    "trainer.models.commands",
    "trainer.data.commands",
    "trainer.train_cli",
    "speculative.eval_cli",
    "serving.serve_cli",
    "servebench.cli",
    "servebench.vllm_cpu.commands",
]

# Exit status for a bad request (bad input file, unknown name): distinct from a crash (1).
USAGE_ERROR = 2


def add_model_and_head_arguments(parser: argparse.ArgumentParser, *, head_required: bool) -> None:
    """``--model`` and ``--head``, as every command that runs a target with a head spells them."""
    parser.add_argument("--model", type=Path, required=True, help="target model directory (Hugging Face)")
    parser.add_argument(
        "--head",
        type=Path,
        required=head_required,
        default=None,
        help="EAGLE-3 head directory (native format), or the --out directory of `trainer train`",
    )


def add_device_argument(parser: argparse.ArgumentParser) -> None:
    """``--device`` as trainer.device resolves it (kept here: this module must not load torch)."""
    parser.add_argument(
        "--device",
        choices=("auto", "cpu", "cuda"),
        default="cpu",
        help="where the model and its KV cache run: cpu (default), cuda (an error without a GPU) or auto "
        "(cuda when torch sees a GPU, else cpu)",
    )


def add_threads_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m trainer", description="eaglenest trainer commands")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging and full tracebacks")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module_name in COMMAND_MODULES:
        importlib.import_module(module_name).register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO, format="%(asctime)s %(levelname)s %(message)s"
    )
    handler: Handler = args.handler
    try:
        return handler(args)
    except (ValueError, OSError) as exc:
        # Bad input is reported as one line naming what was wrong, not a traceback.
        if args.verbose:
            raise
        print(f"error: {exc}", file=sys.stderr)
        return USAGE_ERROR
