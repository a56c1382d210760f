"""``eaglenest base-heads build|list|delete``: the base heads (Base EAGLE), one per base model."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from core.job_errors import JobFailedError
from trainer.cli import add_device_argument


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "base-heads",
        help="build, list or delete the base heads jobs benchmark as Base EAGLE (one per base model)",
        description="The base heads live under EAGLENEST_BASE_HEADS_URI on the EAGLENEST_S3_* endpoint, "
        "keyed by the model's content hash (its files' paths and ETags). A job that needs one "
        "nobody built yet trains it first; `build` does that ahead of time.",
    )
    commands = parser.add_subparsers(dest="base_heads_command", required=True, metavar="COMMAND")
    build = commands.add_parser(
        "build", help="train a model's base head on the built-in data now, unless it has one"
    )
    build.add_argument(
        "--model", required=True, metavar="S3_URI", help="the model's S3 prefix (s3://bucket/dir/)"
    )
    build.add_argument(
        "--minutes",
        type=float,
        default=None,
        help="training budget (default EAGLENEST_BASE_HEAD_TRAIN_MINUTES, 30)",
    )
    build.add_argument("--force", action="store_true", help="build a new head even if the model has one")
    build.set_defaults(handler=run_build)
    listing = commands.add_parser("list", help="print every base head: key, model, build, who built it")
    listing.set_defaults(handler=run_list)
    delete = commands.add_parser("delete", help="delete a base head: the next job on its model builds one")
    delete.add_argument("key", metavar="KEY", help="the head's key, as `list` prints it")
    delete.set_defaults(handler=run_delete)
    ship = commands.add_parser(
        "ship",
        help="train a head to ship with eaglenest (heads/<model>/): from scratch, locally, with its manifest",
        description="Rebuilds a shipped base head: the base-head recipe on the built-in datasets plus "
        "self-instruct prompts, every reply distilled from the target, exported in bf16 into --out with a "
        "manifest (recipe, data sha256s, budget, hardware, draft vocabulary coverage, tau and speedup on "
        "chit-chat openers, each file's sha256). Jobs on exactly that model then start from it.",
    )
    ship.add_argument("--model-dir", type=Path, required=True, help="the target (Hugging Face directory)")
    ship.add_argument("--out", type=Path, required=True, help="where the head goes, e.g. heads/<model>")
    ship.add_argument("--minutes", type=float, required=True, help="training budget, wall minutes")
    ship.add_argument(
        "--work-dir",
        type=Path,
        default=None,
        help="data and run (default: .cache/shipped-head-builds/<out's name>)",
    )
    ship.add_argument(
        "--continue",
        dest="continue_build",
        action="store_true",
        help="start from the head already in --out and every reply its builds distilled "
        "(distilled.jsonl.gz), with a new seed: the budget adds to theirs (the manifest's chain lists them)",
    )
    ship.add_argument(
        "--datasets",
        nargs="*",
        default=["humaneval", "champ"],
        help="built-in datasets (default humaneval champ); none after the flag: self-instruct prompts only",
    )
    _add_measurement_arguments(ship)
    ship.add_argument("--hardware-note", default="", help="what the manifest should say about the machine")
    ship.add_argument(
        "--train-overrides", default="{}", help="JSON TrainConfig fields over the recipe (tests, experiments)"
    )
    ship.set_defaults(handler=run_ship)
    evaluate = commands.add_parser(
        "evaluate",
        help="measure a shipped head's tau and speedup on this machine; --write records it in its manifest",
        description="Greedy plain and speculative decoding (`python -m trainer eval`) of chit-chat openers, "
        "prompts unlike the shipped recipe's data, on this machine: how a head built on a GPU gets its CPU "
        "figures, and how two heads are compared on one machine. --write makes the measurement the "
        "manifest's evaluation and keeps the earlier ones (the head's files, and so their sha256, are "
        "unchanged).",
    )
    evaluate.add_argument("--model-dir", type=Path, required=True, help="the target (Hugging Face directory)")
    evaluate.add_argument("--head", type=Path, required=True, help="the head's folder, e.g. heads/<model>")
    _add_measurement_arguments(evaluate)
    evaluate.add_argument("--k", type=int, default=3, help="draft tokens per verification (default 3)")
    evaluate.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1)")
    add_device_argument(evaluate)  # as `trainer eval` takes it: the measurement runs there
    evaluate.add_argument(
        "--work-dir", type=Path, default=None, help="prompts and report (default: a temporary folder)"
    )
    evaluate.add_argument(
        "--write", action="store_true", help="record the measurement in the head's manifest.json"
    )
    evaluate.add_argument(
        "--bind",
        action="store_true",
        help="with --write: name this machine's build of the model as the head's target (a head built on "
        "another machine, e.g. a GPU image with another transformers, whose config.json differs); the "
        "weights must be the same bytes",
    )
    evaluate.set_defaults(handler=run_evaluate)
    check = commands.add_parser(
        "check-shipped", help="check that a model's shipped head matches its manifest (`make model` runs it)"
    )
    check.add_argument("--model-dir", type=Path, required=True, help="the target (Hugging Face directory)")
    check.set_defaults(handler=run_check_shipped)
    for command in (build, listing, delete):
        command.add_argument(
            "--state-dir",
            type=Path,
            default=None,
            help="the base heads of a running embedded stack (`eaglenest up --state-dir`), reached with "
            "its S3 endpoint and the service's own key; without it, the EAGLENEST_* settings",
        )


def _add_measurement_arguments(parser: argparse.ArgumentParser) -> None:
    """How a head is measured, the same for `ship` and `evaluate`."""
    parser.add_argument(
        "--eval-prompts", type=int, default=20, help="chit-chat openers measured (default 20)"
    )
    parser.add_argument("--eval-max-new-tokens", type=int, default=64, help="tokens per prompt (default 64)")


def _open(state_dir: Path | None) -> tuple[Any, Any, Any] | None:
    """(settings, the service's S3 store, the base-head store), or None after saying why not."""
    from core.s3 import S3Location, s3_client  # noqa: PLC0415 - keep `--help` free of boto3
    from core.s3_store import S3Store  # noqa: PLC0415
    from db.settings import get_settings  # noqa: PLC0415
    from worker.base_heads import BaseHeadStore  # noqa: PLC0415

    settings = get_settings()
    if state_dir is not None:
        from stack.embedded import EMBEDDED_BASE_HEADS_URI  # noqa: PLC0415
        from stack.layout import StateLayout  # noqa: PLC0415
        from stack.s3_identities import read_admin_credentials  # noqa: PLC0415
        from stack.seaweedfs import S3Endpoint  # noqa: PLC0415
        from stack.stack_file import read_stack_file  # noqa: PLC0415

        try:
            info = read_stack_file(state_dir)
            admin = read_admin_credentials(StateLayout(state_dir).s3_root)
        except FileNotFoundError as error:
            print(
                f"error: no embedded stack in {state_dir} ({error.filename} is missing): start `eaglenest up`"
            )
            return None
        endpoint = S3Endpoint(info.s3_endpoint_url, admin.access_key_id, admin.secret_access_key, info.region)
        settings = settings.model_copy(
            update={
                "base_heads_uri": EMBEDDED_BASE_HEADS_URI,
                "state_dir": state_dir,
            }
        )
        store = S3Store(endpoint.client())
    else:
        store = S3Store(s3_client(settings))
    if settings.base_heads_uri is None:
        print("no base heads: EAGLENEST_BASE_HEADS_URI is not set")
        return None
    root = S3Location.parse(settings.base_heads_uri, field="EAGLENEST_BASE_HEADS_URI")
    return settings, store, BaseHeadStore(store, root)


def run_build(args: argparse.Namespace) -> int:
    from worker.base_head_build import build_base_head  # noqa: PLC0415 - loads torch and the trainer

    opened = _open(args.state_dir)
    if opened is None:
        return 1
    settings, store, heads = opened
    minutes = args.minutes if args.minutes is not None else settings.base_head_train_minutes
    try:
        head = build_base_head(settings, store, heads, args.model, minutes=minutes, force=args.force)
    except (JobFailedError, ValueError) as error:
        print(f"error: {error}")
        return 1
    print(f"{head.key}  {head.location.uri}  sha256 {head.sha256}")
    return 0


def run_list(args: argparse.Namespace) -> int:
    opened = _open(args.state_dir)
    if opened is None:
        return 1
    heads = opened[2]
    try:
        entries = heads.entries()
    except JobFailedError as error:
        print(f"error: {error}")
        return 1
    if not entries:
        print(f"{heads.root.uri}: no base heads")
    for entry in entries:
        if isinstance(entry, str):
            print(f"{entry}  (no committed build)")
            continue
        manifest = entry.manifest
        print(
            f"{entry.key}  model {manifest.get('model_uri', '?')}  {manifest.get('architecture', '?')}  "
            f"build {entry.location.uri}  by {manifest.get('built_by', '?')}  "
            f"at {manifest.get('committed_at', '?')}"
        )
    return 0


def run_delete(args: argparse.Namespace) -> int:
    opened = _open(args.state_dir)
    if opened is None:
        return 1
    heads = opened[2]
    try:
        deleted = heads.delete(args.key)
    except JobFailedError as error:
        print(f"error: {error}")
        return 1
    if not deleted:
        print(f"{heads.location(args.key).uri}: no such base head")
        return 1
    print(f"{heads.location(args.key).uri}: deleted ({deleted} objects)")
    return 0


def run_ship(args: argparse.Namespace) -> int:
    import json  # noqa: PLC0415
    import shlex  # noqa: PLC0415
    import sys  # noqa: PLC0415

    from db.settings import get_settings  # noqa: PLC0415
    from worker.shipped_head_build import ShipOptions, ship_base_head  # noqa: PLC0415 - loads torch
    from worker.shipped_head_eval import EvalSettings, summary_line  # noqa: PLC0415

    options = ShipOptions(
        model_dir=args.model_dir,
        out_dir=args.out,
        work_dir=args.work_dir or Path(".cache") / "shipped-head-builds" / args.out.name,
        minutes=args.minutes,
        datasets=tuple(args.datasets),
        evaluation=EvalSettings(prompts=args.eval_prompts, max_new_tokens=args.eval_max_new_tokens),
        hardware_note=args.hardware_note,
        command=shlex.join(["eaglenest", *sys.argv[1:]]),
        overrides=json.loads(args.train_overrides),
        continue_build=args.continue_build,
    )
    manifest = ship_base_head(get_settings(), options)
    print(
        f"{args.out}: {summary_line(manifest['evaluation'])}; "
        f"model.safetensors sha256 {manifest['files']['model.safetensors']}"
    )
    return 0


def run_evaluate(args: argparse.Namespace) -> int:
    import tempfile  # noqa: PLC0415

    from worker.shipped_head_eval import (  # noqa: PLC0415 - loads the trainer's data readers
        EvalSettings,
        bind_to_model,
        evaluate_head,
        record_evaluation,
        summary_line,
    )
    from worker.shipped_heads import MANIFEST, ShippedHeadRefusedError, verify_shipped_head  # noqa: PLC0415

    for name in ("eval_prompts", "eval_max_new_tokens", "k", "threads"):
        if getattr(args, name) < 1:
            print(f"error: --{name.replace('_', '-')} must be at least 1, got {getattr(args, name)}")
            return 1
    for flag, path in (("--model-dir", args.model_dir), ("--head", args.head)):
        if not path.is_dir():
            print(f"error: {flag} {path}: not a directory")
            return 1
    if args.bind and not args.write:
        print("error: --bind rewrites the manifest: give --write too")
        return 1
    if args.write:
        if not (args.head / MANIFEST).is_file():
            print(f"error: --write: {args.head} has no {MANIFEST} to record the measurement in")
            return 1
        try:  # before spending minutes measuring a head whose manifest would be refused
            verify_shipped_head(args.head)
        except ShippedHeadRefusedError as error:
            print(f"error: {error}")
            return 1
    if args.bind:  # before measuring: a head for other weights is refused at once
        try:
            differing = bind_to_model(args.head, args.model_dir)
        except ShippedHeadRefusedError as error:
            print(f"error: {error}")
            return 1
        bound = (
            f"bound to {args.model_dir} ({', '.join(differing)} differed)" if differing else "already bound"
        )
        print(f"{args.head / MANIFEST}: {bound}")
    settings = EvalSettings(
        prompts=args.eval_prompts,
        max_new_tokens=args.eval_max_new_tokens,
        k=args.k,
        threads=args.threads,
        device=args.device,
    )
    with tempfile.TemporaryDirectory(prefix="eaglenest-head-eval-") as temporary:
        work_dir = args.work_dir or Path(temporary)
        evaluation = evaluate_head(args.model_dir, args.head, work_dir, settings)
    print(f"{args.head}: {summary_line(evaluation)}")
    if args.write:
        record_evaluation(args.head, evaluation)
        print(f"{args.head / MANIFEST}: evaluation recorded (the earlier one kept in earlier_evaluations)")
    return 0


def run_check_shipped(args: argparse.Namespace) -> int:
    from worker.shipped_heads import ShippedHeadRefusedError, shipped_head_for  # noqa: PLC0415

    try:
        head = shipped_head_for(args.model_dir)
    except ShippedHeadRefusedError as error:
        print(f"error: {error}")
        return 1
    if head is None:
        print(f"{args.model_dir}: no head ships for this model; its jobs build their own base head")
        return 0
    print(
        f"{args.model_dir}: shipped base head {head.directory} matches its manifest "
        f"(model.safetensors sha256 {head.sha256['model.safetensors'][:16]}…): "
        "jobs on this model start from it"
    )
    return 0
