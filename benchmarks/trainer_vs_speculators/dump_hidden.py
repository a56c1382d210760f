"""Hidden-state dump for speculators 0.9.0's offline format, made with transformers (not vLLM).

Runs in the speculators venv (run_speculators.sh starts it):

    spec-venv/bin/python dump_hidden.py --model DIR --rows train_tokens.jsonl --out DATA_DIR \\
        [--deadline UNIX_TIME] [--threads 1] [--batch-tokens 512] [--stats dump_stats.json]

For each training row (in file order) writes ``hidden_states/hs_{i}.safetensors`` holding
``hidden_states`` [seq, 4, H] = inputs of target decoder layers 2, 15, 27 (vLLM's aux-layer
convention, = transformers ``output_hidden_states[i]``) plus the pre-norm output of the last
decoder layer, and ``token_ids`` [seq]. Then builds the HF dataset (input_ids, loss_mask,
seq_len) with speculators' own passthrough preprocessing and its token-frequency file, as
``speculators prepare-data`` would. Target runs in fp32; stops when the deadline comes.

Batching (default 512 = one row per forward, measured fastest on this CPU: 337 vs 190-234
tok/s for 2048-4096-token padded batches): consecutive rows (file order) are right-padded into
one batch of at most ``--batch-tokens`` padded tokens. With right padding and a causal mask,
real positions never see pad positions, so no attention mask is needed and real-token states
are exact.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save_file
from transformers import AutoModelForCausalLM, AutoTokenizer

Row = tuple[list[int], list[int]]  # (input_ids, loss_mask)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", required=True)
    parser.add_argument("--rows", required=True)
    parser.add_argument("--out", required=True, help="speculators data dir")
    parser.add_argument("--deadline", type=float, default=None, help="unix time to stop dumping")
    parser.add_argument("--max-rows", type=int, default=None)
    parser.add_argument("--max-len", type=int, default=512)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--batch-tokens", type=int, default=512)  # measured: batch 1 is fastest on CPU
    parser.add_argument("--layers", default="2,15,27")
    parser.add_argument("--store-dtype", default="bfloat16")
    parser.add_argument("--stats", default=None, help="write dump stats json here")
    parser.add_argument("--no-shuffle", action="store_true")
    return parser.parse_args()


def read_rows(path: str, max_len: int, max_rows: int | None) -> list[Row]:
    rows: list[Row] = []
    with open(path) as file:
        for line in file:
            record = json.loads(line)
            ids, mask = record["input_ids"][:max_len], record["loss_mask"][:max_len]
            assert len(ids) == len(mask)
            if sum(mask) == 0:  # speculators drops unsupervised rows
                continue
            rows.append((ids, mask))
            if max_rows and len(rows) >= max_rows:
                break
    return rows


def capture_hooks(body: torch.nn.Module, aux_ids: list[int], captured: dict[str, torch.Tensor]) -> None:
    """Record the inputs of the aux layers and the (pre-norm) output of the last decoder layer."""
    layers: Any = body.layers

    def pre_hook(name: str) -> Callable[[torch.nn.Module, tuple[Any, ...], dict[str, Any]], None]:
        def record_input(module: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
            captured[name] = (args[0] if args else kwargs["hidden_states"]).detach()

        return record_input

    def record_last(module: torch.nn.Module, args: tuple[Any, ...], output: Any) -> None:
        captured["last"] = (output[0] if isinstance(output, tuple) else output).detach()

    for i in aux_ids:
        layers[i].register_forward_pre_hook(pre_hook(f"aux{i}"), with_kwargs=True)
    layers[len(layers) - 1].register_forward_hook(record_last)


@dataclass
class Dumped:
    rows: int  # rows dumped, from the first in file order
    tokens: int
    padded_tokens: int
    forward_s: float


def dump_rows(
    body: torch.nn.Module,
    captured: dict[str, torch.Tensor],
    aux_ids: list[int],
    rows: list[Row],
    *,
    hs_dir: Path,
    args: argparse.Namespace,
) -> Dumped:
    """Forward consecutive rows in padded batches, saving each row's states as ``tmp_{i}``."""
    store_dtype = getattr(torch, args.store_dtype)
    done = 0
    tokens = 0
    padded = 0
    t_dump0 = time.time()
    batch_times: list[float] = []
    i = 0
    with torch.inference_mode():
        while i < len(rows):
            # consecutive rows, padded batch of <= batch_tokens
            j, maxlen = i, 0
            while j < len(rows):
                longest = max(maxlen, len(rows[j][0]))
                if j > i and longest * (j - i + 1) > args.batch_tokens:
                    break
                maxlen = longest
                j += 1
            batch = rows[i:j]
            ntok = sum(len(ids) for ids, _ in batch)
            if args.deadline is not None and batch_times:
                # predict this batch's time from the tokens/s so far; skip it if it overruns
                rate = padded / sum(batch_times)
                if time.time() + maxlen * len(batch) / rate > args.deadline:
                    break
            tb = time.time()
            ids = torch.zeros(len(batch), maxlen, dtype=torch.long)
            for b, (row_ids, _) in enumerate(batch):
                ids[b, : len(row_ids)] = torch.tensor(row_ids)
            body(input_ids=ids, use_cache=False)
            hs = torch.stack([captured[f"aux{k}"] for k in aux_ids] + [captured["last"]], dim=2)
            for b, (row_ids, _) in enumerate(batch):
                save_file(
                    {
                        "hidden_states": hs[b, : len(row_ids)].to(store_dtype).contiguous(),
                        "token_ids": torch.tensor(row_ids, dtype=torch.long),
                    },
                    str(hs_dir / f"tmp_{i + b}.safetensors"),
                )
            batch_times.append(time.time() - tb)
            done = j
            tokens += ntok
            padded += maxlen * len(batch)
            i = j
            if args.deadline is not None and time.time() > args.deadline:
                break
    return Dumped(rows=done, tokens=tokens, padded_tokens=padded, forward_s=time.time() - t_dump0)


def write_dataset(rows: list[Row], out: Path, hs_dir: Path, args: argparse.Namespace) -> None:
    """The HF dataset and token_freq.pt, exactly as speculators' prepare-data builds them for
    speculator-format rows; renames ``tmp_{i}`` to the dataset's (shuffled) order ``hs_{n}``."""
    # Imported only now, as in the measured runs: their import time falls in the finalize share
    # the deadline leaves (run_speculators.sh's DUMP_FINALIZE_S), not in the forwards.
    from datasets import Dataset  # type: ignore[import-untyped]  # noqa: PLC0415
    from speculators.data_generation.preprocessing import (  # type: ignore[import-not-found]  # noqa: PLC0415
        build_speculator_training_dataset,
    )
    from speculators.train.vocab_mapping import (  # type: ignore[import-not-found]  # noqa: PLC0415
        save_token_frequency_distribution,
    )

    tokenizer = AutoTokenizer.from_pretrained(args.model)
    raw = Dataset.from_dict(
        {
            "input_ids": [ids for ids, _ in rows],
            "loss_mask": [mask for _, mask in rows],
            "dump_idx": list(range(len(rows))),
        }
    )
    if not args.no_shuffle:  # prepare-data shuffles (seed 0) before hidden states are made
        raw = raw.shuffle(seed=0)
    order = list(raw["dump_idx"])
    raw = raw.remove_columns("dump_idx")
    dataset = build_speculator_training_dataset(raw, tokenizer, max_length=args.max_len, num_proc=1)
    assert len(dataset) == len(rows)
    for new, old in enumerate(order):
        os.replace(hs_dir / f"tmp_{old}.safetensors", hs_dir / f"hs_{new}.safetensors")
    dataset.save_to_disk(str(out))
    save_token_frequency_distribution(dataset, out / "token_freq.pt")


def main() -> None:
    args = parse_args()
    torch.set_num_threads(args.threads)

    t_start = time.time()
    out = Path(args.out)
    hs_dir = out / "hidden_states"
    hs_dir.mkdir(parents=True, exist_ok=True)
    aux_ids = [int(x) for x in args.layers.split(",")]
    rows = read_rows(args.rows, args.max_len, args.max_rows)

    model = AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.float32, attn_implementation="sdpa")
    model.eval()  # type: ignore[no-untyped-call]
    body: torch.nn.Module = model.model
    captured: dict[str, torch.Tensor] = {}
    capture_hooks(body, aux_ids, captured)
    t_model = time.time()

    dumped = dump_rows(body, captured, aux_ids, rows, hs_dir=hs_dir, args=args)
    write_dataset(rows[: dumped.rows], out, hs_dir, args)
    t_dump = dumped.forward_s
    stats = {
        "rows_available": len(rows),
        "rows_dumped": dumped.rows,
        "tokens_dumped": dumped.tokens,
        "padded_tokens": dumped.padded_tokens,
        "model_load_s": round(t_model - t_start, 2),
        "forward_s": round(t_dump, 2),
        "tokens_per_s": round(dumped.tokens / t_dump, 1) if t_dump > 0 else None,
        "total_s": round(time.time() - t_start, 2),
        "store_dtype": args.store_dtype,
        "batch_tokens": args.batch_tokens,
    }
    print(json.dumps(stats))
    if args.stats:
        Path(args.stats).write_text(json.dumps(stats, indent=1))


if __name__ == "__main__":
    main()
