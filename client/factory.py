"""``eaglenest_client``: a real boto3 SageMaker client for an eaglenest endpoint, with our waiter.

Nothing is wrapped: the client is the class botocore builds for SageMaker, created from a
botocore session with two documented extension points filled in:
- its data loader merges our waiter model into SageMaker's waiters-2 (so ``waiter_names``,
  ``get_waiter`` and the generated docs all see ``optimization_job_completed_or_stopped``);
- ``creating-client-class.sagemaker`` adds one base class (as boto3 does for S3's transfer
  methods) whose ``get_waiter`` returns the waiter that puts FailureReason in its error.
"""

from __future__ import annotations

import os
from typing import Any, cast

import boto3
import botocore.session
from botocore.config import Config
from botocore.loaders import Loader
from botocore.waiter import Waiter

from client.connection import ClientSettings, CredentialsLike, resolve_client_settings
from client.job_waiter import optimization_job_waiter
from client.waiter_model import (
    OPTIMIZATION_JOB_WAITER,
    SERVICE_NAME,
    WAITERS_TYPE,
    eaglenest_waiter_model,
    merge_waiter_models,
)


class EaglenestLoader(Loader):  # type: ignore[misc]  # botocore ships no type hints
    """botocore's loader, with our waiters merged into whatever SageMaker waiters it finds."""

    def load_service_model(self, service_name: str, type_name: str, api_version: str | None = None) -> Any:
        model = super().load_service_model(service_name, type_name, api_version)
        if service_name == SERVICE_NAME and type_name == WAITERS_TYPE:
            # The loader caches and returns the same dict every time: merge into a copy.
            return merge_waiter_models(model, eaglenest_waiter_model())
        return model


class EaglenestSageMakerMixin:
    """Added to the generated SageMaker client class; see the module docstring."""

    # Set by eaglenest_client: where the client talks to and where the job outputs are.
    eaglenest_settings: ClientSettings | None = None

    def get_waiter(self, waiter_name: str) -> Waiter:
        waiter: Waiter = cast(Any, super()).get_waiter(waiter_name)
        if waiter.name == OPTIMIZATION_JOB_WAITER:
            return optimization_job_waiter(self)
        return waiter


def eaglenest_client(
    endpoint_url: str | None = None,
    region: str | None = None,
    credentials: CredentialsLike | None = None,
    *,
    config: Config | None = None,
) -> Any:
    """A boto3 SageMaker client for eaglenest (see client/connection.py for where settings come from).

    ``credentials`` is botocore ``Credentials`` or ``(access_key_id, secret_access_key[, token])``.
    """
    settings = resolve_client_settings(endpoint_url=endpoint_url, region=region, credentials=credentials)
    session = boto3.Session(botocore_session=eaglenest_botocore_session(profile=settings.profile))
    frozen = None if settings.credentials is None else settings.credentials.get_frozen_credentials()
    client = session.client(
        "sagemaker",
        endpoint_url=settings.endpoint_url,
        region_name=settings.region,
        aws_access_key_id=None if frozen is None else frozen.access_key,
        aws_secret_access_key=None if frozen is None else frozen.secret_key,
        aws_session_token=None if frozen is None else frozen.token,
        config=config,
    )
    client.eaglenest_settings = settings
    return client


def eaglenest_botocore_session(*, profile: str | None = None) -> botocore.session.Session:
    session = botocore.session.Session(profile=profile)
    session.register_component("data_loader", _loader(session.get_config_variable("data_path")))
    session.register("creating-client-class.sagemaker", _add_sagemaker_mixin)
    return session


def _loader(data_path: str | None) -> EaglenestLoader:
    """What botocore's create_loader builds (AWS_DATA_PATH entries first), as an EaglenestLoader."""
    if data_path is None:
        return EaglenestLoader()
    paths = [os.path.expanduser(os.path.expandvars(path)) for path in data_path.split(os.pathsep)]
    return EaglenestLoader(extra_search_paths=paths)


def _add_sagemaker_mixin(base_classes: list[type], **_: Any) -> None:
    base_classes.insert(0, EaglenestSageMakerMixin)
