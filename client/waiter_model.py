"""The optimization-job waiter as a botocore waiter model (version 2), and merging it with SageMaker's.

botocore ships no waiter for optimization jobs. ``waiters-2.json`` next to this module
defines ``OptimizationJobCompletedOrStopped`` in botocore's own format: success on COMPLETED
or STOPPED, failure on FAILED, on ResourceNotFound (the job does not exist) and on
ValidationException. It polls every 30 s for up to 2880 attempts: 24 hours, SageMaker's
default MaxRuntimeInSeconds. boto3 callers can change both with ``WaiterConfig``.

botocore reads one ``waiters-2.json`` per service and API version, the first found on its
search path, so ours must always travel merged with the shipped SageMaker waiters or it
would hide them.
"""

from __future__ import annotations

import copy
import importlib.util
import json
from importlib import resources
from pathlib import Path
from typing import Any

from botocore.exceptions import DataNotFoundError
from botocore.loaders import Loader

SERVICE_NAME = "sagemaker"
WAITERS_TYPE = "waiters-2"
OPTIMIZATION_JOB_WAITER = "OptimizationJobCompletedOrStopped"
OPTIMIZATION_JOB_WAITER_BOTO3_NAME = "optimization_job_completed_or_stopped"


def eaglenest_waiter_model() -> dict[str, Any]:
    """A fresh copy of our waiters-2.json (callers may mutate it)."""
    document: dict[str, Any] = json.loads(
        resources.files(__package__).joinpath("waiters-2.json").read_text(encoding="utf-8")
    )
    return document


def shipped_data_paths() -> list[str]:
    """botocore's bundled data, then that of the botocore the AWS CLI vendors (awscli >= 1.44
    ships its own copy as ``awscli.botocore``, which ``aws`` uses instead of the installed one).

    Found without importing awscli: importing it rewrites AWS_DATA_PATH and the import system.
    """
    paths = [Loader.BUILTIN_DATA_PATH]
    spec = importlib.util.find_spec("awscli")
    if spec is not None and spec.origin is not None:
        vendored = Path(spec.origin).parent / "botocore" / "data"
        if vendored.is_dir() and str(vendored) != Loader.BUILTIN_DATA_PATH:
            paths.append(str(vendored))
    return paths


def shipped_loader(data_path: str) -> Loader:
    """A loader that sees only ``data_path``, never ~/.aws/models or AWS_DATA_PATH.

    Installing reads the shipped waiters through it, so an earlier install (or any user file)
    never feeds back into what is installed.
    """
    return Loader(extra_search_paths=[data_path], include_default_search_paths=False)


def sagemaker_api_version(loader: Loader) -> str:
    version: str = loader.determine_latest_version(SERVICE_NAME, "service-2")
    return version


def shipped_sagemaker_waiters() -> tuple[str, dict[str, Any]]:
    """(SageMaker's API version, the union of the shipped SageMaker waiter models)."""
    loaders = [shipped_loader(path) for path in shipped_data_paths()]
    api_version = sagemaker_api_version(loaders[0])
    models = []
    for loader in loaders:
        try:
            models.append(loader.load_service_model(SERVICE_NAME, WAITERS_TYPE, api_version))
        except DataNotFoundError:
            continue  # a vendored copy on another API version carries nothing for this one
    return api_version, merge_waiter_models(*models)


def merge_waiter_models(*models: dict[str, Any]) -> dict[str, Any]:
    """One version-2 model holding every waiter; a later model wins on a name clash."""
    waiters: dict[str, Any] = {}
    for model in models:
        version = model.get("version")
        if version != 2:
            raise ValueError(f"waiter model version must be 2, got {version!r}")
        waiters.update(copy.deepcopy(model["waiters"]))
    return {"version": 2, "waiters": waiters}
