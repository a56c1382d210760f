"""The files an endpoint serves: its SageMaker model's weights and EAGLE head, in the local cache.

Read as the model's ExecutionRoleArn (or the endpoint configuration's), as SageMaker does, and
cached by ETag like an optimization job's inputs, so a restart or a second endpoint on the
same model downloads nothing.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from core.job_errors import JobFailedError
from core.model_source import ModelData, eagle_head_location, model_location
from core.s3 import s3_client
from core.s3_store import S3Store
from core.sagemaker.shapes.optimization_jobs import OptimizationJobModelSource
from core.sagemaker.shapes.sagemaker_models import ContainerDefinition
from db.arns import sagemaker_model_arn
from db.queries.role import get_role_credentials
from db.queries.sagemaker_model import get_sagemaker_model_by_name
from db.session import session_scope
from db.settings import Settings
from engine.heads.export import resolve_head_dir
from engine.heads.serving_settings import served_speculative_tokens
from worker.artifact_cache import ArtifactCache, cache_root
from worker.s3_snapshot import S3Snapshot, SnapshotEntry, safe_relative_path


class EndpointFailedError(Exception):
    """The endpoint cannot serve; the message becomes its FailureReason."""


@dataclass(frozen=True)
class EndpointOwner:
    account_id: int
    aws_account_id: str
    region: str


@dataclass(frozen=True)
class ServedModel:
    """What one serving process loads: the model, its head (if any) and the K to draft."""

    model_name: str
    model_dir: Path
    head_dir: Path | None
    num_speculative_tokens: int | None


def weight_bytes(model: ServedModel) -> int:
    """The bytes of weights the model's and its head's folders hold: what the process puts on its
    GPU, before its KV pool. Only the folders' own ``*.safetensors`` count, the one format a model
    and a head are accepted in and loaded from (a ``pytorch_model.bin`` or an ``original/`` copy
    beside them is never loaded); a folder not there yet counts nothing."""
    folders = [model.model_dir] if model.head_dir is None else [model.model_dir, model.head_dir]
    return sum(
        path.stat().st_size for folder in folders if folder.is_dir() for path in folder.glob("*.safetensors")
    )


@dataclass(frozen=True)
class VariantModel:
    """The variant's SageMaker model as the worker reads it: its container and S3 as its role."""

    name: str
    container: ContainerDefinition
    store: S3Store


def variant_model(settings: Settings, *, owner: EndpointOwner, spec: dict[str, Any]) -> VariantModel:
    """The model of the spec's variant, and S3 signed as the configuration's ExecutionRoleArn
    (or else the model's), as SageMaker reads model files and writes captured data."""
    name = str(spec["ProductionVariants"][0]["ModelName"])
    with session_scope() as session:
        model = get_sagemaker_model_by_name(
            session, account_id=owner.account_id, region=owner.region, name=name
        )
        if model is None:
            arn = sagemaker_model_arn(region=owner.region, aws_account_id=owner.aws_account_id, name=name)
            raise EndpointFailedError(f'Could not find model "{arn}".')
        container = None if model.primary_container is None else dict(model.primary_container)
        role_arn = spec.get("ExecutionRoleArn") or model.execution_role_arn
        credentials = (
            None
            if role_arn is None
            else get_role_credentials(
                session, account_id=owner.account_id, aws_account_id=owner.aws_account_id, arn=role_arn
            )
        )
    if container is None:
        raise EndpointFailedError(f"Model {name} has no PrimaryContainer to serve.")
    if credentials is None:
        raise EndpointFailedError(
            f"Model {name} needs an ExecutionRoleArn registered to its account to read its files "
            f"(got {role_arn or 'none'})."
        )
    store = S3Store(
        s3_client(
            settings,
            region=owner.region,
            credentials=(credentials.access_key_id, credentials.secret_access_key),
        )
    )
    return VariantModel(name=name, container=ContainerDefinition.model_validate(container), store=store)


def fetch_served_model(settings: Settings, *, owner: EndpointOwner, spec: dict[str, Any]) -> ServedModel:
    """Download (or find cached) the variant's model and head; EndpointFailedError says why not."""
    model = variant_model(settings, owner=owner, spec=spec)
    cache = ArtifactCache(cache_root(settings))
    try:
        source = model_location(OptimizationJobModelSource(), model.container)
        model_dir = _fetch(model.store, cache, source, "models", settings)
        head_source = eagle_head_location(model.container)
        head_dir = (
            None
            if head_source is None
            else resolve_head_dir(_fetch(model.store, cache, head_source, "heads", settings))
        )
    except (JobFailedError, ValueError) as error:
        raise EndpointFailedError(str(error)) from error
    k = None
    if head_dir is not None:
        k = served_speculative_tokens(json.loads((head_dir / "config.json").read_text(encoding="utf-8")))
    return ServedModel(
        model_name=model.name, model_dir=model_dir, head_dir=head_dir, num_speculative_tokens=k
    )


def _fetch(store: S3Store, cache: ArtifactCache, source: ModelData, kind: str, settings: Settings) -> Path:
    if source.compressed:
        obj = store.head(source.location)
        if obj is None:
            raise EndpointFailedError(f"Model archive not found: {source.uri}")
        name = PurePosixPath(source.location.key).name
        snapshot = S3Snapshot(
            source=source.uri, entries=(SnapshotEntry(safe_relative_path(name, uri=obj.uri), obj),)
        )
        return cache.fetch_archive(
            store, snapshot, kind=kind, max_unpacked_bytes=settings.max_model_archive_bytes
        )
    location = source.location.as_directory
    objects = store.list_objects(location)
    if not objects:
        raise EndpointFailedError(f"No model files under {location.uri}")
    return cache.fetch(store, S3Snapshot.under_prefix(location.uri, location.prefix, objects), kind=kind)
