"""stack.json: how clients reach a running embedded stack (written once everything is ready)."""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import BaseModel, Field

STACK_FILE_NAME = "stack.json"


class StackInfo(BaseModel):
    api_url: str = Field(
        description="SageMaker endpoint: `aws sagemaker --endpoint-url` / boto3 endpoint_url."
    )
    s3_endpoint_url: str = Field(description="S3 endpoint of the embedded SeaweedFS.")
    region: str = Field(description="Region to sign requests for.")
    aws_access_key_id: str = Field(description="Development access key, valid for the api and S3.")
    aws_secret_access_key: str = Field(description="Secret of the development access key.")
    state_dir: str = Field(description="Directory holding the database, queue, S3 data and logs.")
    database_url: str = Field(description="SQLAlchemy URL of the stack's SQLite database.")
    pid: int = Field(description="Process id of `eaglenest up`; send it SIGTERM to stop the stack.")
    logs: dict[str, str] = Field(description="Log file of each child process, by name.")
    restarts: dict[str, int] = Field(
        default_factory=dict,
        description="How often each child (api, worker) was restarted after it crashed, by name.",
    )


def stack_file_path(state_dir: Path) -> Path:
    return state_dir / STACK_FILE_NAME


def write_stack_file(state_dir: Path, info: StackInfo) -> Path:
    """Write atomically, so a client polling for the file never reads half of it; owner-only
    (0600), as it holds credentials."""
    path = stack_file_path(state_dir)
    partial = path.with_suffix(".json.tmp")
    partial.unlink(missing_ok=True)  # os.open's mode applies only to a new file
    with os.fdopen(os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as file:
        file.write(info.model_dump_json(indent=2) + "\n")
    os.replace(partial, path)
    return path


def read_stack_file(state_dir: Path) -> StackInfo:
    return StackInfo.model_validate_json(stack_file_path(state_dir).read_text())


def live_stack_pid(state_dir: Path) -> int | None:
    """The pid of an `eaglenest up` still serving from ``state_dir``; None if none (or it died)."""
    try:
        pid = read_stack_file(state_dir).pid
    except (FileNotFoundError, ValueError):
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None  # a stack that was killed without cleaning up
    except PermissionError:
        return pid
    return pid
