"""The AWS CLI side: ``aws sagemaker wait optimization-job-completed-or-stopped``.

botocore looks for ``<data path>/sagemaker/<api version>/waiters-2.json`` in AWS_DATA_PATH's
entries, then ~/.aws/models, then its own data, and uses the first file it finds. A file
of ours there therefore hides the shipped SageMaker waiters unless it carries them too, so
the installed file is: waiters a user added to that file before, then botocore's shipped
SageMaker waiters (read fresh from the installed botocore and the AWS CLI's vendored copy, so
re-running after an upgrade picks up new ones), then ours.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from client.waiter_model import (
    SERVICE_NAME,
    WAITERS_TYPE,
    eaglenest_waiter_model,
    merge_waiter_models,
    shipped_sagemaker_waiters,
)


@dataclass(frozen=True)
class InstalledWaiters:
    path: Path
    waiters: list[str]  # every waiter in the installed file
    shipped: list[str]  # botocore's SageMaker waiters it carries
    kept: list[str]  # waiters already in the file that are neither shipped nor ours


def default_data_path(environ: Mapping[str, str] | None = None) -> Path:
    """The first directory botocore searches: AWS_DATA_PATH's first entry, else ~/.aws/models."""
    env = os.environ if environ is None else environ
    entries = [entry for entry in env.get("AWS_DATA_PATH", "").split(os.pathsep) if entry]
    if entries:
        return Path(os.path.expanduser(os.path.expandvars(entries[0])))
    return Path.home() / ".aws" / "models"


def install_waiters(data_path: Path | None = None) -> InstalledWaiters:
    api_version, shipped = shipped_sagemaker_waiters()
    ours = eaglenest_waiter_model()
    path = (data_path or default_data_path()) / SERVICE_NAME / api_version / f"{WAITERS_TYPE}.json"
    existing = _existing(path)
    known = set(shipped["waiters"]) | set(ours["waiters"])
    kept = {name: config for name, config in existing.items() if name not in known}
    merged = merge_waiter_models({"version": 2, "waiters": kept}, shipped, ours)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".json.tmp")
    partial.write_text(json.dumps(merged, indent=2) + "\n", encoding="utf-8")
    os.replace(partial, path)  # the CLI never reads half a file
    return InstalledWaiters(
        path=path, waiters=sorted(merged["waiters"]), shipped=sorted(shipped["waiters"]), kept=sorted(kept)
    )


def _existing(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as error:
        raise ValueError(f"{path} is not JSON ({error}); move it away and install again") from None
    if (
        not isinstance(document, dict)
        or document.get("version") != 2
        or not isinstance(document.get("waiters"), dict)
    ):
        raise ValueError(f"{path} is not a version 2 waiter model; move it away and install again")
    waiters: dict[str, Any] = document["waiters"]
    return waiters
