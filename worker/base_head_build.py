"""Building a model's base head ahead of any job (``eaglenest base-heads build``).

The same recipe, budget setting and store as the 'base' stage (worker.stages.base_head), run
by an operator with the service's S3 identity: jobs on the model then find the head ready
instead of spending their own time on it.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable

from core.job_errors import JobFailedError
from core.s3 import S3Location
from core.s3_store import S3Store
from db.settings import Settings
from trainer.eagle.reporting import progress_printer
from trainer.train import HEAD_DIRNAME, train
from worker.artifact_cache import ArtifactCache, cache_root
from worker.artifacts import TrainingDataInput
from worker.base_head_recipe import base_head_config, name_the_verifier
from worker.base_heads import BaseHead, BaseHeadStore, base_head_key, base_head_manifest
from worker.builtin_catalog import builtin_snapshot
from worker.s3_snapshot import S3Snapshot
from worker.stages.data import fetch_training_data

Say = Callable[[str], None]


def build_base_head(
    settings: Settings,
    store: S3Store,
    heads: BaseHeadStore,
    model_uri: str,
    *,
    minutes: float,
    force: bool = False,
    say: Say = print,
) -> BaseHead:
    """The base head of the model under ``model_uri`` (an S3 prefix): the committed one, unless
    ``force`` or there is none; then one trained for ``minutes`` on the built-in data."""
    location = S3Location.parse(model_uri, field="--model").as_directory
    snapshot = S3Snapshot.under_prefix(location.uri, location.prefix, store.list_objects(location))
    if snapshot.entry("config.json") is None:
        raise JobFailedError(f"No model under {location.uri}: config.json not found")
    key = base_head_key(snapshot)
    existing = heads.find(key)
    if existing is not None and not force:
        say(f"{location.uri}: base head {existing.location.uri} exists already (--force builds another)")
        return existing
    cache = ArtifactCache(cache_root(settings))
    say(f"Fetching {location.uri} ({snapshot.total_bytes / 1e6:.0f} MB) into {cache.root}")
    model_dir = cache.fetch(store, snapshot, kind="models")
    architecture = (json.loads((model_dir / "config.json").read_text()).get("architectures") or ["?"])[0]
    data = _builtin_data(settings, store, cache, say)
    run_dir = cache.root / "base-heads" / key / uuid.uuid4().hex[:8]
    config = base_head_config(
        settings,
        model_dir=model_dir,
        data_files=[] if data is None else data.files,
        run_dir=run_dir,
        budget_minutes=minutes,
    )
    say(f"Training the base head of {location.uri} for {minutes:g} minutes in {run_dir}")
    result = train(config, progress_printer(say))
    head_dir = run_dir / HEAD_DIRNAME
    name_the_verifier(head_dir, location.uri)
    manifest = base_head_manifest(
        model_uri=location.uri,
        model=snapshot,
        architecture=str(architecture),
        data=data,
        result=result,
        built_by="eaglenest base-heads build",
    )
    return heads.publish(key, head_dir, build=f"cli-{uuid.uuid4().hex[:12]}", manifest=manifest)


def _builtin_data(
    settings: Settings, store: S3Store, cache: ArtifactCache, say: Say
) -> TrainingDataInput | None:
    try:
        snapshot, listing, datasets = builtin_snapshot(store, settings)
    except JobFailedError as error:
        say(f"No built-in datasets ({error}); the base head learns from self-instruct prompts only")
        return None
    return fetch_training_data(
        store,
        cache,
        snapshot,
        kind="BuiltIn",
        listing=listing,
        datasets=datasets,
        max_skip_fraction=settings.max_skipped_record_fraction,
    )
