"""``eaglenest distillation-cache list|delete``: the shared cache of distilled conversations."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from core.job_errors import JobFailedError


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "distillation-cache",
        help="list or delete the conversations jobs distilled for later jobs (the distillation cache)",
        description="The cache lives under EAGLENEST_DISTILLATION_CACHE_URI on the EAGLENEST_S3_* endpoint; "
        "one entry per target model, data and generation settings.",
    )
    commands = parser.add_subparsers(dest="cache_command", required=True, metavar="COMMAND")
    listing = commands.add_parser("list", help="print every entry: records, size, parts, model")
    listing.set_defaults(handler=run_list)
    delete = commands.add_parser("delete", help="delete an entry: later jobs distil its conversations again")
    for command in (listing, delete):
        command.add_argument(
            "--state-dir",
            type=Path,
            default=None,
            help="the cache of a running embedded stack (`eaglenest up --state-dir`), reached with its "
            "S3 endpoint and the service's own key; without it, the EAGLENEST_* settings",
        )
    delete.add_argument("key", metavar="KEY", help="the entry's key, as `list` prints it")
    delete.set_defaults(handler=run_delete)


def _cache(state_dir: Path | None) -> Any:
    """The cache with the service's S3 identity; None (after saying why) when none is configured."""
    from core.s3 import S3Location, s3_client  # noqa: PLC0415 - keep `--help` free of boto3
    from core.s3_store import S3Store  # noqa: PLC0415
    from db.settings import get_settings  # noqa: PLC0415
    from worker.distillation_cache import DistillationCache  # noqa: PLC0415 - loads the trainer's config

    if state_dir is not None:
        return _embedded_stack_cache(state_dir)
    settings = get_settings()
    if settings.distillation_cache_uri is None:
        print("no distillation cache: EAGLENEST_DISTILLATION_CACHE_URI is not set")
        return None
    root = S3Location.parse(settings.distillation_cache_uri, field="EAGLENEST_DISTILLATION_CACHE_URI")
    return DistillationCache(S3Store(s3_client(settings)), root)


def _embedded_stack_cache(state_dir: Path) -> Any:
    """The cache `eaglenest up` configured for its worker, with the state directory's admin key."""
    from core.s3 import S3Location  # noqa: PLC0415
    from core.s3_store import S3Store  # noqa: PLC0415
    from stack.embedded import EMBEDDED_DISTILLATION_CACHE_URI  # noqa: PLC0415
    from stack.layout import StateLayout  # noqa: PLC0415
    from stack.s3_identities import read_admin_credentials  # noqa: PLC0415
    from stack.seaweedfs import S3Endpoint  # noqa: PLC0415
    from stack.stack_file import read_stack_file  # noqa: PLC0415
    from worker.distillation_cache import DistillationCache  # noqa: PLC0415

    try:
        info = read_stack_file(state_dir)
        admin = read_admin_credentials(StateLayout(state_dir).s3_root)
    except FileNotFoundError as error:
        print(f"error: no embedded stack in {state_dir} ({error.filename} is missing): start `eaglenest up`")
        return None
    endpoint = S3Endpoint(info.s3_endpoint_url, admin.access_key_id, admin.secret_access_key, info.region)
    root = S3Location.parse(EMBEDDED_DISTILLATION_CACHE_URI, field="cache")
    return DistillationCache(S3Store(endpoint.client()), root)


def run_list(args: argparse.Namespace) -> int:
    cache = _cache(args.state_dir)
    if cache is None:
        return 1
    try:
        entries = cache.entries()
    except JobFailedError as error:  # S3 failures, worded with the URI
        print(f"error: {error}")
        return 1
    if not entries:
        print(f"{cache.root.uri}: no entries")
    for entry in entries:
        manifest = entry.manifest or {}
        settings = manifest.get("generation", {})
        generation = " ".join(
            f"{name}={settings.get(name, '?')}"
            for name in ("regenerate_turns", "temperature", "max_new_tokens")
        )
        print(
            f"{entry.key}  {entry.records:>7} records  {entry.size / 1e6:8.2f} MB  "
            f"{len(entry.parts):>3} parts  model {manifest.get('model_uri', '?')}  "
            f"data {manifest.get('data_uri', '?')}  {generation}"
        )
    return 0


def run_delete(args: argparse.Namespace) -> int:
    cache = _cache(args.state_dir)
    if cache is None:
        return 1
    try:
        deleted = cache.delete(args.key)
    except JobFailedError as error:
        print(f"error: {error}")
        return 1
    if not deleted:
        print(f"{cache.location(args.key).uri}: no such entry")
        return 1
    print(f"{cache.location(args.key).uri}: deleted ({deleted} objects)")
    return 0
