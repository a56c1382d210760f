"""API latency under concurrent clients: eaglenest on Postgres versus moto's in-memory server.

    .venv/bin/python benchmarks/api_latency.py [--clients 50] [--seconds 10] [--workers 2]

Creates a throw-away Postgres database, migrates it, seeds an account, jobs and a model,
starts ``uvicorn api.app:app`` and ``moto_server`` as subprocesses on loopback, then drives
each with ``--clients`` keep-alive connections for ``--seconds`` (after a warm-up) and prints
p50/p99 latency and requests/s per operation.

The load generator is a minimal asyncio HTTP/1.1 client that replays requests signed once
with SigV4 (valid for 15 minutes): signing every request with botocore would cost the
client more CPU than the server spends, on the same cores. The server still verifies every
signature; only the access key's database row is cached (for a few seconds).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import boto3
import httpx
import psycopg
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from psycopg import sql

from db.arns import optimization_job_arn
from db.queries.account import create_access_key
from db.queries.optimization_job import create_optimization_job
from db.session import create_db_engine, create_session_factory
from migrations.runner import upgrade_to_head

ADMIN_DSN = "postgresql://postgres@127.0.0.1:5432/postgres"
REGION = "us-west-2"
ACCOUNT = "123456789012"
BIN = Path(sys.executable).parent


@dataclass(frozen=True)
class Scenario:
    label: str
    host: str
    port: int
    raw_request: bytes


@dataclass(frozen=True)
class Result:
    label: str
    latencies_ms: list[float]
    errors: int
    seconds: float
    # Server CPU per request (all its processes), warm-up included: a figure that, unlike
    # latency, does not depend on how busy the shared cores are with other work.
    server_cpu_ms_per_request: float

    @property
    def requests_per_second(self) -> float:
        return len(self.latencies_ms) / self.seconds

    def percentile(self, fraction: float) -> float:
        ordered = sorted(self.latencies_ms)
        return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def signed_raw_request(
    host: str, port: int, target: str, body: dict[str, object], *, key: str, secret: str
) -> bytes:
    """The exact bytes of a SigV4-signed POST / request, with keep-alive."""
    payload = json.dumps(body).encode()
    url = f"http://{host}:{port}/"
    request = AWSRequest(
        method="POST",
        url=url,
        data=payload,
        headers={"Content-Type": "application/x-amz-json-1.1", "X-Amz-Target": f"SageMaker.{target}"},
    )
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    request.headers["X-Amz-Date"] = stamp
    request.context["timestamp"] = stamp
    signer = SigV4Auth(Credentials(key, secret), "sagemaker", REGION)
    canonical = signer.canonical_request(request)
    signature = signer.signature(signer.string_to_sign(request, canonical), request)
    signed_headers = signer.signed_headers(signer.headers_to_sign(request))
    request.headers["Authorization"] = (
        f"AWS4-HMAC-SHA256 Credential={key}/{stamp[:8]}/{REGION}/sagemaker/aws4_request, "
        f"SignedHeaders={signed_headers}, Signature={signature}"
    )
    lines = ["POST / HTTP/1.1", f"Host: {host}:{port}", f"Content-Length: {len(payload)}"]
    lines += [f"{name}: {value}" for name, value in request.headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + payload


async def read_response(reader: asyncio.StreamReader) -> tuple[int, bool]:
    """Status code, and whether the server keeps the connection open."""
    head = await reader.readuntil(b"\r\n\r\n")
    status_line, *header_lines = head.split(b"\r\n")
    keep_alive = status_line.startswith(b"HTTP/1.1")
    length = 0
    for line in header_lines:
        name, _, value = line.partition(b":")
        if name.lower() == b"content-length":
            length = int(value)
        elif name.lower() == b"connection":
            keep_alive = value.strip().lower() == b"keep-alive"
    await reader.readexactly(length)
    return int(status_line.split(b" ", 2)[1]), keep_alive


@dataclass
class Tally:
    """What the clients of one scenario observed."""

    latencies_ms: list[float] = field(default_factory=list)
    errors: int = 0
    completed: int = 0  # including warm-up


async def client_loop(scenario: Scenario, start_at: float, stop_at: float, tally: Tally) -> None:
    """One client: send, wait for the answer, repeat; reconnect when the server closes (moto does)."""
    connection: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
    try:
        while True:
            began = time.perf_counter()
            if began >= stop_at:
                return
            if connection is None:
                connection = await asyncio.open_connection(scenario.host, scenario.port)
            reader, writer = connection
            writer.write(scenario.raw_request)
            status, keep_alive = await read_response(reader)
            finished = time.perf_counter()
            tally.completed += 1
            if not keep_alive:
                writer.close()
                connection = None
            if began >= start_at:  # warm-up requests are not counted
                if status == 200:
                    tally.latencies_ms.append((finished - began) * 1000)
                else:
                    tally.errors += 1
    finally:
        if connection is not None:
            connection[1].close()


def process_tree_cpu_seconds(pid: int, proc: Path = Path("/proc")) -> float:
    """User + system CPU of a process and all its descendants, from /proc (Linux).

    Threads and processes end while the tree is walked (a server's worker threads come and
    go): whatever vanished between listing and reading is skipped, not an error.
    """
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0.0
    pending = [pid]
    while pending:
        current = pending.pop()
        try:
            fields = (proc / str(current) / "stat").read_text().rsplit(")", 1)[1].split()
            tasks = list((proc / str(current) / "task").iterdir())
        except (FileNotFoundError, ProcessLookupError):
            continue
        total += (int(fields[11]) + int(fields[12])) / ticks  # utime, stime
        for task in tasks:
            try:
                pending += [int(child) for child in (task / "children").read_text().split()]
            except (FileNotFoundError, ProcessLookupError):
                continue
    return total


async def drive(scenario: Scenario, server_pid: int, clients: int, seconds: float, warmup: float) -> Result:
    tally = Tally()
    cpu_before = process_tree_cpu_seconds(server_pid)
    now = time.perf_counter()
    start_at, stop_at = now + warmup, now + warmup + seconds
    await asyncio.gather(*(client_loop(scenario, start_at, stop_at, tally) for _ in range(clients)))
    cpu_ms = (process_tree_cpu_seconds(server_pid) - cpu_before) * 1000
    return Result(scenario.label, tally.latencies_ms, tally.errors, seconds, cpu_ms / max(1, tally.completed))


@contextmanager
def benchmark_database() -> Iterator[str]:
    name = f"eaglenest_bench_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(ADMIN_DSN, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield f"postgresql+psycopg://postgres@127.0.0.1:5432/{name}"
    finally:
        with psycopg.connect(ADMIN_DSN, autocommit=True) as admin:
            admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


@contextmanager
def running(command: list[str], port: int, env: dict[str, str], ready_path: str) -> Iterator[int]:
    # Output goes to a file, not a pipe: moto logs every request, and a full pipe would stall it.
    with tempfile.TemporaryFile() as log:
        process = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 60
            while True:
                if process.poll() is not None:
                    log.seek(0)
                    raise RuntimeError(f"{command[0]} exited: {log.read().decode(errors='replace')}")
                try:
                    httpx.get(f"http://127.0.0.1:{port}{ready_path}", timeout=1)
                    break
                except httpx.HTTPError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.2)
            yield process.pid
        finally:
            process.terminate()
            process.wait(timeout=30)


def seed(database_url: str, jobs: int) -> tuple[str, str, str]:
    """An account with ``jobs`` jobs (inserted directly: nothing is queued); returns (key, secret, a job)."""
    upgrade_to_head(database_url)
    engine = create_db_engine(database_url)
    with create_session_factory(engine)() as session:
        key, secret = create_access_key(session, aws_account_id=ACCOUNT)
        for index in range(jobs):
            name = f"bench-job-{index:04d}"
            create_optimization_job(
                session,
                account_id=key.account_id,
                name=name,
                region=REGION,
                arn=optimization_job_arn(region=REGION, aws_account_id=ACCOUNT, name=name),
                role_arn=f"arn:aws:iam::{ACCOUNT}:role/SageMakerRole",
                model_source={"S3": {"S3Uri": "s3://models/llama/"}},
                deployment_instance_type="ml.g5.2xlarge",
                optimization_configs=[{"ModelSpeculativeDecodingConfig": {"Technique": "EAGLE"}}],
                output_config={"S3OutputLocation": "s3://out/jobs/"},
                stopping_condition={"MaxRuntimeInSeconds": 3600},
                optimization_types=["SpeculativeDecoding"],
            )
        session.commit()
        key_id = key.access_key_id
    engine.dispose()
    return key_id, secret, "bench-job-0007"


def print_table(results: list[Result], clients: int, load_before: str) -> None:
    print(f"\n{clients} concurrent clients, loopback; latency in ms\n")
    print(f"{'operation':<48} {'p50':>7} {'p99':>7} {'req/s':>8} {'errors':>7} {'server CPU ms/req':>18}")
    for result in results:
        if not result.latencies_ms:
            print(f"{result.label:<48} {'-':>7} {'-':>7} {0:>8} {result.errors:>7}")
            continue
        print(
            f"{result.label:<48} {result.percentile(0.5):>7.1f} {result.percentile(0.99):>7.1f} "
            f"{result.requests_per_second:>8.0f} {result.errors:>7} {result.server_cpu_ms_per_request:>18.2f}"
        )
    print(f"\n{os.cpu_count()} CPU cores; load average before the run: {load_before}")


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--warmup", type=float, default=2.0)
    parser.add_argument("--workers", type=int, default=2, help="uvicorn worker processes")
    parser.add_argument("--jobs", type=int, default=200, help="jobs seeded in the account")
    args = parser.parse_args()
    load_before = " ".join(f"{load:.2f}" for load in os.getloadavg())

    results: list[Result] = []
    with benchmark_database() as database_url:
        key, secret, job_name = seed(database_url, args.jobs)
        api_port, moto_port = free_port(), free_port()
        env = {**os.environ, "EAGLENEST_DATABASE_URL": database_url}
        api_command = [
            str(BIN / "uvicorn"), "api.app:app", "--host", "127.0.0.1", "--port", str(api_port),
            "--workers", str(args.workers), "--no-access-log", "--log-level", "warning",
        ]  # fmt: skip
        with running(api_command, api_port, env, "/healthz") as api_pid:
            boto3.client(
                "sagemaker",
                endpoint_url=f"http://127.0.0.1:{api_port}",
                region_name=REGION,
                aws_access_key_id=key,
                aws_secret_access_key=secret,
            ).create_model(ModelName="bench-model", PrimaryContainer={"Image": "repo/image:1"})
            scenarios: list[tuple[str, str, dict[str, object]]] = [
                (
                    "eaglenest DescribeOptimizationJob",
                    "DescribeOptimizationJob",
                    {"OptimizationJobName": job_name},
                ),
                (
                    "eaglenest ListOptimizationJobs (MaxResults=10)",
                    "ListOptimizationJobs",
                    {"MaxResults": 10},
                ),
                ("eaglenest DescribeModel", "DescribeModel", {"ModelName": "bench-model"}),
            ]
            for label, target, body in scenarios:
                raw = signed_raw_request("127.0.0.1", api_port, target, body, key=key, secret=secret)
                results.append(
                    asyncio.run(
                        drive(
                            Scenario(label, "127.0.0.1", api_port, raw),
                            api_pid,
                            args.clients,
                            args.seconds,
                            args.warmup,
                        )
                    )
                )
        moto_command = [str(BIN / "moto_server"), "-p", str(moto_port)]
        with running(moto_command, moto_port, env, "/moto-api/") as moto_pid:
            boto3.client(
                "sagemaker",
                endpoint_url=f"http://127.0.0.1:{moto_port}",
                region_name=REGION,
                aws_access_key_id="test",
                aws_secret_access_key="test",
            ).create_model(
                ModelName="bench-model",
                PrimaryContainer={"Image": "repo/image:1"},
                ExecutionRoleArn="arn:aws:iam::123456789012:role/x",
            )
            raw = signed_raw_request(
                "127.0.0.1",
                moto_port,
                "DescribeModel",
                {"ModelName": "bench-model"},
                key="test",
                secret="test",
            )
            scenario = Scenario("moto_server DescribeModel (in-memory)", "127.0.0.1", moto_port, raw)
            results.append(asyncio.run(drive(scenario, moto_pid, args.clients, args.seconds, args.warmup)))
    print_table(results, args.clients, load_before)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
