"""A job's distillation fanned out on the embedded stack (`eaglenest up`: SQLite, the filesystem
Celery broker, SeaweedFS), driven with boto3 as a user would.

The stack's one worker (concurrency 1) runs the job; the shards it queues on the filesystem
broker are its own to distil (the coordinator helps inline), and the copies left queued are
revoked through the broker's control folder once every shard is in.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import psutil
import pytest

from client.rest import describe_job_progress
from tests.stack.embedded_stack import start_embedded_stack, wait_for_terminal
from tests.worker.tiny_inputs import sharegpt_jsonl, upload_directory

pytestmark = pytest.mark.slow

CONVERSATIONS = 32
# Generation batches of 2, so chunks of 16 conversations: shards of 16, two of them.
SHARD_CONVERSATIONS = 16
ROLE = "arn:aws:iam::000000000000:role/eaglenest"
JOB_TIMEOUT_SECONDS = 150

# The same tiny budgets as the worker e2e tests (tests/fixtures/worker.py), replies of 32 tokens,
# and no base head to build (no built-in data and nothing to distil for it: skipped at once).
STACK_SETTINGS = {
    "EAGLENEST_DISTILLATION_SHARD_CONVERSATIONS": str(SHARD_CONVERSATIONS),
    "EAGLENEST_TRAIN_OVERRIDES": json.dumps(
        {
            "batch_tokens": 512,
            "num_threads": 1,
            "checkpoint_every": 2,
            "max_steps": 2,
            "regenerate_max_new_tokens": 32,
            "regenerate_batch_size": 2,
        }
    ),
    "EAGLENEST_BENCHMARK_OVERRIDES": json.dumps(
        {
            "max_prompts": 2,
            "max_tokens": 8,
            "num_threads": 1,
            "concurrency": [1],
            "requests_per_level": 2,
            "k_sweep": [],
        }
    ),
    "EAGLENEST_BASE_HEAD_TRAIN_MINUTES": "0.05",
    "EAGLENEST_BASE_HEAD_TRAIN_OVERRIDES": json.dumps(
        {"regenerate": False, "self_instruct_conversations": 0}
    ),
}


def test_a_jobs_distillation_fans_out_in_shards_on_the_embedded_stack(
    tmp_path: Path, tiny_smollm2_target_dir: Path
) -> None:
    with start_embedded_stack(tmp_path, STACK_SETTINGS) as stack:
        info = stack.info
        s3 = stack.client("s3", info.s3_endpoint_url)
        for bucket in ("models", "data", "output"):
            s3.create_bucket(Bucket=bucket)
        model_uri = upload_directory(s3, tiny_smollm2_target_dir, "models", "tiny")
        s3.put_object(Bucket="data", Key="train/chat.jsonl", Body=sharegpt_jsonl(CONVERSATIONS).encode())

        sagemaker = stack.client("sagemaker", info.api_url)
        sagemaker.create_model(
            ModelName="tiny",
            ExecutionRoleArn=ROLE,
            PrimaryContainer={
                "Image": "vllm/vllm-openai:latest",
                "ModelDataSource": {
                    "S3DataSource": {"S3Uri": model_uri, "S3DataType": "S3Prefix", "CompressionType": "None"}
                },
            },
        )
        sagemaker.create_optimization_job(
            OptimizationJobName="fanned-out",
            RoleArn=ROLE,
            ModelSource={"SageMakerModel": {"ModelName": "tiny"}},
            DeploymentInstanceType="ml.g5.2xlarge",
            OptimizationEnvironment={"EAGLE_REGENERATE": "true", "EAGLE_NUM_SPECULATIVE_TOKENS": "3"},
            OptimizationConfigs=[
                {
                    "ModelSpeculativeDecodingConfig": {
                        "Technique": "EAGLE",
                        "TrainingDataSource": {"S3Uri": "s3://data/train/", "S3DataType": "S3Prefix"},
                    }
                }
            ],
            OutputConfig={"S3OutputLocation": "s3://output/fanned-out/"},
            StoppingCondition={"MaxRuntimeInSeconds": 900},
        )
        # The worker's pool process runs one task and is replaced once it returned
        # (worker_max_tasks_per_child=1), which may be before the test reads COMPLETED: so the
        # stack's processes are gathered while the job runs, not after.
        stack_processes: set[int] = set()

        def gather_stack_processes() -> None:
            children = psutil.Process(stack.process.pid).children(recursive=True)
            stack_processes.update(child.pid for child in children)

        job = wait_for_terminal(
            sagemaker, "fanned-out", timeout=JOB_TIMEOUT_SECONDS, while_waiting=gather_stack_processes
        )
        worker_log = Path(info.logs["worker"])
        assert job["OptimizationJobStatus"] == "COMPLETED", (
            f"{job['OptimizationJobStatus']}: {job.get('FailureReason')}\n{worker_log.read_text()[-4000:]}"
        )

        lineage = json.loads(s3.get_object(Bucket="output", Key="fanned-out/lineage.json")["Body"].read())
        fanout = lineage["distillation_fanout"]
        assert fanout is not None, lineage
        assert [shard["index"] for shard in fanout["shards"]] == [0, 1]
        assert fanout["missing_shards"] == []
        assert fanout["retried_shards"] == []
        assert not any(shard["stopped"] for shard in fanout["shards"])
        # Each shard's records (a conversation whose distilled reply the trainer cannot use
        # leaves none) make up the job's, which all went to the distillation cache.
        shard_records = [shard["records"] for shard in fanout["shards"]]
        assert all(0 < records <= SHARD_CONVERSATIONS for records in shard_records), shard_records
        assert fanout["records"] == sum(shard_records) == lineage["distillation_cache"]["new"]
        coordinator = fanout["coordinator"]
        # The stack has one worker: the job's own, which distilled both shards.
        assert {shard["worker"]["pid"] for shard in fanout["shards"]} == {coordinator["pid"]}
        assert coordinator["pid"] in stack_processes

        events: list[dict[str, Any]] = describe_job_progress(sagemaker, "fanned-out")["Events"]
        distil = [event for event in events if event.get("Stage") == "distil" and event.get("Worker")]
        assert distil, events
        assert {(e["Worker"]["Hostname"], e["Worker"]["Pid"]) for e in distil} == {
            (coordinator["hostname"], coordinator["pid"])
        }
        messages = [event["Message"] for event in distil]
        for index, records in enumerate(shard_records):
            assert any(m.startswith(f"Shard {index}: {records} records") for m in messages), messages

        # The shard tasks left queued (the one worker was busy with the job) were revoked
        # through the filesystem broker's control folder once both shards were in.
        log = worker_log.read_text()
        queued = re.findall(r"queued shard \d+ of optimization job \d+ as task ([0-9a-f-]+)", log)
        revoked = {
            task for line in re.findall(r"Tasks flagged as revoked: (.*)", log) for task in line.split(", ")
        }
        assert len(queued) == len(shard_records)
        assert set(queued) <= revoked, log[-4000:]
