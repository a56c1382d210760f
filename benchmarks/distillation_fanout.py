"""Distillation throughput of one worker with 2 threads against two workers with 1 thread each,
and the fixed cost of one shard (a new process, imports, loading the target).

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/distillation_fanout.py [--conversations 64]

Each worker is its own process running ``trainer.distil.distil_shard`` on whole chunks of the
same plan, as a Celery shard task does (without the broker and S3, whose cost is in the fixed
cost's 'claim' line: the 0.5 s claim settle plus a few small S3 requests). Prints per layout
the wall time from launch until the last worker is done, generated tokens and tokens/s, and
checks that both layouts wrote the same records. Say the machine's load with the numbers: on
a shared machine, two single-thread workers and one two-thread worker compete differently.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from trainer.config import TrainConfig  # noqa: E402 - after the path, so the script runs from anywhere
from trainer.data.builtin import load_builtin  # noqa: E402
from trainer.data.formats.sharegpt import to_record  # noqa: E402
from trainer.data.schema import Conversation, Message  # noqa: E402
from trainer.distil import distil_shard, plan_distillation  # noqa: E402


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", type=Path, default=REPO / ".cache/models/smollm2-135m-instruct")
    parser.add_argument("--datasets", nargs="+", default=["chitchat", "humaneval", "champ"])
    parser.add_argument("--conversations", type=int, default=64, help="taken evenly from the datasets")
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--batch-size", type=int, default=4, help="chunks are 8 batches")
    parser.add_argument("--max-prompt-tokens", type=int, default=128, help="context kept per reply")
    parser.add_argument("--shard", type=Path, help=argparse.SUPPRESS)  # internal: run one worker
    return parser.parse_args()


def config_for(args: argparse.Namespace, data: Path, out: Path, threads: int) -> TrainConfig:
    return TrainConfig(
        model_dir=args.model,
        data_paths=[data],
        out_dir=out,
        regenerate=True,
        regenerate_turns="last",
        regenerate_max_new_tokens=args.max_new_tokens,
        regenerate_batch_size=args.batch_size,
        regenerate_max_prompt_tokens=args.max_prompt_tokens,
        holdout_fraction=0.0,
        num_threads=threads,
    )


def run_worker(job: Path) -> None:
    """One worker process: distil its shard, write the records and timings beside the job file."""
    started = time.monotonic()
    spec = json.loads(job.read_text())
    config = TrainConfig.model_validate(spec["config"])
    conversations = [
        Conversation([Message(m["role"], m["content"]) for m in c["messages"]], c["source"])
        for c in spec["conversations"]
    ]
    outcome = distil_shard(
        config,
        conversations,
        first_chunk=spec["first_chunk"],
        chunk_size=spec["chunk_size"],
        origins=spec["origins"],
        progress=lambda _done: None,
        should_stop=lambda: False,
    )
    job.with_suffix(".out.json").write_text(
        json.dumps(
            {
                "records": [r.to_json() for r in outcome.records],
                "tokens": outcome.generated_tokens,
                "distil_seconds": outcome.seconds,
                "process_seconds": time.monotonic() - started,
            }
        )
    )


def launch(jobs: list[Path]) -> tuple[float, list[dict[str, Any]]]:
    """Start one process per shard at once; wall seconds until the last one is done."""
    started = time.monotonic()
    env = {**os.environ, "OMP_NUM_THREADS": "1"}  # torch.set_num_threads sets each worker's own
    processes = [subprocess.Popen([sys.executable, __file__, "--shard", str(job)], env=env) for job in jobs]
    for process in processes:
        if process.wait() != 0:
            raise SystemExit(f"a worker failed with {process.returncode}")
    wall = time.monotonic() - started
    return wall, [json.loads(job.with_suffix(".out.json").read_text()) for job in jobs]


def write_jobs(
    directory: Path,
    config: TrainConfig,
    conversations: list[Conversation],
    *,
    origins: dict[str, str],
    chunk: int,
    shards: int,
) -> list[Path]:
    per_shard = -(-len(conversations) // chunk // shards) * chunk
    jobs = []
    for index, start in enumerate(range(0, len(conversations), per_shard)):
        part = conversations[start : start + per_shard]
        job = directory / f"shard-{index}.json"
        job.write_text(
            json.dumps(
                {
                    "config": config.model_dump(mode="json"),
                    "conversations": [{"messages": c.as_dicts(), "source": c.source} for c in part],
                    "first_chunk": start // chunk,
                    "chunk_size": chunk,
                    "origins": origins,
                }
            )
        )
        jobs.append(job)
    return jobs


def main() -> None:
    args = parse_args()
    if args.shard is not None:
        run_worker(args.shard)
        return
    per_dataset = -(-args.conversations // len(args.datasets))
    conversations = [c for name in args.datasets for c in load_builtin(name)[:per_dataset]][
        : args.conversations
    ]
    with tempfile.TemporaryDirectory() as temporary:
        root = Path(temporary)
        data = root / "data.jsonl"
        data.write_text("".join(json.dumps(to_record(c)) + "\n" for c in conversations))
        plan = plan_distillation(config_for(args, data, root / "plan", 1), should_stop=lambda: False)
        print(
            f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs; {len(plan.conversations)} "
            f"conversations, {args.max_new_tokens} new tokens at most after at most {args.max_prompt_tokens} "
            f"context tokens, batches of {args.batch_size}"
        )
        results = {}
        for layout, workers, threads in (("1 worker x 2 threads", 1, 2), ("2 workers x 1 thread", 2, 1)):
            directory = root / f"{workers}x{threads}"
            directory.mkdir()
            config = config_for(args, data, directory / "run", threads)
            jobs = write_jobs(
                directory,
                config,
                plan.conversations,
                origins=plan.origins,
                chunk=plan.chunk_size,
                shards=workers,
            )
            wall, outputs = launch(jobs)
            tokens = sum(output["tokens"] for output in outputs)
            results[layout] = [record for output in outputs for record in output["records"]]
            slowest = max(output["process_seconds"] for output in outputs)
            distilling = max(output["distil_seconds"] for output in outputs)
            print(
                f"{layout}: {tokens} tokens in {wall:.1f} s wall = {tokens / wall:.1f} tokens/s "
                f"(slowest worker {slowest:.1f} s, of which distilling {distilling:.1f} s; "
                f"load average now {os.getloadavg()[0]:.2f})"
            )
        same = results["1 worker x 2 threads"] == results["2 workers x 1 thread"]
        print(f"records identical in both layouts: {same}")
        job = root / "shard-empty.json"
        empty_config = config_for(args, data, root / "empty", 1).model_dump(mode="json")
        job.write_text(
            json.dumps({"config": empty_config, "conversations": [], "first_chunk": 0, "origins": {}})
        )
        empty = [job]
        wall, _ = launch(empty)
        print(f"fixed cost of a shard (process start, imports, loading the target): {wall:.1f} s")


if __name__ == "__main__":
    main()
