"""What the teacher's feature pass costs on this machine, with the target's layer weights cast
by autocast on every pass and with bf16 copies made once (``trainer.eagle.autocast_weights``).

    .venv/bin/python benchmarks/feature_pass.py [--rows 3 --length 170 --rounds 3]

Times ``TargetTeacher.features`` (bf16 autocast, the aux layers a SmolLM2 head records) over one
random batch, alternating the two ways, and checks that both give the same features bit for
bit. Run it on a quiet machine.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM

from trainer.eagle.features import TargetTeacher

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", type=Path, default=REPO / ".cache/models/smollm2-135m-instruct")
    parser.add_argument("--rows", type=int, default=3)
    parser.add_argument("--length", type=int, default=170)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--passes", type=int, default=5, help="passes timed per round and way")
    args = parser.parse_args()
    target = AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.float32)  # in eval mode
    generator = torch.Generator().manual_seed(0)
    vocab = int(target.config.vocab_size)
    input_ids = torch.randint(100, vocab, (args.rows, args.length), generator=generator)
    mask = torch.ones_like(input_ids)
    layers = int(target.config.num_hidden_layers)
    aux = [2, layers // 2, layers - 3]
    lent = TargetTeacher(target, aux, draft_target_ids=torch.arange(8192), autocast_bf16=True)
    cast = TargetTeacher(target, aux, draft_target_ids=torch.arange(8192), autocast_bf16=True)
    cast._autocast_weights = None
    same = all(
        torch.equal(a, b)
        for a, b in zip(
            vars(lent.features(input_ids, mask)).values(),
            vars(cast.features(input_ids, mask)).values(),
            strict=True,
        )
    )
    times: dict[str, list[float]] = {"autocast casts the weights": [], "bf16 copies made once": []}
    for _ in range(args.rounds):
        for name, teacher in zip(times, (cast, lent), strict=True):
            started = time.perf_counter()
            for _ in range(args.passes):
                teacher.features(input_ids, mask)
            times[name].append((time.perf_counter() - started) / args.passes * 1000)
    tokens = args.rows * args.length
    threads = torch.get_num_threads()
    print(f"{args.model.name}, {tokens} tokens a pass, {threads} threads, same features: {same}\n")
    print("| feature pass | ms, each round | tokens/s (median) |\n|---|---|---|")
    for name, rounds in times.items():
        per_round = ", ".join(f"{ms:.0f}" for ms in rounds)
        print(f"| {name} | {per_round} | {tokens / statistics.median(rounds) * 1000:,.0f} |")


if __name__ == "__main__":
    main()
