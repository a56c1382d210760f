"""Speculative-decoding speedup of an EAGLE-3 head on SmolLM2-135M-Instruct, on this CPU.

    .venv/bin/python benchmarks/trainer_speedup.py [--head .cache/heads/smollm2-v1] \\
        [--prompts 16] [--max-new-tokens 128] [--ks 2 3 4 5 6] [--json out.json]

Greedy decoding, batch 1, 2 threads. Prompts are held out from training: the run's own
``heldout.jsonl`` when the head directory has one, otherwise ``--data`` split by
``split_holdout`` with the trainer's default fraction and seed (so the held-out side is
the one the trainer never sees). Per prompt, plain decoding runs once and speculative
decoding once per K, one right after the other on the same engine (warm-up excluded), so
a change in machine load hits every column alike.

Reported per K: tau (accepted drafts + 1 per verification), acceptance by position,
plain and speculative tokens/s, speedup, the head's share of the time and the cost of one
verification of K+1 tokens relative to one plain decode step. The closing lines say which
goal is met and, if not, what limits the speedup. Hugging Face ``generate`` is timed on a
few prompts too, on the stock model before the engine packs its weights, as a reference.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from pathlib import Path
from typing import Any

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedModel

from engine.drafting.replay import ReplayHead
from engine.drafting.tree_draft import TreeShape
from engine.heads.export import load_head, resolve_head_dir
from engine.heads.model import Eagle3DraftModel
from speculative import SpeculativeDecoder
from speculative.evaluation import SpeedupReport, chat_prompts, compare, format_table
from trainer.config import TrainConfig
from trainer.data import load_conversations, split_holdout

REPO = Path(__file__).resolve().parents[1]
GOAL_TAU, STRETCH_TAU = 3.5, 4.0
GOAL_SPEEDUP, STRETCH_SPEEDUP = 2.0, 2.5
HELDOUT_FILE = "heldout.jsonl"  # written by the trainer into its run directory


def parse_args() -> argparse.Namespace:
    fields = TrainConfig.model_fields
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", type=Path, default=REPO / ".cache/models/smollm2-135m-instruct")
    parser.add_argument(
        "--head",
        type=Path,
        default=REPO / ".cache/heads/smollm2-v1",
        help="head directory, or a training run directory holding eagle_model/ (and heldout.jsonl)",
    )
    parser.add_argument("--data", type=Path, nargs="+", default=[REPO / ".cache/data"], help="training data")
    parser.add_argument("--holdout-fraction", type=float, default=fields["holdout_fraction"].default)
    parser.add_argument("--split-seed", type=int, default=fields["seed"].default)
    parser.add_argument("--prompts", type=int, default=16, help="held-out prompts to decode")
    parser.add_argument("--max-new-tokens", type=int, default=128)
    parser.add_argument(
        "--max-prompt-tokens", type=int, default=1024, help="skip longer prompts (long chat histories)"
    )
    parser.add_argument("--ks", type=int, nargs="+", default=[2, 3, 4, 5, 6], help="draft lengths to sweep")
    parser.add_argument(
        "--trees",
        type=TreeShape.parse,
        nargs="*",
        default=[],
        help="draft tree shapes to sweep too, DEPTHxTOP_KxNODES (e.g. 5x4x16)",
    )
    parser.add_argument("--hf-prompts", type=int, default=3, help="prompts timed with HF generate (0: skip)")
    parser.add_argument(
        "--ceiling-prompts",
        type=int,
        default=0,
        help="also measure the engine's ceiling on N prompts: a replay head that proposes the target's "
        "own greedy continuation, so every draft is accepted (tau = K+1); 0 skips it",
    )
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--dtype", choices=["float32", "bfloat16"], default="float32")
    parser.add_argument("--json", type=Path, default=None, help="write every number here too")
    args = parser.parse_args()
    try:
        args.head_dir = resolve_head_dir(args.head)
    except ValueError as error:
        parser.error(f"--head {error}")
    return args


def heldout_conversations(args: argparse.Namespace) -> tuple[list[Any], str]:
    run_heldout = args.head / HELDOUT_FILE
    if run_heldout.is_file():
        return load_conversations([run_heldout]).conversations, f"{run_heldout} (the training run's own)"
    missing = [str(path) for path in args.data if not path.exists()]
    if missing:
        raise SystemExit(
            f"--data {' '.join(missing)}: not found (python -m trainer prepare-data ... --out DIR)"
        )
    loaded = load_conversations(args.data).conversations
    _, heldout = split_holdout(loaded, holdout_fraction=args.holdout_fraction, seed=args.split_seed)
    source = (
        f"split_holdout({', '.join(map(str, args.data))}, fraction={args.holdout_fraction}, "
        f"seed={args.split_seed}): {len(heldout)} of {len(loaded)} held out"
    )
    return heldout, source


def time_hf_generate(
    target: PreTrainedModel, prompts: list[list[int]], max_new_tokens: int
) -> tuple[float, list[list[int]]]:
    """Tokens/s of ``generate(do_sample=False)`` and its outputs (after one warm-up call)."""
    outputs: list[list[int]] = []
    tokens, seconds = 0, 0.0
    with torch.inference_mode():
        target.generate(torch.tensor([prompts[0]]), do_sample=False, max_new_tokens=4)  # type: ignore[operator]
        for prompt in prompts:
            started = time.perf_counter()
            generated = target.generate(  # type: ignore[operator]
                torch.tensor([prompt]), do_sample=False, max_new_tokens=max_new_tokens
            )
            seconds += time.perf_counter() - started
            outputs.append(generated[0, len(prompt) :].tolist())
            tokens += len(outputs[-1])
    return tokens / seconds, outputs


def ceiling(
    target: PreTrainedModel,
    head: Eagle3DraftModel,
    prompts: list[list[int]],
    ks: list[int],
    max_new_tokens: int,
) -> list[SpeedupReport]:
    """Speedups at tau = K+1: what the engine gives when every draft is right."""
    replay = ReplayHead.from_head(head)
    decoder = SpeculativeDecoder(target, replay)
    reports = [SpeedupReport(k=k, max_new_tokens=max_new_tokens) for k in ks]
    for index, prompt in enumerate([prompts[0], *prompts]):  # the first pass is a warm-up
        plain = decoder.generate_plain(prompt, max_new_tokens=max_new_tokens)
        replay.reference = prompt + plain.token_ids
        for report in reports:
            speculative = decoder.generate(
                prompt, max_new_tokens=max_new_tokens, num_speculative_tokens=report.k
            )
            if index > 0:
                report.add(plain, speculative)
    return reports


def verdict(reports: list[SpeedupReport]) -> list[str]:
    best = max(reports, key=lambda r: r.speedup)
    top_tau = max(r.tau for r in reports)
    lines = [
        f"best speedup {best.speedup:.2f}x at {best.label} "
        f"(goal {GOAL_SPEEDUP}x, stretch {STRETCH_SPEEDUP}x); "
        f"best tau {top_tau:.2f} (goal {GOAL_TAU}, stretch {STRETCH_TAU})",
        f"tau goal: {'met' if top_tau >= GOAL_TAU else 'NOT met'}; "
        f"speedup goal: {'met' if best.speedup >= GOAL_SPEEDUP else 'NOT met'}",
        f"what limits {best.label}: {best.limits()}",
    ]
    if best.speedup < GOAL_SPEEDUP:
        # The decode-only bound says which factor to work on: acceptance (tau) or cost (verify + draft).
        needed_tau = GOAL_SPEEDUP * (
            best.verify_cost_ratio + best.draft_seconds_per_step / best.plain.seconds_per_forward
        )
        prefill_share = best.speculative.prefill_seconds / best.speculative.seconds
        lines.append(
            f"at these costs {GOAL_SPEEDUP}x needs tau >= {needed_tau:.2f} (have {best.tau:.2f}); "
            f"prefill + bookkeeping take {100 * prefill_share:.1f}% + {100 * best.overhead_share:.1f}% "
            "of speculative time"
        )
    return lines


def main() -> int:
    args = parse_args()
    torch.set_num_threads(args.threads)
    head_dir: Path = args.head_dir
    tokenizer = AutoTokenizer.from_pretrained(args.model)
    conversations, source = heldout_conversations(args)
    every_prompt = chat_prompts(tokenizer, conversations)
    prompts = [prompt for prompt in every_prompt if len(prompt) <= args.max_prompt_tokens]
    source += f"; {len(every_prompt) - len(prompts)} prompts over {args.max_prompt_tokens} tokens skipped"
    random.Random(0).shuffle(prompts)  # mix the held-out sources instead of taking the first file's
    prompts = prompts[: args.prompts]
    if not prompts:
        raise SystemExit("no held-out prompt with a user turn")
    target = AutoModelForCausalLM.from_pretrained(args.model, dtype=getattr(torch, args.dtype))
    load_before = os.getloadavg()

    hf_prompts = prompts[: args.hf_prompts]
    hf_stock = hf_outputs = None
    if hf_prompts:
        hf_stock, hf_outputs = time_hf_generate(target, hf_prompts, args.max_new_tokens)
    head = load_head(head_dir, target)
    decoder = SpeculativeDecoder(target, head, num_speculative_tokens=max(args.ks))
    hf_packed = time_hf_generate(target, hf_prompts, args.max_new_tokens)[0] if hf_prompts else None
    plain_matches_hf = sum(
        decoder.generate_plain(prompt, max_new_tokens=args.max_new_tokens).token_ids == expected
        for prompt, expected in zip(hf_prompts, hf_outputs or [], strict=True)
    )

    def progress(done: int, reports: list[SpeedupReport]) -> None:
        speedups = " ".join(f"{r.label}: tau {r.tau:.2f} {r.speedup:.2f}x" for r in reports)
        print(f"[{done}/{len(prompts)}] {speedups}", file=sys.stderr, flush=True)

    reports = compare(
        decoder,
        prompts,
        ks=args.ks,
        trees=args.trees,
        max_new_tokens=args.max_new_tokens,
        on_prompt=progress,
    )
    ceilings = (
        ceiling(target, head, prompts[: args.ceiling_prompts], args.ks, args.max_new_tokens)
        if args.ceiling_prompts > 0
        else []
    )
    load_after = os.getloadavg()

    print(f"target {args.model} ({args.dtype}), head {head_dir}, threads {torch.get_num_threads()}")
    print(f"prompts: {len(prompts)} from {source}; greedy, batch 1, {args.max_new_tokens} new tokens max")
    print(f"load average before/after: {load_before[0]:.2f} / {load_after[0]:.2f} (2 cores; >1 means shared)")
    if hf_stock is not None:
        print(
            f"HF generate(do_sample=False): {hf_stock:.2f} tok/s stock model, {hf_packed:.2f} tok/s with the "
            f"engine's packed weights; engine plain decoding equals stock HF output on "
            f"{plain_matches_hf}/{len(hf_prompts)} prompts"
        )
    print()
    print(format_table(reports))
    print("speedup: tokens/s over whole calls (prefill included); median: of per-prompt speedups (steadier")
    print("under changing load); decode: tokens after the first over time after the prefill")
    print("verify/1: one verification (K+1 tokens, or a tree's nodes+1) over one plain decode step;")
    print("draft%: head's share of time; tree DxKxN: depth D, top-K children per node, N nodes verified")
    print()
    for line in verdict(reports):
        print(line)
    if ceilings:
        print()
        print(
            f"engine ceiling (replay head: drafts are the target's own greedy output, not a trained head), "
            f"{len(ceilings[0].prompt_speedups)} prompts:"
        )
        print(format_table(ceilings))
    if args.json is not None:
        payload = {
            "model": str(args.model),
            "head": str(head_dir),
            "dtype": args.dtype,
            "threads": torch.get_num_threads(),
            "prompt_source": source,
            "load_average": [load_before[0], load_after[0]],
            "hf_generate_tokens_per_s": hf_stock,
            "hf_generate_packed_tokens_per_s": hf_packed,
            "plain_equals_hf": [plain_matches_hf, len(hf_prompts)],
            "results": [report.to_json() for report in reports],
            "ceiling_replay_head": [report.to_json() for report in ceilings],
        }
        args.json.write_text(json.dumps(payload, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
