"""``eaglenest datasets list|publish|add|remove``: the operator's built-in dataset catalog."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from core.job_errors import JobFailedError
from trainer.data.errors import DataFormatError


def register_dataset_commands(subparsers: Any) -> None:
    datasets = subparsers.add_parser(
        "datasets",
        help="manage the built-in datasets that jobs without TrainingDataSource train on",
        description="The catalog lives at EAGLENEST_BUILTIN_DATASETS_URI/catalog.json on the "
        "EAGLENEST_S3_* endpoint.",
    )
    commands = datasets.add_subparsers(dest="datasets_command", required=True, metavar="COMMAND")

    listing = commands.add_parser("list", help="print the catalog")
    listing.set_defaults(handler=run_list)

    publish = commands.add_parser(
        "publish",
        help="build the datasets that ship in Python packages and upload them with the catalog",
    )
    publish.add_argument("names", nargs="*", metavar="NAME", help="datasets to publish (default: all)")
    publish.set_defaults(handler=run_publish)

    add = commands.add_parser(
        "add",
        help="list a data file in the catalog: a local file (uploaded), or a file name already "
        "uploaded next to catalog.json (e.g. gsm8k_training.jsonl)",
    )
    add.add_argument("source", metavar="FILE", help="local path, or the name of an uploaded file")
    add.add_argument("--name", default=None, help="catalog name (default: the file name without suffixes)")
    add.add_argument("--description", default="", help="what the data is, for the catalog")
    add.set_defaults(handler=run_add)

    remove = commands.add_parser("remove", help="drop a dataset from the catalog (its file stays)")
    remove.add_argument("name", metavar="NAME")
    remove.set_defaults(handler=run_remove)


def _store() -> Any:
    from core.s3 import s3_client  # noqa: PLC0415
    from core.s3_store import S3Store  # noqa: PLC0415
    from db.settings import get_settings  # noqa: PLC0415 - light, but keep `--help` free of boto3

    settings = get_settings()
    return S3Store(s3_client(settings)), settings


def run_list(args: argparse.Namespace) -> int:
    from worker.builtin_catalog import catalog_location, read_catalog  # noqa: PLC0415

    store, settings = _store()
    location = catalog_location(settings)
    datasets = _guarded(lambda: read_catalog(store, location))
    if datasets is None:
        return 1
    if not datasets:
        print(f"{location.uri}: no catalog yet (eaglenest datasets publish)")
    for dataset in datasets:
        print(f"{dataset.name:24} {dataset.records or '?':>8} records  {dataset.file}  {dataset.description}")
    return 0


def run_publish(args: argparse.Namespace) -> int:
    from worker.builtin_catalog import builtin_prefix, publish_packaged  # noqa: PLC0415

    store, settings = _store()
    added = _guarded(lambda: publish_packaged(store, settings, list(args.names)))
    if added is None:
        return 1
    prefix = builtin_prefix(settings)
    for dataset in added:
        print(f"{prefix.child(dataset.file).uri}: {dataset.records} records ({dataset.source_package})")
    print(f"{prefix.child('catalog.json').uri}: updated")
    return 0


def run_add(args: argparse.Namespace) -> int:
    from worker.builtin_catalog import add_dataset, builtin_prefix  # noqa: PLC0415

    store, settings = _store()
    dataset = _guarded(
        lambda: add_dataset(store, settings, args.source, name=args.name, description=args.description)
    )
    if dataset is None:
        return 1
    print(
        f"{builtin_prefix(settings).child(dataset.file).uri}: listed as {dataset.name!r}, "
        f"{dataset.records} records"
    )
    return 0


def run_remove(args: argparse.Namespace) -> int:
    from worker.builtin_catalog import remove_dataset  # noqa: PLC0415

    store, settings = _store()
    removed = _guarded(lambda: remove_dataset(store, settings, args.name))
    if removed is None:
        return 1
    if not removed:
        print(f"eaglenest datasets: no dataset named {args.name!r} in the catalog", file=sys.stderr)
        return 1
    print(f"removed {args.name!r} from the catalog")
    return 0


def _guarded(action: Any) -> Any:
    """Run ``action``; bad input or an S3 failure is one line on stderr, not a traceback."""
    try:
        return action()
    except (JobFailedError, DataFormatError, ValueError, OSError) as error:
        print(f"eaglenest datasets: {error}", file=sys.stderr)
        return None
