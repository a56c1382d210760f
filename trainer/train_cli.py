"""``python -m trainer train``: train an EAGLE-3 head from the command line.

Every ``TrainConfig`` field is a flag (``--ttt-steps``, ``--no-regenerate``, ...) whose
help is the field's description, so the CLI can never lag behind the config; the four
paths have short names (``--model``, ``--data``, ``--out``, ``--init-head``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import types
import typing
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from trainer.cli import Subparsers
from trainer.config import TrainConfig
from trainer.eagle.reporting import TrainResult

# TrainConfig field -> flag, where the flag is not simply --field-name.
_FLAG_NAMES = {
    "model_dir": "--model",
    "data_paths": "--data",
    "out_dir": "--out",
    "init_head_dir": "--init-head",
}


def _flag(name: str) -> str:
    return _FLAG_NAMES.get(name, "--" + name.replace("_", "-"))


def _argument_options(annotation: Any) -> dict[str, Any]:
    """argparse options for a field's type: Optional[...] unwrapped, lists as nargs='+'."""
    args = typing.get_args(annotation)
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        annotation = next(arg for arg in args if arg is not type(None))
        args = typing.get_args(annotation)
    origin = typing.get_origin(annotation)
    if annotation is bool:
        return {"action": argparse.BooleanOptionalAction}
    if origin is list:
        return {"nargs": "+", "type": args[0]}
    if origin is typing.Literal:
        return {"choices": list(args)}
    return {"type": annotation}


def register(subparsers: Subparsers) -> None:
    parser = subparsers.add_parser(
        "train",
        help="train an EAGLE-3 (or, --variant eagle2, EAGLE-2) draft head for a target model",
        description="Train an EAGLE draft head; writes metrics.jsonl, checkpoints/ and eagle_model/ "
        "under --out.",
    )
    for name, field in TrainConfig.model_fields.items():
        options = _argument_options(field.annotation)
        metavar = None if "choices" in options or "action" in options else name.split("_")[-1].upper()
        parser.add_argument(
            _flag(name),
            dest=name,
            required=field.is_required(),
            default=argparse.SUPPRESS,
            help=(field.description or "").replace("%", "%%"),
            metavar=metavar,
            **options,
        )
    parser.add_argument(
        "--json", action="store_true", help="print the full result as JSON instead of a summary"
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    # Before torch loads OpenMP: idle threads sleep instead of spinning. On a CPU shared
    # with other processes, spinning threads fight for cores and a 2-thread matmul can
    # run several times slower than 1 thread; sleeping costs little when the CPU is free.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    # Imported here, not at the top: torch must not load for --help or other commands.
    from trainer.train import train  # noqa: PLC0415

    values = {name: getattr(args, name) for name in TrainConfig.model_fields if hasattr(args, name)}
    try:
        config = TrainConfig(**values)
    except ValidationError as exc:
        problems = "; ".join(
            f"{_flag(str(e['loc'][0])) if e['loc'] else 'config'}: {e['msg']}" for e in exc.errors()
        )
        raise ValueError(problems) from exc
    result = train(config, progress=_ProgressPrinter())
    if args.json:
        print(result.model_dump_json(indent=2))
    else:
        print(_summary(result))
    return 0


class _ProgressPrinter:
    """Stage changes, and a training line every 10 steps or 30 s, on stderr."""

    def __init__(self) -> None:
        self._stage = ""
        self._last = 0.0

    def __call__(self, event: Any) -> None:
        now = time.monotonic()
        if event.stage != self._stage:
            self._stage = event.stage
            print(f"[{event.elapsed_seconds:7.1f}s] {event.stage}", file=sys.stderr, flush=True)
        elif event.stage == "training" and (event.step % 10 == 0 or now - self._last > 30):
            accuracy = " ".join(f"{a:.2f}" for a in event.step_accuracy)
            eta = "" if event.eta_seconds is None else f" eta {event.eta_seconds:.0f}s"
            print(
                f"[{event.elapsed_seconds:7.1f}s] step {event.step}/{event.total_steps} "
                f"loss {event.loss:.3f} acc {accuracy} lr {event.lr:.2e} {event.tokens_per_s:.0f} tok/s{eta}",
                file=sys.stderr,
                flush=True,
            )
        elif event.stage != "training" and now - self._last > 30:
            print(
                f"[{event.elapsed_seconds:7.1f}s] {event.stage} {event.step}/{event.total_steps}",
                file=sys.stderr,
            )
        else:
            return
        self._last = now


def _summary(result: TrainResult) -> str:
    training, data, timing = result.training, result.data, result.timing
    evaluation = result.evaluation.best_eval or result.evaluation.final_eval
    stages = json.dumps({stage: round(seconds) for stage, seconds in timing.stage_seconds.items()})
    lines = [
        f"head:        {result.files.head_dir or '(not exported: run stopped; run again to resume)'}",
        f"steps:       {training.steps}/{training.total_steps} ({training.epochs_completed:.2f} epochs, "
        f"{training.stop_reason})",
        f"data:        {data.train_samples} train / {data.eval_samples} eval samples, "
        f"{data.conversations_heldout} conversations held out, "
        f"regeneration: {data.regeneration_mode}",
        f"draft vocab: {result.head.draft_vocab_size} tokens, "
        f"coverage {result.head.draft_vocab_coverage or 0:.3f}",
        f"speed:       {timing.train_tokens_per_s:.0f} tokens/s over {timing.tokens_trained} tokens",
        f"time:        {timing.seconds:.0f}s ({stages})",
    ]
    if evaluation is not None:
        accuracy = " ".join(f"{a:.3f}" for a in evaluation.step_accuracy)
        lines.append(
            f"held-out:    loss {evaluation.loss:.3f}, accuracy per draft position {accuracy}, "
            f"acceptance length estimate {evaluation.acceptance_length_estimate:.2f}"
        )
    lines.append(f"metrics:     {Path(result.files.metrics_path)}")
    return "\n".join(lines)
