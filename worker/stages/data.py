"""Stage 'data': find the job's training data on S3, cache it locally and check every record.

TrainingDataSource is an S3Prefix (every data file under it), a SageMaker ManifestFile
(``[{"prefix": "s3://bucket/dir/"}, "relative/key", ...]``), or absent: then the built-in
datasets listed in the operator's catalog (``builtin_datasets_uri``) are used.

Malformed records fail the job naming the file (by S3 URI) and line, unless they are at
most ``max_skipped_record_fraction`` of all records; then they are skipped and counted.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from core.job_errors import JobFailedError
from core.model_source import parse_s3_uri
from core.s3 import S3Location
from core.s3_store import S3Object, S3Store
from trainer.data.errors import DataFormatError
from trainer.data.files import DATA_FILE_SUFFIXES, is_data_file
from trainer.data.loader import load_conversations
from worker.artifact_cache import ArtifactCache
from worker.artifacts import DataSourceKind, TrainingDataInput
from worker.builtin_catalog import builtin_snapshot, catalog_location
from worker.context import JobContext
from worker.s3_snapshot import S3Snapshot, SnapshotEntry, safe_relative_path

DATA_TYPES = ("S3Prefix", "ManifestFile")


def resolve_training_data(ctx: JobContext) -> None:
    source = ctx.job.training_data_source
    listing: S3Object | None = None
    datasets: list[str] = []
    kind: DataSourceKind
    if source is None:
        kind = "BuiltIn"
        snapshot, listing, datasets = _builtin_snapshot(ctx)
    else:
        data_type = source.s3_data_type
        if data_type == "S3Prefix":
            kind = "S3Prefix"
            snapshot = _prefix_snapshot(ctx, source.s3_uri)
        elif data_type == "ManifestFile":
            kind = "ManifestFile"
            snapshot, listing = _manifest_snapshot(ctx, source.s3_uri)
        else:
            raise JobFailedError(
                f"TrainingDataSource.S3DataType {data_type!r} is not supported; "
                f"use one of {', '.join(DATA_TYPES)}"
            )
    ctx.check()
    total_mb = snapshot.total_bytes / 1e6
    ctx.report(f"Fetching and checking {len(snapshot.entries)} data files ({total_mb:.1f} MB)", fraction=0.2)
    data = fetch_training_data(
        ctx.s3,
        ctx.cache,
        snapshot,
        kind=kind,
        listing=listing,
        datasets=datasets,
        max_skip_fraction=ctx.settings.max_skipped_record_fraction,
    )
    ctx.artifacts.data = data
    ctx.report(
        f"{data.summary['conversations']} conversations from {len(data.files)} files "
        f"({data.summary['records_skipped']} malformed records skipped)",
        fraction=1.0,
    )


def fetch_training_data(
    store: S3Store,
    cache: ArtifactCache,
    snapshot: S3Snapshot,
    *,
    kind: DataSourceKind,
    listing: S3Object | None,
    datasets: list[str],
    max_skip_fraction: float,
) -> TrainingDataInput:
    """The snapshot's files in the local cache, every record read the way training will."""
    local_dir = cache.fetch(store, snapshot, kind="data")
    files = [local_dir / entry.path for entry in snapshot.entries]
    return TrainingDataInput(
        kind=kind,
        uri=snapshot.source,
        snapshot=snapshot,
        local_dir=local_dir,
        files=files,
        listing=listing,
        datasets=datasets,
        summary=check_records(files, snapshot, local_dir, max_skip_fraction),
    )


def check_records(
    files: list[Path], snapshot: S3Snapshot, local_dir: Path, max_skip_fraction: float
) -> dict[str, Any]:
    """Read every record the way training will; the summary and errors name S3 URIs."""
    names = {str(local_dir / entry.path): entry.object.uri for entry in snapshot.entries}
    try:
        result = load_conversations(files, max_skip_fraction=max_skip_fraction)
    except DataFormatError as error:
        raise JobFailedError(f"Training data: {_with_uris(str(error), names)}") from error
    summary = result.summary.to_dict()
    for file_summary in summary["files"]:
        file_summary["path"] = names.get(file_summary["path"], file_summary["path"])
    summary["max_skipped_record_fraction"] = max_skip_fraction
    return summary


def _with_uris(message: str, names: dict[str, str]) -> str:
    # Longest paths first, so a path that is a prefix of another never replaces part of it.
    for local, uri in sorted(names.items(), key=lambda item: -len(item[0])):
        message = message.replace(local, uri)
    return message


def _prefix_snapshot(ctx: JobContext, uri: str) -> S3Snapshot:
    location = parse_s3_uri(uri, field="TrainingDataSource.S3Uri").as_directory
    ctx.report(f"Listing training data under {location.uri}", fraction=0.05)
    objects = [obj for obj in ctx.s3.list_objects(location) if is_data_file(Path(obj.location.key))]
    if not objects:
        raise JobFailedError(f"No training data files ({', '.join(DATA_FILE_SUFFIXES)}) under {location.uri}")
    return S3Snapshot.under_prefix(location.uri, location.prefix, objects)


def _manifest_snapshot(ctx: JobContext, uri: str) -> tuple[S3Snapshot, S3Object]:
    manifest_location = parse_s3_uri(uri, field="TrainingDataSource.S3Uri")
    ctx.report(f"Reading the manifest {manifest_location.uri}", fraction=0.05)
    manifest = ctx.s3.head(manifest_location)
    if manifest is None:
        raise JobFailedError(f"Training data manifest not found: {manifest_location.uri}")
    prefix, keys = parse_manifest(ctx.s3.read_json(manifest_location), where=manifest_location.uri)
    entries = []
    for index, key in enumerate(keys, start=1):
        location = S3Location(prefix.bucket, prefix.prefix + key)
        found = ctx.s3.head(location)
        if found is None:
            raise JobFailedError(
                f"Training data file not found: {location.uri} "
                f"(entry {index} of manifest {manifest_location.uri})"
            )
        entries.append(SnapshotEntry(safe_relative_path(key, uri=location.uri), found))
    return S3Snapshot(source=manifest_location.uri, entries=tuple(entries)), manifest


def parse_manifest(document: Any, *, where: str) -> tuple[S3Location, list[str]]:
    """SageMaker's manifest: a prefix object first, then keys relative to it."""
    if not isinstance(document, list) or not document:
        raise JobFailedError(
            f'{where}: a manifest must be a JSON list: [{{"prefix": "s3://bucket/dir/"}}, "key", ...]'
        )
    head = document[0]
    if not isinstance(head, dict) or not isinstance(head.get("prefix"), str):
        raise JobFailedError(f'{where}: the first manifest entry must be {{"prefix": "s3://bucket/dir/"}}')
    prefix = parse_s3_uri(head["prefix"], field=f"{where} prefix")
    keys: list[str] = []
    for index, key in enumerate(document[1:], start=1):
        if not isinstance(key, str) or not key:
            raise JobFailedError(f"{where}: entry {index} must be an object key (a string), got {key!r}")
        keys.append(key)
    if not keys:
        raise JobFailedError(f"{where}: the manifest lists no files after its prefix")
    if len(set(keys)) != len(keys):
        duplicated = sorted({key for key in keys if keys.count(key) > 1})
        raise JobFailedError(f"{where}: the manifest lists {duplicated[0]!r} more than once")
    return prefix, keys


def _builtin_snapshot(ctx: JobContext) -> tuple[S3Snapshot, S3Object, list[str]]:
    root = catalog_location(ctx.settings)
    ctx.report(f"No TrainingDataSource: using the built-in datasets listed in {root.uri}", fraction=0.05)
    try:
        return builtin_snapshot(ctx.s3, ctx.settings)
    except JobFailedError as error:
        raise JobFailedError(f"The job has no TrainingDataSource. {error}") from error
