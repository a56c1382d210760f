from __future__ import annotations

import socket
import tarfile
import threading
from dataclasses import dataclass
from typing import Any

import pytest
from sqlalchemy.orm import Session, sessionmaker

from core.s3 import S3_MAX_ATTEMPTS, S3Location
from db.models.optimization_job_status import OptimizationJobStatus as Status
from db.queries.optimization_job import get_optimization_job_by_id, list_job_events
from db.session import session_scope
from db.settings import Settings
from tests.factories.accounts import create_account
from tests.factories.optimization_jobs import create_optimization_job
from tests.worker.s3_models import model_files, tar_gz, upload_model, upload_model_archive
from worker.artifact_cache import ArtifactCache, cache_root
from worker.artifacts import BaseModelInput
from worker.context import JobContext
from worker.job_store import JobStore
from worker.pipeline import Stage
from worker.runner import run_optimization_job
from worker.stages.prepare import prepare_inputs
from worker.stages.validate import validate_artifacts


@dataclass
class Validated:
    status: Status | None
    failure_reason: str | None
    events: list[str]
    model: BaseModelInput | None


def _run_validate(
    factory: sessionmaker[Session], settings: Settings, model_uri: str, *, prepare: bool = False
) -> Validated:
    """Run 'validate' (and 'prepare') on a job reading ``model_uri``; keep what they produced."""
    with session_scope(factory) as session:
        owner = create_account(session)
        job_id = create_optimization_job(
            session,
            account_id=owner.account_id,
            aws_account_id=owner.aws_account_id,
            model_source={"S3": {"S3Uri": model_uri}},
        ).id
    seen: list[BaseModelInput | None] = [None]

    def keep(ctx: JobContext) -> None:
        seen[0] = ctx.artifacts.model

    stages = [Stage("validate", validate_artifacts)]
    if prepare:
        stages.append(Stage("prepare", prepare_inputs))
    stages.append(Stage("keep", keep))
    status = run_optimization_job(job_id, stages=stages, store=JobStore(factory), settings=settings)
    with session_scope(factory) as session:
        job = get_optimization_job_by_id(session, job_id=job_id)
        assert job is not None
        events = [event.message for event in list_job_events(session, job_id=job_id)]
        return Validated(status, job.failure_reason, events, seen[0])


def _validate(
    factory: sessionmaker[Session], settings: Settings, model_uri: str
) -> tuple[Status | None, str | None]:
    validated = _run_validate(factory, settings, model_uri)
    return validated.status, validated.failure_reason


def test_a_complete_model_directory_passes(
    worker_session_factory: sessionmaker[Session], worker_settings: Settings, s3_client: Any, s3_bucket: str
) -> None:
    uri = upload_model(s3_client, s3_bucket, "base")
    assert _validate(worker_session_factory, worker_settings, uri) == (Status.COMPLETED, None)


def test_a_config_that_is_not_json_fails(
    worker_session_factory: sessionmaker[Session], worker_settings: Settings, s3_client: Any, s3_bucket: str
) -> None:
    s3_client.put_object(Bucket=s3_bucket, Key="bad/config.json", Body=b"{not json")
    status, reason = _validate(worker_session_factory, worker_settings, f"s3://{s3_bucket}/bad")
    assert status is Status.FAILED
    assert reason is not None
    assert reason.startswith(f"s3://{s3_bucket}/bad/config.json is not valid JSON")


def test_a_config_without_model_type_fails(
    worker_session_factory: sessionmaker[Session], worker_settings: Settings, s3_client: Any, s3_bucket: str
) -> None:
    uri = upload_model(s3_client, s3_bucket, "odd", config={"hello": "world"})
    status, reason = _validate(worker_session_factory, worker_settings, uri)
    assert status is Status.FAILED
    assert reason == (
        f"s3://{s3_bucket}/odd/config.json is not a Hugging Face model config "
        "(no model_type or architectures)"
    )


def test_a_directory_without_weights_fails(
    worker_session_factory: sessionmaker[Session], worker_settings: Settings, s3_client: Any, s3_bucket: str
) -> None:
    uri = upload_model(s3_client, s3_bucket, "noweights", weights=False)
    status, reason = _validate(worker_session_factory, worker_settings, uri)
    assert status is Status.FAILED
    assert reason == (
        f"Model weights not found: {uri}model.safetensors (nor a sharded model.safetensors.index.json); "
        "the base model must be in safetensors format"
    )


def test_a_missing_bucket_fails_naming_the_object(
    worker_session_factory: sessionmaker[Session], worker_settings: Settings
) -> None:
    status, reason = _validate(worker_session_factory, worker_settings, "s3://no-such-bucket-eaglenest/m")
    assert status is Status.FAILED
    assert reason == "S3 bucket does not exist: s3://no-such-bucket-eaglenest/m/"


def test_an_s3_that_drops_connections_is_retried_then_fails_naming_the_error(
    worker_session_factory: sessionmaker[Session], worker_settings: Settings
) -> None:
    # An endpoint that accepts each connection and closes it at once: every request fails.
    listener = socket.create_server(("127.0.0.1", 0))
    accepted = 0

    def drop_connections() -> None:
        nonlocal accepted
        while True:
            try:
                connection, _ = listener.accept()
            except OSError:
                return
            accepted += 1
            connection.close()

    threading.Thread(target=drop_connections, daemon=True).start()
    endpoint = f"http://127.0.0.1:{listener.getsockname()[1]}"
    settings = worker_settings.model_copy(update={"s3_endpoint_url": endpoint})
    try:
        status, reason = _validate(worker_session_factory, settings, "s3://models/llama/")
    finally:
        listener.close()
    assert status is Status.FAILED
    assert reason is not None
    assert reason.startswith("S3 error listing s3://models/llama/: Connection was closed before we received")
    assert endpoint in reason
    # botocore's standard retry mode made every attempt (backing off in between) before giving up.
    assert accepted >= S3_MAX_ATTEMPTS


# ---------------------------------------------------------------- required and optional files


def test_a_missing_tokenizer_config_fails_naming_it(
    worker_session_factory: sessionmaker[Session], worker_settings: Settings, s3_client: Any, s3_bucket: str
) -> None:
    uri = upload_model(s3_client, s3_bucket, "notok")
    s3_client.delete_object(Bucket=s3_bucket, Key="notok/tokenizer_config.json")
    assert _validate(worker_session_factory, worker_settings, uri) == (
        Status.FAILED,
        f"Tokenizer file not found: {uri}tokenizer_config.json",
    )


def test_files_a_model_may_lack_are_warnings_in_the_events_and_the_model_input(
    worker_session_factory: sessionmaker[Session], worker_settings: Settings, s3_client: Any, s3_bucket: str
) -> None:
    uri = upload_model(s3_client, s3_bucket, "lean")
    s3_client.put_object(Bucket=s3_bucket, Key="lean/generation_config.json", Body=b"{}")
    validated = _run_validate(worker_session_factory, worker_settings, uri)
    assert (validated.status, validated.failure_reason) == (Status.COMPLETED, None)
    expected = [
        f"{uri}special_tokens_map.json is missing (recent tokenizers keep the special tokens in "
        "tokenizer_config.json)",
        f"{uri}vocab.json is missing (the vocabulary is in tokenizer.json)",
    ]
    assert validated.model is not None
    assert validated.model.warnings == expected
    assert [f"Warning: {line}" for line in expected] == [
        e for e in validated.events if e.startswith("Warning")
    ]


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        (model_files()["model.safetensors"][:-3], "the file is truncated"),
        (b"\x00\x01garbage that is not a safetensors file at all", "not a safetensors file"),
    ],
    ids=["truncated", "garbage"],
)
def test_a_corrupt_safetensors_file_fails_naming_it(
    *,
    worker_session_factory: sessionmaker[Session],
    worker_settings: Settings,
    s3_client: Any,
    s3_bucket: str,
    body: bytes,
    problem: str,
) -> None:
    uri = upload_model(s3_client, s3_bucket, "corrupt")
    s3_client.put_object(Bucket=s3_bucket, Key="corrupt/model.safetensors", Body=body)
    status, reason = _validate(worker_session_factory, worker_settings, uri)
    assert status is Status.FAILED
    assert reason is not None
    assert reason.startswith(f"{uri}model.safetensors is not a complete safetensors file: ")
    assert problem in reason


# ---------------------------------------------------------------- model.tar.gz


def test_a_model_tar_gz_is_unpacked_and_prepare_uses_it(
    worker_session_factory: sessionmaker[Session], worker_settings: Settings, s3_client: Any, s3_bucket: str
) -> None:
    uri = upload_model_archive(s3_client, s3_bucket, "packed/model.tar.gz")
    validated = _run_validate(worker_session_factory, worker_settings, uri, prepare=True)
    assert (validated.status, validated.failure_reason) == (Status.COMPLETED, None)
    model = validated.model
    assert model is not None
    assert model.local_dir is not None
    assert model.compressed
    assert model.location == S3Location(s3_bucket, "packed/model.tar.gz")
    for name, body in model_files().items():
        assert (model.local_dir / name).read_bytes() == body
    etag = s3_client.head_object(Bucket=s3_bucket, Key="packed/model.tar.gz")["ETag"].strip('"')
    assert model.snapshot.to_lineage()["objects"] == [
        {"uri": uri, "etag": etag, "size": model.snapshot.total_bytes}
    ]
    # 'prepare' kept the unpacked directory (a download of the snapshot would hold the archive itself).
    assert not (model.local_dir / "model.tar.gz").exists()
    cache = ArtifactCache(cache_root(worker_settings))
    assert model.local_dir == cache.archive_path_for("models", model.snapshot)
    assert f"{'special_tokens_map.json'} in {uri} is missing" in model.warnings[0]

    # The same archive (same ETag) is not unpacked again: the cache entry is reused.
    again = _run_validate(worker_session_factory, worker_settings, uri, prepare=True)
    assert again.model is not None
    assert again.model.local_dir == model.local_dir


def test_a_model_tar_gz_of_the_model_folder_validates(
    worker_session_factory: sessionmaker[Session], worker_settings: Settings, s3_client: Any, s3_bucket: str
) -> None:
    """``tar czf model.tar.gz smollm/``: the folder's files are the model."""
    body = tar_gz({f"smollm/{name}": data for name, data in model_files().items()})
    uri = upload_model_archive(s3_client, s3_bucket, "packed/folder.tar.gz", body)
    validated = _run_validate(worker_session_factory, worker_settings, uri, prepare=True)
    assert (validated.status, validated.failure_reason) == (Status.COMPLETED, None)
    assert validated.model is not None
    assert validated.model.local_dir is not None
    for name, data in model_files().items():
        assert (validated.model.local_dir / name).read_bytes() == data


def test_a_model_tar_gz_without_a_required_file_fails_naming_it(
    worker_session_factory: sessionmaker[Session], worker_settings: Settings, s3_client: Any, s3_bucket: str
) -> None:
    files = model_files()
    del files["tokenizer_config.json"]
    uri = upload_model_archive(s3_client, s3_bucket, "packed/notok.tar.gz", tar_gz(files))
    assert _validate(worker_session_factory, worker_settings, uri) == (
        Status.FAILED,
        f"Tokenizer file not found: tokenizer_config.json in {uri}",
    )


def test_a_model_tar_gz_with_a_corrupt_safetensors_fails_naming_it(
    worker_session_factory: sessionmaker[Session], worker_settings: Settings, s3_client: Any, s3_bucket: str
) -> None:
    files = model_files()
    files["model.safetensors"] = files["model.safetensors"][:-1]
    uri = upload_model_archive(s3_client, s3_bucket, "packed/cut.tar.gz", tar_gz(files))
    status, reason = _validate(worker_session_factory, worker_settings, uri)
    assert status is Status.FAILED
    assert reason is not None
    assert reason.startswith(f"model.safetensors in {uri} is not a complete safetensors file: ")


def _link(name: str, target: str, kind: bytes) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = target
    return info


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            tar_gz({**model_files(), "../escape.txt": b"x"}),
            "Model archive {uri}: member '../escape.txt' has an absolute or '..' path",
        ),
        (
            tar_gz(model_files(), extra=[_link("tokenizer.model", "/etc/passwd", tarfile.SYMTYPE)]),
            "Model archive {uri}: member 'tokenizer.model' is a symbolic link (to '/etc/passwd')",
        ),
        (
            tar_gz(model_files(), extra=[_link("copy.json", "config.json", tarfile.LNKTYPE)]),
            "Model archive {uri}: member 'copy.json' is a hard link (to 'config.json')",
        ),
        (b"PK\x03\x04 a zip file", "Model archive {uri} is not gzip-compressed"),
    ],
    ids=["escape", "symlink", "hardlink", "not-gzip"],
)
def test_an_unsafe_or_wrong_model_archive_fails_naming_it(
    *,
    worker_session_factory: sessionmaker[Session],
    worker_settings: Settings,
    s3_client: Any,
    s3_bucket: str,
    body: bytes,
    message: str,
) -> None:
    uri = upload_model_archive(s3_client, s3_bucket, "packed/bad.tar.gz", body)
    status, reason = _validate(worker_session_factory, worker_settings, uri)
    assert status is Status.FAILED
    assert reason is not None
    assert reason.startswith(message.format(uri=uri)), reason


def test_a_model_archive_over_the_size_cap_fails_naming_it(
    worker_session_factory: sessionmaker[Session], worker_settings: Settings, s3_client: Any, s3_bucket: str
) -> None:
    uri = upload_model_archive(s3_client, s3_bucket, "packed/big.tar.gz")
    settings = worker_settings.model_copy(update={"max_model_archive_bytes": 100})
    status, reason = _validate(worker_session_factory, settings, uri)
    assert status is Status.FAILED
    assert reason is not None
    assert reason.startswith(f"Model archive {uri} unpacks to more than 100 bytes (reached at member ")


def test_a_missing_model_archive_fails_naming_it(
    worker_session_factory: sessionmaker[Session], worker_settings: Settings, s3_bucket: str
) -> None:
    uri = f"s3://{s3_bucket}/nothing/model.tar.gz"
    assert _validate(worker_session_factory, worker_settings, uri) == (
        Status.FAILED,
        f"Model archive not found: {uri}",
    )
