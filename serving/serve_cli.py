"""``python -m trainer serve``: the OpenAI-compatible batched server, with or without a head."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from types import FrameType

from trainer.cli import Subparsers, add_device_argument, add_model_and_head_arguments, add_threads_argument


def register(subparsers: Subparsers) -> None:
    parser = subparsers.add_parser(
        "serve",
        help="serve a model (and EAGLE-3 head) over an OpenAI-compatible HTTP API",
        description=(
            "Continuous-batching server with speculative decoding. Without --head it is plain "
            "decoding; with --head and no K flag, K adapts to acceptance and batch size. Prints "
            "'eaglenest serving on http://HOST:PORT' once it accepts requests."
        ),
    )
    add_model_and_head_arguments(parser, head_required=False)
    k_mode = parser.add_mutually_exclusive_group()
    k_mode.add_argument("--num-speculative-tokens", type=int, default=None, help="fixed K drafts per step")
    k_mode.add_argument("--adaptive", action="store_true", help="adapt K to acceptance and batch size")
    parser.add_argument("--max-batch-size", type=int, default=8, help="sequences per step (default 8)")
    add_device_argument(parser)
    add_threads_argument(parser)
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8000, help="port to bind (default 8000; 0 = any free)")
    parser.add_argument(
        "--served-model-name", default=None, help="model name in the API (default: the model dir's name)"
    )
    parser.set_defaults(handler=run_serve)


def run_serve(args: argparse.Namespace) -> int:
    if args.num_speculative_tokens is not None and args.num_speculative_tokens < 0:
        raise ValueError(f"--num-speculative-tokens must be >= 0, got {args.num_speculative_tokens}")
    if args.max_batch_size < 1:
        raise ValueError(f"--max-batch-size must be at least 1, got {args.max_batch_size}")
    if not 0 <= args.port <= 65535:
        raise ValueError(f"--port must be in 0..65535, got {args.port}")
    if args.threads is not None and args.threads < 1:
        raise ValueError(f"--threads must be at least 1, got {args.threads}")

    import torch  # noqa: PLC0415 - keeps --help fast

    from serving.server import start_server  # noqa: PLC0415
    from trainer.device import resolve_device  # noqa: PLC0415

    if args.threads is not None:
        torch.set_num_threads(args.threads)
    device = resolve_device(args.device)  # before loading anything: cuda without a GPU fails here

    stop = threading.Event()
    failures: list[str] = []

    def on_signal(_signum: int, _frame: FrameType | None) -> None:
        stop.set()

    def on_device_failure(reason: str) -> None:
        # The device runs nothing more: exit non-zero, so an endpoint's supervisor (which
        # replaces instances that exit) starts a new process, whose CUDA context is fresh.
        failures.append(reason)
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    from engine.heads.export import resolve_head_dir  # noqa: PLC0415

    with start_server(
        args.model,
        None if args.head is None else resolve_head_dir(args.head),
        num_speculative_tokens=args.num_speculative_tokens,
        adaptive=args.adaptive,
        max_batch_size=args.max_batch_size,
        host=args.host,
        port=args.port,
        served_model_name=args.served_model_name,
        device=device,
        on_device_failure=on_device_failure,
    ) as url:
        print(f"eaglenest serving on {url}", flush=True)
        stop.wait()
    if failures:
        print(f"eaglenest serve: {failures[0]}; exiting", file=sys.stderr, flush=True)
        return 1
    return 0
