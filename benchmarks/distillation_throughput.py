"""What distillation (the target writing each training reply) yields per CPU-minute: fixed
batches through ``generate``, continuous batching on the exact packed path (``generate_packed``,
attention sequence by sequence) and on the engine's slot pool (``generate_batched``, one
attention call per layer; the default).

    .venv/bin/python benchmarks/distillation_throughput.py [--conversations 96] [--max-new-tokens 128]

The same contexts (the first N conversations of the built-in datasets, cut as training cuts
them, shortest prompt first as training orders them) are answered greedily in each mode with
the features the head trains on recorded, as ``trainer train --regenerate`` does. Prints, per
mode: replies, generated tokens, wall and process CPU seconds, replies per CPU-minute,
generated tokens per CPU-second, and how many replies are identical to the other mode's.
Run it on a quiet machine: CPU seconds of a busy machine include threads spinning on a core
someone else holds.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from trainer.data.builtin import load_builtin
from trainer.eagle.continuation import ContinuationResult, context_of, continue_conversations

REPO = Path(__file__).resolve().parents[1]
AUX_LAYERS = [2, 14, 26]


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", type=Path, default=REPO / ".cache/models/smollm2-135m-instruct")
    parser.add_argument("--datasets", nargs="+", default=["chitchat", "humaneval", "champ"])
    parser.add_argument("--conversations", type=int, default=96, help="taken evenly from the datasets")
    parser.add_argument("--max-new-tokens", type=int, default=128)
    parser.add_argument("--max-prompt-tokens", type=int, default=256)
    parser.add_argument("--batch-size", type=int, default=48)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument(
        "--modes", nargs="+", choices=["fixed", "packed", "batched"], default=["packed", "batched"]
    )
    parser.add_argument("--device", default="cpu", help="cpu or cuda")
    parser.add_argument("--dtype", choices=["float32", "bfloat16"], default="float32")
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    torch.set_num_threads(args.threads)
    tokenizer = AutoTokenizer.from_pretrained(args.model)
    model = AutoModelForCausalLM.from_pretrained(args.model, dtype=getattr(torch, args.dtype))
    model = model.to(args.device).eval()
    per_dataset = -(-args.conversations // len(args.datasets))
    conversations = [c for name in args.datasets for c in load_builtin(name)[:per_dataset]]
    contexts = [context_of(c, tokenizer, max_prompt_tokens=args.max_prompt_tokens) for c in conversations]
    ordered = sorted((c for c in contexts if c is not None), key=lambda c: len(c.prompt_ids))
    prompt_tokens = sum(len(c.prompt_ids) for c in ordered)
    print(
        f"{len(ordered)} contexts ({prompt_tokens} prompt tokens), batch {args.batch_size}, "
        f"up to {args.max_new_tokens} new tokens, {args.threads} threads, greedy, features recorded\n"
    )
    results: dict[str, ContinuationResult] = {}
    print(
        "| mode | replies | generated tokens | cut at cap | wall s | CPU s | replies/CPU-min | tokens/CPU-s |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for mode in args.modes:
        wall, cpu = time.perf_counter(), time.process_time()
        result = continue_conversations(
            model,
            tokenizer,
            ordered,
            max_new_tokens=args.max_new_tokens,
            batch_size=args.batch_size,
            feature_layers=AUX_LAYERS,
            continuous=mode != "fixed",
            exact=mode == "packed",
        )
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        results[mode] = result
        replies = len(result.conversations)
        print(
            f"| {mode} | {replies} | {result.generated_tokens} | {result.cut_at_max_new_tokens} | "
            f"{wall:.1f} | {cpu:.1f} | {60 * replies / cpu:.1f} | {result.generated_tokens / cpu:.1f} |"
        )
    modes = list(results)
    for other in modes[1:]:
        same = sum(
            a.messages[-1] == b.messages[-1]
            for a, b in zip(results[modes[0]].conversations, results[other].conversations, strict=True)
        )
        print(f"\nidentical replies, {modes[0]} and {other}: {same}/{len(results[modes[0]].conversations)}")


if __name__ == "__main__":
    main()
