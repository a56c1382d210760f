"""Chained optimization jobs on one model, through the real pipeline (issue #13's measurement).

Starts ``eaglenest up`` in a fresh state directory (its distillation cache on), publishes the
built-in datasets named by ``--datasets``, uploads SmolLM2, registers it, then runs ``--jobs``
optimization jobs one after the other, each ``--minutes`` CPU-minutes of distilling and training
at one thread (``budget_clock cpu``) with ``EAGLE_SELF_INSTRUCT_CONVERSATIONS`` prompts and no
TrainingDataSource. Job i+1's model source is job i's output model, so it continues job i's head
(its ``eagle_model`` channel) and reuses every reply the earlier jobs distilled (same key in the
cache). Each job's head is downloaded to ``OUT/job-<i>/eagle_model`` for ``trainer eval``, and
its lineage and benchmark recommendation are printed as a table.

    .venv/bin/python benchmarks/chained_jobs.py --out /tmp/chained --jobs 3 --minutes 30
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import boto3

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from stack.ports import free_port  # noqa: E402
from stack.stack_file import StackInfo, read_stack_file, stack_file_path  # noqa: E402

MODEL_DIR = ROOT / ".cache" / "models" / "smollm2-135m-instruct"
ROLE = "arn:aws:iam::000000000000:role/SageMakerRole"
TERMINAL = {"COMPLETED", "FAILED", "STOPPED"}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--jobs", type=int, default=3)
    parser.add_argument("--minutes", type=float, default=30.0, help="CPU-minutes per job")
    parser.add_argument("--self-instruct", type=int, default=1000, help="prompts the target writes per job")
    parser.add_argument("--datasets", nargs="+", default=["chitchat"], help="built-in datasets")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument(
        "--continue-from",
        metavar="MODEL",
        default=None,
        help="in an --out of an earlier run: go on from this job output model (e.g. after a code change), "
        "with the same stack state and distillation cache",
    )
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    summary = args.out / "chained.json"
    rows: list[dict[str, Any]] = json.loads(summary.read_text()) if summary.exists() else []
    # Continuing, the next job is numbered after the heads already downloaded under --out.
    first = len(list(args.out.glob("job-*"))) + 1 if args.continue_from else 1
    with running_stack(args.out / "state", operator_settings(args)) as info:
        s3 = client(info, "s3", info.s3_endpoint_url)
        sagemaker = client(info, "sagemaker", info.api_url)
        if args.continue_from is None:
            publish_datasets(info, args.datasets)
            upload_model(s3)
        source = args.continue_from or "smollm2"
        for index in range(first, first + args.jobs):
            name = f"chained-{index}-{time.strftime('%H%M%S')}"
            started = time.monotonic()
            job = run_job(sagemaker, name, source, args)
            wall = time.monotonic() - started
            if job["OptimizationJobStatus"] != "COMPLETED":
                print(json.dumps(job, default=str, indent=2), file=sys.stderr)
                return 1
            rows.append(collect(s3, name, args.out / f"job-{index}", wall))
            print(row_line(index, rows[-1]), flush=True)
            source = f"{name}-model"
            summary.write_text(json.dumps(rows, indent=2))
    print(table(rows))
    return 0


def operator_settings(args: argparse.Namespace) -> dict[str, str]:
    threads = args.threads
    return {
        # The job's budget in CPU-minutes of one thread, as docs/measurements.md's recipe table measures.
        "EAGLENEST_TRAIN_OVERRIDES": json.dumps({"num_threads": threads, "budget_clock": "cpu"}),
        # A short benchmark: the head's speed is measured by `trainer eval` afterwards.
        "EAGLENEST_BENCHMARK_OVERRIDES": json.dumps(
            {
                "max_prompts": 8,
                "requests_per_level": 8,
                "max_tokens": 64,
                "concurrency": [1],
                "k_sweep": [3],
                "num_threads": threads,
            }
        ),
        # The Base EAGLE row is not what is measured here: a half-minute head on the data as is.
        "EAGLENEST_BASE_HEAD_TRAIN_MINUTES": "0.5",
        "EAGLENEST_BASE_HEAD_TRAIN_OVERRIDES": json.dumps(
            {"regenerate": False, "self_instruct_conversations": 0}
        ),
    }


class running_stack:  # noqa: N801 - used as a context manager like open()
    def __init__(self, state_dir: Path, settings: dict[str, str]) -> None:
        self.state_dir = state_dir
        self.settings = settings

    def __enter__(self) -> StackInfo:
        env = {key: value for key, value in os.environ.items() if not key.startswith("EAGLENEST_")}
        env.update(self.settings)
        self.log = (self.state_dir.parent / "up.log").open("wb")
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "cli.main",
                "up",
                "--state-dir",
                str(self.state_dir),
                "--port",
                str(free_port()),
                "--s3-port",
                "0",
            ],
            cwd=ROOT,
            env=env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 180
        while not stack_file_path(self.state_dir).exists():
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"eaglenest up did not start; see {self.log.name}")
            time.sleep(0.5)
        return read_stack_file(self.state_dir)

    def __exit__(self, *exc: object) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            self.process.wait(timeout=120)
        self.log.close()


def client(info: StackInfo, service: str, endpoint: str) -> Any:
    return boto3.client(
        service,
        endpoint_url=endpoint,
        region_name=info.region,
        aws_access_key_id=info.aws_access_key_id,
        aws_secret_access_key=info.aws_secret_access_key,
    )


def publish_datasets(info: StackInfo, names: list[str]) -> None:
    env = {
        **os.environ,
        "EAGLENEST_S3_ENDPOINT_URL": info.s3_endpoint_url,
        "EAGLENEST_S3_ACCESS_KEY_ID": info.aws_access_key_id,
        "EAGLENEST_S3_SECRET_ACCESS_KEY": info.aws_secret_access_key,
    }
    subprocess.run(
        [sys.executable, "-m", "cli.main", "datasets", "publish", *names], cwd=ROOT, env=env, check=True
    )


def upload_model(s3: Any) -> None:
    s3.create_bucket(Bucket="models")
    s3.create_bucket(Bucket="output")
    for path in sorted(MODEL_DIR.iterdir()):
        if path.is_file():
            s3.upload_file(str(path), "models", f"smollm2/{path.name}")


def run_job(sagemaker: Any, name: str, source: str, args: argparse.Namespace) -> dict[str, Any]:
    if source == "smollm2":
        sagemaker.create_model(
            ModelName=source,
            ExecutionRoleArn=ROLE,
            PrimaryContainer={
                "Image": "vllm/vllm-openai:latest",
                "ModelDataSource": {
                    "S3DataSource": {
                        "S3Uri": "s3://models/smollm2/",
                        "S3DataType": "S3Prefix",
                        "CompressionType": "None",
                    }
                },
            },
        )
    sagemaker.create_optimization_job(
        OptimizationJobName=name,
        RoleArn=ROLE,
        ModelSource={"SageMakerModel": {"ModelName": source}},
        DeploymentInstanceType="ml.g5.2xlarge",
        OptimizationEnvironment={
            "EAGLE_TRAIN_MAX_MINUTES": str(args.minutes),
            "EAGLE_SELF_INSTRUCT_CONVERSATIONS": str(args.self_instruct),
        },
        OptimizationConfigs=[{"ModelSpeculativeDecodingConfig": {"Technique": "EAGLE"}}],
        OutputConfig={
            "S3OutputLocation": f"s3://output/{name}/",
            "SageMakerModel": {"ModelName": f"{name}-model"},
        },
        StoppingCondition={"MaxRuntimeInSeconds": 6 * 3600},
    )
    while True:
        job: dict[str, Any] = sagemaker.describe_optimization_job(OptimizationJobName=name)
        if job["OptimizationJobStatus"] in TERMINAL:
            return job
        time.sleep(20)


def collect(s3: Any, name: str, out: Path, wall: float) -> dict[str, Any]:
    """The head (for `trainer eval`), lineage.json and benchmark/results.json of a finished job."""
    prefix = f"{name}/"
    listed = s3.list_objects_v2(Bucket="output", Prefix=prefix)
    for item in listed.get("Contents", []):
        key = item["Key"]
        relative = key[len(prefix) :]
        if relative.startswith(("eagle_model/", "lineage.json", "benchmark/results.json")):
            target = out / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            s3.download_file("output", key, str(target))
    lineage = json.loads((out / "lineage.json").read_text())
    results = json.loads((out / "benchmark" / "results.json").read_text())
    return {
        "job": name,
        "wall_seconds": round(wall),
        "lineage": lineage,
        "recommendation": results.get("recommendation"),
    }


def row_line(index: int, row: dict[str, Any]) -> str:
    cache = row["lineage"].get("distillation_cache") or {}
    return f"job {index}: {row['job']} wall {row['wall_seconds']} s; cache {json.dumps(cache)[:300]}"


def table(rows: list[dict[str, Any]]) -> str:
    return "\n".join(row_line(index, row) for index, row in enumerate(rows, 1))


if __name__ == "__main__":
    raise SystemExit(main())
