"""How long each pipeline stage of a finished optimization job took, from its event history.

    .venv/bin/python benchmarks/job_stages.py --state-dir state/demo JOB_NAME

Reads the embedded stack's stack.json (api URL, region, development credentials) and the
REST face's event history (GET /v1/optimization-jobs/{name}); a stage lasts from its first
event to the next stage's (or the job's final) event.
"""

from __future__ import annotations

import argparse
import itertools
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials


def job_detail(state_dir: Path, name: str) -> dict[str, Any]:
    info = json.loads((state_dir / "stack.json").read_text())
    request = AWSRequest(method="GET", url=f"{info['api_url']}/v1/optimization-jobs/{name}")
    credentials = Credentials(info["aws_access_key_id"], info["aws_secret_access_key"])
    SigV4Auth(credentials, "sagemaker", info["region"]).add_auth(request)
    response = httpx.get(request.url, headers=dict(request.headers.items()), timeout=30)
    response.raise_for_status()
    detail: dict[str, Any] = response.json()
    return detail


def stage_durations(events: list[dict[str, Any]]) -> list[tuple[str, float]]:
    """(stage, seconds) in order: each event with a stage runs until the next event."""
    marks = [(event.get("Stage"), datetime.fromtimestamp(event["Time"], UTC)) for event in events]
    durations: list[tuple[str, float]] = []
    for (stage, started), (_, ended) in itertools.pairwise(marks):
        if stage is None:
            continue
        seconds = (ended - started).total_seconds()
        if durations and durations[-1][0] == stage:
            durations[-1] = (stage, durations[-1][1] + seconds)
        else:
            durations.append((stage, seconds))
    return durations


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("name", help="optimization job name")
    parser.add_argument("--state-dir", type=Path, default=Path("state"), help="embedded stack state dir")
    args = parser.parse_args()
    detail = job_detail(args.state_dir, args.name)
    print(f"{args.name}: {detail['OptimizationJobStatus']}")
    total = 0.0
    for stage, seconds in stage_durations(detail["Events"]):
        total += seconds
        print(f"  {stage:<10} {seconds:8.1f} s")
    print(f"  {'total':<10} {total:8.1f} s (first stage to final status)")


if __name__ == "__main__":
    main()
