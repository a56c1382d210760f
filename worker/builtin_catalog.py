"""The built-in dataset catalog on S3: what a job without TrainingDataSource trains on.

``<builtin_datasets_uri>/catalog.json`` lists the datasets (``{"datasets": [{"name",
"file", "description", "records", "sha256", "source_package", "source_version"}]}``, the
format ``python -m trainer prepare-data`` writes); each ``file`` lies next to it. Operators
fill it with ``eaglenest datasets publish`` (the datasets that ship in Python packages) and
``eaglenest datasets add`` (their own files, e.g. gsm8k_training.jsonl).
"""

from __future__ import annotations

import hashlib
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from core.job_errors import JobFailedError
from core.model_source import parse_s3_uri
from core.s3 import S3Location
from core.s3_store import S3Object, S3Store
from db.settings import Settings
from trainer.data.loader import load_conversations
from worker.s3_snapshot import S3Snapshot, SnapshotEntry, safe_relative_path

CATALOG_FILE = "catalog.json"


@dataclass(frozen=True)
class CatalogDataset:
    name: str
    file: str
    description: str = ""
    records: int | None = None
    sha256: str | None = None
    source_package: str | None = None
    source_version: str | None = None

    @classmethod
    def from_json(cls, entry: Any, *, where: str) -> CatalogDataset:
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
            raise JobFailedError(f"{where}: every dataset entry needs a 'name' and a 'file'")
        file = entry.get("file")
        if not isinstance(file, str) or not file or "/" in file:
            raise JobFailedError(
                f"{where}: dataset {entry['name']!r} needs a 'file' name next to the catalog"
            )
        records, sha256 = entry.get("records"), entry.get("sha256")
        return cls(
            name=entry["name"],
            file=file,
            description=str(entry.get("description") or ""),
            records=int(records) if isinstance(records, int) else None,
            sha256=str(sha256) if sha256 else None,
            source_package=_text(entry.get("source_package")),
            source_version=_text(entry.get("source_version")),
        )


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def builtin_prefix(settings: Settings) -> S3Location:
    return parse_s3_uri(settings.builtin_datasets_uri, field="EAGLENEST_BUILTIN_DATASETS_URI").as_directory


def catalog_location(settings: Settings) -> S3Location:
    return builtin_prefix(settings).child(CATALOG_FILE)


def read_catalog(store: S3Store, location: S3Location) -> list[CatalogDataset]:
    """The catalog's datasets; an empty list when there is no catalog yet."""
    if store.head(location) is None:
        return []
    document = store.read_json(location)
    entries = document.get("datasets") if isinstance(document, dict) else None
    if not isinstance(entries, list):
        raise JobFailedError(f'{location.uri}: expected {{"datasets": [...]}}')
    return [CatalogDataset.from_json(entry, where=location.uri) for entry in entries]


def builtin_snapshot(store: S3Store, settings: Settings) -> tuple[S3Snapshot, S3Object, list[str]]:
    """Every dataset the catalog lists, pinned to its ETag; the catalog object; the dataset names."""
    root = catalog_location(settings)
    catalog_object = store.head(root)
    if catalog_object is None:
        raise JobFailedError(
            f"The built-in dataset catalog {root.uri} does not exist; an operator publishes it with "
            "`eaglenest datasets publish`"
        )
    catalog = read_catalog(store, root)
    if not catalog:
        raise JobFailedError(f"The built-in dataset catalog {root.uri} lists no datasets")
    prefix = S3Location(root.bucket, root.key.removesuffix(CATALOG_FILE))
    entries = []
    for dataset in catalog:
        location = prefix.child(dataset.file)
        found = store.head(location)
        if found is None:
            raise JobFailedError(
                f"Built-in dataset {dataset.name!r} is listed in {root.uri} but {location.uri} does not exist"
            )
        entries.append(SnapshotEntry(safe_relative_path(dataset.file, uri=location.uri), found))
    snapshot = S3Snapshot(source=prefix.uri, entries=tuple(entries))
    return snapshot, catalog_object, [dataset.name for dataset in catalog]


def write_catalog(store: S3Store, location: S3Location, datasets: list[CatalogDataset]) -> None:
    by_name = {dataset.name: dataset for dataset in datasets}
    body = {
        "datasets": [
            {key: value for key, value in asdict(by_name[name]).items() if value is not None}
            for name in sorted(by_name)
        ]
    }
    store.put_json(body, location)


def merge(existing: list[CatalogDataset], added: list[CatalogDataset]) -> list[CatalogDataset]:
    """Added entries replace same-named ones; the others stay."""
    names = {dataset.name for dataset in added}
    return [dataset for dataset in existing if dataset.name not in names] + added


def publish_packaged(store: S3Store, settings: Settings, names: list[str]) -> list[CatalogDataset]:
    """Build the named package datasets (all when empty), upload them, then update the catalog."""
    from trainer.data.builtin import BUILTIN_DATASETS, prepare_builtin  # noqa: PLC0415 - heavy, on demand

    prefix = builtin_prefix(settings)
    store.ensure_bucket(prefix.bucket)
    with tempfile.TemporaryDirectory(prefix="eaglenest-datasets-") as scratch:
        entries = prepare_builtin(names or sorted(BUILTIN_DATASETS), Path(scratch))
        for entry in entries:
            store.upload_file(Path(scratch) / entry.file, prefix.child(entry.file))
    added = [
        CatalogDataset(
            name=entry.name,
            file=entry.file,
            description=entry.description,
            records=entry.records,
            sha256=entry.sha256,
            source_package=entry.source_package,
            source_version=entry.source_version,
        )
        for entry in entries
    ]
    # The catalog goes last: a job never sees an entry whose file is not uploaded yet.
    location = catalog_location(settings)
    write_catalog(store, location, merge(read_catalog(store, location), added))
    return added


def add_dataset(
    store: S3Store, settings: Settings, source: str, *, name: str | None, description: str
) -> CatalogDataset:
    """List an operator's data file in the catalog: a local file (uploaded) or a file already
    next to the catalog. Every record must parse; a bad line is reported by file and line."""
    prefix = builtin_prefix(settings)
    local = Path(source)
    with tempfile.TemporaryDirectory(prefix="eaglenest-dataset-") as scratch:
        if local.is_file():
            file_name = local.name
            path = local
        else:
            file_name = source
            path = Path(scratch) / file_name
            if "/" in file_name or store.head(prefix.child(file_name)) is None:
                raise JobFailedError(
                    f"{source}: neither a local file nor an object {prefix.child(source).uri}"
                )
            store.download(prefix.child(file_name), path)
        records = load_conversations([path], max_skip_fraction=0.0).summary.records_read
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        store.ensure_bucket(prefix.bucket)
        if local.is_file():
            store.upload_file(path, prefix.child(file_name))
    dataset = CatalogDataset(
        name=name or dataset_name(file_name),
        file=file_name,
        description=description,
        records=records,
        sha256=digest,
        source_package="operator",
    )
    location = catalog_location(settings)
    write_catalog(store, location, merge(read_catalog(store, location), [dataset]))
    return dataset


def remove_dataset(store: S3Store, settings: Settings, name: str) -> bool:
    location = catalog_location(settings)
    existing = read_catalog(store, location)
    kept = [dataset for dataset in existing if dataset.name != name]
    if len(kept) == len(existing):
        return False
    write_catalog(store, location, kept)
    return True


def dataset_name(file_name: str) -> str:
    """``gsm8k_training.jsonl.gz`` -> ``gsm8k_training``."""
    name = file_name
    for suffix in (".gz", ".jsonl", ".json"):
        name = name.removesuffix(suffix)
    return name
