"""``python -m trainer eval``: tau and speedup of a head on a target, over a prompt file."""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path

from trainer.cli import Subparsers, add_device_argument, add_model_and_head_arguments, add_threads_argument

logger = logging.getLogger(__name__)

DTYPES = ("float32", "bfloat16")


def register(subparsers: Subparsers) -> None:
    parser = subparsers.add_parser(
        "eval",
        help="measure a draft head: tau, acceptance by position, plain vs speculative tokens/s",
        description=(
            "Greedy plain decoding and greedy EAGLE-3 speculative decoding of every prompt, on the "
            "same engine in the same run (warm-up excluded). A record's prompt is its conversation up "
            "to the last assistant turn, in the model's chat template with the generation prompt."
        ),
    )
    add_model_and_head_arguments(parser, head_required=True)
    parser.add_argument("--prompts", type=Path, required=True, help="data file in any supported format")
    parser.add_argument("--k", type=int, default=4, help="draft tokens per verification (default 4)")
    parser.add_argument(
        "--tree",
        default=None,
        metavar="DxKxN",
        help="draft a tree instead of a chain: depth D, top-K children per node, N nodes verified "
        "(e.g. 5x4x16); --k is then ignored",
    )
    parser.add_argument("--max-new-tokens", type=int, default=128, help="tokens generated per prompt")
    parser.add_argument("--limit", type=int, default=None, help="evaluate only the first N prompts")
    parser.add_argument(
        "--dtype",
        choices=DTYPES,
        default=None,
        help="dtype of target and head (default: float32 on CPU, bfloat16 on a GPU that supports it)",
    )
    add_device_argument(parser)
    add_threads_argument(parser)
    parser.add_argument("--json", type=Path, default=None, help="also write the results here as JSON")
    parser.set_defaults(handler=run_eval)


def run_eval(args: argparse.Namespace) -> int:
    for name in ("k", "max_new_tokens", "limit", "threads"):
        value = getattr(args, name)
        if value is not None and value < 1:
            raise ValueError(f"--{name.replace('_', '-')} must be at least 1, got {value}")
    for name in ("model", "head"):
        path: Path = getattr(args, name)
        if not path.is_dir():
            raise ValueError(f"--{name} {path}: not a directory")

    # Heavy imports here, not at the top: ``python -m trainer --help`` must stay fast.
    import torch  # noqa: PLC0415
    from transformers import AutoTokenizer  # noqa: PLC0415

    from engine.drafting.tree_draft import TreeShape  # noqa: PLC0415
    from engine.heads.export import load_head, resolve_head_dir  # noqa: PLC0415
    from speculative.decoder import SpeculativeDecoder  # noqa: PLC0415
    from speculative.evaluation import chat_prompts, compare, format_table  # noqa: PLC0415
    from trainer.data import load_conversations  # noqa: PLC0415
    from trainer.device import load_causal_lm, model_dtype, resolve_device  # noqa: PLC0415

    tree = TreeShape.parse(args.tree) if args.tree is not None else None
    head_dir = resolve_head_dir(args.head)
    device = resolve_device(args.device)  # before loading anything: cuda without a GPU fails here

    if args.threads is not None:
        torch.set_num_threads(args.threads)
    conversations = load_conversations([args.prompts]).conversations
    tokenizer = AutoTokenizer.from_pretrained(args.model)
    prompts = chat_prompts(tokenizer, conversations)[: args.limit]
    if not prompts:
        raise ValueError(f"--prompts {args.prompts}: no record has a user turn to use as a prompt")
    dtype = model_dtype(device, args.dtype)
    target = load_causal_lm(args.model, device=device, dtype=dtype)
    head = load_head(head_dir, target)
    decoder = SpeculativeDecoder(target, head, num_speculative_tokens=args.k)
    drafting = f"K={args.k}" if tree is None else f"tree {tree}"
    draft_dtype = str(decoder.head_dtype).removeprefix("torch.")
    logger.info(
        "evaluating %d prompts, %s, %d new tokens each, the head drafting in %s",
        len(prompts),
        drafting,
        args.max_new_tokens,
        draft_dtype,
    )
    ks, trees = ([args.k], []) if tree is None else ([], [tree])
    (report,) = compare(decoder, prompts, ks=ks, trees=trees, max_new_tokens=args.max_new_tokens)

    print(format_table([report]))
    print(report.limits())
    if args.json is not None:
        payload = {
            **report.to_json(),
            "dtype": str(dtype).removeprefix("torch."),
            "draft_dtype": draft_dtype,
            "device": str(device),
            "threads": torch.get_num_threads(),
        }
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(payload, indent=2) + "\n")
    return 0
