"""Where packed weights win on this CPU: GFLOP/s of each distinct linear layer of the target,
through ``F.linear`` (MKL's sgemm) and through oneDNN's packed layout (``PackedLinear``), at
decode-sized and prefill-sized row counts. ``engine.runner.MAX_PACKED_ROWS`` is set from it.

    .venv/bin/python benchmarks/packed_linear_speed.py [--rows 1 8 48 96 128 192 2048] [--repeats 5]

The model's own weights, fp32, random inputs. Each repeat times both kernels in turn (a noisy
neighbour hits both alike); prints the median GFLOP/s over the repeats, and packed/unpacked.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import torch
from torch import nn
from transformers import AutoModelForCausalLM

from engine.packed_linear import PackedLinear

REPO = Path(__file__).resolve().parents[1]


def seconds_per_call(function: Callable[[], torch.Tensor], calls: int) -> float:
    for _ in range(2):
        function()
    start = time.perf_counter()
    for _ in range(calls):
        function()
    return (time.perf_counter() - start) / calls


def distinct_layers(model: nn.Module) -> dict[str, nn.Linear]:
    """One linear layer per (in, out) shape, named by its attribute (q_proj, lm_head, ...)."""
    layers: dict[tuple[int, int], tuple[str, nn.Linear]] = {}
    for name, module in model.named_modules():
        if isinstance(module, nn.Linear):
            shape = (module.in_features, module.out_features)
            if shape not in layers:
                layers[shape] = (name.rsplit(".", 1)[-1], module)
            elif name.rsplit(".", 1)[-1] not in layers[shape][0]:
                layers[shape] = (f"{layers[shape][0]}/{name.rsplit('.', 1)[-1]}", module)
    return dict(layers.values())


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", type=Path, default=REPO / ".cache/models/smollm2-135m-instruct")
    parser.add_argument("--rows", type=int, nargs="+", default=[1, 8, 48, 96, 128, 192, 2048])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    model = AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.float32)
    print(f"{args.model.name}, fp32, {args.threads} threads; GFLOP/s unpacked / packed (ratio)\n")
    layers = distinct_layers(model)
    print(
        "| rows | "
        + " | ".join(f"{name} {m.in_features}x{m.out_features}" for name, m in layers.items())
        + " |"
    )
    print("|---" * (len(layers) + 1) + "|")
    with torch.inference_mode():
        for rows in args.rows:
            cells = []
            for linear in layers.values():
                packed = PackedLinear(linear)
                inputs = torch.randn(rows, linear.in_features)
                gflop = 2 * rows * linear.in_features * linear.out_features / 1e9
                calls = max(2, int(0.2 / max(gflop / 100, 1e-4)))
                plain, fast = [], []
                for _ in range(args.repeats):
                    plain.append(gflop / seconds_per_call(lambda: linear(inputs), calls))  # noqa: B023
                    fast.append(gflop / seconds_per_call(lambda: packed(inputs), calls))  # noqa: B023
                a, b = statistics.median(plain), statistics.median(fast)
                cells.append(f"{a:.0f} / {b:.0f} ({b / a:.2f}x)")
            print(f"| {rows} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
