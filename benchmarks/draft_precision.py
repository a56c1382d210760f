"""What the head's dtype buys batch-1 speculative decoding on this CPU: one table.

    .venv/bin/python benchmarks/draft_precision.py [--head heads/smollm2-135m-instruct] [--rounds 2]

The float32 target decodes the first ``--prompts`` chit-chat openers (the shipped head's
evaluation protocol: K=3, 64 new tokens, one thread) plainly and with the head drafting in
float32, then in bfloat16, alternating for ``--rounds`` rounds so drifts of the machine fall on
both. Each row: the head's dtype, tau, plain and speculative tokens/s, the speedup, the draft's
cost per round in milliseconds and in decode steps, and how many outputs equal plain decoding's
(all of them: the target verifies every draft). ``engine.heads.draft_precision`` chooses
bfloat16 only on a CPU with native bfloat16; elsewhere its row shows what emulation costs.
Run it on a quiet machine.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import torch
from transformers import AutoTokenizer

from engine.heads.draft_precision import native_cpu_bfloat16
from engine.heads.export import load_head
from speculative.decoder import SpeculativeDecoder
from speculative.evaluation import SpeedupReport, chat_prompts, compare
from trainer.data import load_conversations
from trainer.device import load_causal_lm
from worker.shipped_head_eval import EvalSettings, openers

REPO = Path(__file__).resolve().parents[1]
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", type=Path, default=REPO / ".cache/models/smollm2-135m-instruct")
    parser.add_argument("--head", type=Path, default=REPO / "heads/smollm2-135m-instruct")
    parser.add_argument("--prompts", type=int, default=EvalSettings.prompts, help="chit-chat openers")
    parser.add_argument("--k", type=int, default=EvalSettings.k)
    parser.add_argument("--max-new-tokens", type=int, default=EvalSettings.max_new_tokens)
    parser.add_argument("--threads", type=int, default=EvalSettings.threads)
    parser.add_argument("--rounds", type=int, default=2, help="float32 then bfloat16, this many times")
    return parser.parse_args()


def measure(args: argparse.Namespace, prompts: list[list[int]], dtype: torch.dtype) -> SpeedupReport:
    """Plain and speculative decoding of ``prompts`` with the head in ``dtype``."""
    target = load_causal_lm(args.model, device=torch.device("cpu"), dtype=torch.float32)
    head = load_head(args.head, target)
    decoder = SpeculativeDecoder(target, head, num_speculative_tokens=args.k, head_dtype=dtype)
    (report,) = compare(decoder, prompts, ks=[args.k], max_new_tokens=args.max_new_tokens)
    return report


def main() -> None:
    args = parse_args()
    torch.set_num_threads(args.threads)
    tokenizer = AutoTokenizer.from_pretrained(args.model)
    with tempfile.TemporaryDirectory() as work:
        conversations = load_conversations([openers(Path(work), args.prompts)]).conversations
    prompts = chat_prompts(tokenizer, conversations)
    print(
        f"{len(prompts)} chit-chat openers, K={args.k}, {args.max_new_tokens} new tokens, "
        f"{args.threads} thread(s), float32 target; native bfloat16 on this CPU: {native_cpu_bfloat16()}"
    )
    print(
        f"{'head':>9} {'round':>5} {'tau':>5} {'plain tok/s':>11} {'spec tok/s':>10} {'speedup':>7} "
        f"{'draft ms/round':>14} {'draft/decode':>12} {'same':>7}"
    )
    for round_ in range(1, args.rounds + 1):
        for name, dtype in DTYPES.items():
            r = measure(args, prompts, dtype)
            decode_ms = 1000 * r.plain.seconds_per_forward
            draft_ms = 1000 * r.draft_seconds_per_step
            print(
                f"{name:>9} {round_:>5} {r.tau:>5.2f} {r.plain.tokens_per_second:>11.2f} "
                f"{r.speculative.tokens_per_second:>10.2f} {r.speedup:>6.2f}x {draft_ms:>14.2f} "
                f"{draft_ms / decode_ms:>12.3f} {r.identical_outputs:>3}/{r.prompts:<3}",
                flush=True,
            )


if __name__ == "__main__":
    main()
