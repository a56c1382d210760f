"""`eaglenest keys create|list|delete|reencrypt`: manage the access keys that sign requests."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any

from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker

from db.errors import NameAlreadyExistsError
from db.queries.account import create_access_key, delete_access_key, list_access_keys
from db.queries.role import ensure_account_role
from db.queries.secret_rotation import reencrypt_stored_secrets
from db.secret_box import SecretDecryptionError
from db.session import create_db_engine, create_session_factory, session_scope
from stack.layout import StateLayout
from stack.secret_key import state_dir_secret_key

DEFAULT_STATE_DIR = Path("state")


class DatabaseUnavailableError(Exception):
    """The keys' database is missing or cannot be reached; the message names which."""


def register(subparsers: Any) -> None:
    keys = subparsers.add_parser(
        "keys",
        help="create, list or delete access keys",
        description="Keys live in the database named by EAGLENEST_DATABASE_URL; without it, in the "
        "embedded stack's database under --state-dir (as `eaglenest up`).",
    )
    keys.add_argument(
        "--state-dir",
        type=Path,
        default=None,
        help="the embedded stack's state directory (default: state), used unless "
        "EAGLENEST_DATABASE_URL is set; an explicit --state-dir wins over it",
    )
    actions = keys.add_subparsers(dest="keys_action", required=True, metavar="{create,list,delete,reencrypt}")

    create = actions.add_parser("create", help="create a key pair for an account and print it (once)")
    create.add_argument("--account-id", required=True, help="12-digit account id that owns the key")
    create.add_argument("--access-key-id", help="use this key id instead of a generated AKIA... one")
    create.add_argument("--secret-access-key", help="use this secret instead of a generated one")
    create.add_argument("--description", help="free text shown by `keys list`")
    create.set_defaults(handler=with_database(run_create))

    listing = actions.add_parser("list", help="list key ids and their accounts (never secrets)")
    listing.add_argument("--account-id", help="only keys of this account")
    listing.set_defaults(handler=with_database(run_list))

    delete = actions.add_parser("delete", help="delete a key; requests signed with it stop working")
    delete.add_argument("access_key_id", help="the key id to delete")
    delete.set_defaults(handler=with_database(run_delete))

    reencrypt = actions.add_parser(
        "reencrypt",
        help="re-encrypt stored secrets with EAGLENEST_SECRET_KEY (the last step of a key rotation)",
    )
    reencrypt.set_defaults(handler=with_database(run_reencrypt))


def database_url(state_dir: Path | None, environ: dict[str, str] | None = None) -> str:
    """EAGLENEST_DATABASE_URL unless --state-dir is given, else the embedded stack's SQLite file."""
    env = os.environ if environ is None else environ
    if state_dir is None and env.get("EAGLENEST_DATABASE_URL"):
        return env["EAGLENEST_DATABASE_URL"]
    layout = StateLayout(state_dir or DEFAULT_STATE_DIR)
    if not layout.database_file.is_file():
        raise DatabaseUnavailableError(
            f"no embedded stack database at {layout.database_file} (start `eaglenest up --state-dir "
            f"{layout.root}` once, or set EAGLENEST_DATABASE_URL)"
        )
    return layout.database_url


def with_database(run: Callable[[argparse.Namespace, sessionmaker[Session]], int]) -> Callable[..., int]:
    """Open the keys' database for ``run``; an unreachable one is a one-line error, not a traceback."""

    def handler(args: argparse.Namespace) -> int:
        try:
            url = database_url(args.state_dir)
        except DatabaseUnavailableError as error:
            print(f"error: {error}", file=sys.stderr)
            return 1
        try:
            # create_engine itself fails on an unparsable URL (a bad port is a ValueError) or
            # one naming a driver we lack.
            engine = create_db_engine(url, pool_size=1, max_overflow=0)
        except (ArgumentError, ValueError, ImportError) as error:
            return _cannot_use(url, error)
        try:
            with _secret_key_for(args.state_dir, url):
                return run(args, create_session_factory(engine))
        except SQLAlchemyError as error:
            return _cannot_use(url, error)
        finally:
            engine.dispose()

    return handler


def _secret_key_for(state_dir: Path | None, url: str) -> AbstractContextManager[object]:
    """The embedded stack's database is encrypted with its state directory's key; use that."""
    layout = StateLayout(state_dir or DEFAULT_STATE_DIR)
    return state_dir_secret_key(layout.root) if url == layout.database_url else nullcontext()


def masked_url(url: str) -> str:
    """``url`` with its password replaced by ***, even when SQLAlchemy cannot parse it."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except (ArgumentError, ValueError):
        # Unparsable, so where the password ends is a guess: hide the whole user part instead.
        userinfo, at, host = url.rpartition("@")
        if not at:
            return url
        scheme, separator, _ = userinfo.partition("://")
        return f"{scheme}{separator}***@{host}" if separator else f"***@{host}"


def _cannot_use(url: str, error: Exception) -> int:
    """Say in one line which database failed and why; the exit status for it."""
    if isinstance(error, ImportError):
        # e.g. mysql:// or postgresql+psycopg2://: eaglenest installs only psycopg 3 (and has SQLite).
        reason = f"its driver is not installed ({error}); use postgresql+psycopg://... or sqlite:///..."
    else:
        lines = str(getattr(error, "orig", None) or error).strip().splitlines()
        reason = lines[0] if lines else type(error).__name__
    print(f"error: cannot use the database {masked_url(url)}: {reason}", file=sys.stderr)
    return 1


def run_create(args: argparse.Namespace, sessions: sessionmaker[Session]) -> int:
    try:
        with session_scope(sessions) as session:
            key, secret = create_access_key(
                session,
                aws_account_id=args.account_id,
                access_key_id=args.access_key_id,
                secret_access_key=args.secret_access_key,
                description=args.description,
            )
            key_id = key.access_key_id
            # On the embedded stack every account gets a role its jobs can name; the stack gives
            # the role's own S3 key pair access to the account's buckets (stack/s3_identities.py).
            role = ensure_account_role(session, aws_account_id=args.account_id) if _embedded(args) else None
    except NameAlreadyExistsError:
        print(f"error: access key {args.access_key_id!r} already exists", file=sys.stderr)
        return 1
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    # The same shape as `aws iam create-access-key`, so scripts can reuse their parsing.
    document: dict[str, Any] = {
        "AccessKey": {"AccessKeyId": key_id, "SecretAccessKey": secret, "AccountId": args.account_id}
    }
    if role is not None:
        document["Role"] = {"Arn": role}
    print(json.dumps(document, indent=2))
    return 0


def _embedded(args: argparse.Namespace) -> bool:
    """Whether the keys' database is the embedded stack's (as ``database_url`` decides)."""
    return args.state_dir is not None or not os.environ.get("EAGLENEST_DATABASE_URL")


def run_list(args: argparse.Namespace, sessions: sessionmaker[Session]) -> int:
    with session_scope(sessions) as session:
        keys = list_access_keys(session, aws_account_id=args.account_id)
    listing = [
        {
            "AccessKeyId": key.access_key_id,
            "AccountId": key.aws_account_id,
            "Description": key.description,
            "CreateDate": key.created_at,
        }
        for key in keys
    ]
    print(json.dumps({"AccessKeys": listing}, indent=2))
    return 0


def run_delete(args: argparse.Namespace, sessions: sessionmaker[Session]) -> int:
    with session_scope(sessions) as session:
        deleted = delete_access_key(session, access_key_id=args.access_key_id)
    if not deleted:
        print(f"error: no access key {args.access_key_id!r}", file=sys.stderr)
        return 1
    print(f"deleted access key {args.access_key_id}")
    return 0


def run_reencrypt(args: argparse.Namespace, sessions: sessionmaker[Session]) -> int:
    try:
        with session_scope(sessions) as session:
            count = reencrypt_stored_secrets(session)
    except SecretDecryptionError as error:
        print(f"error: {error}; nothing was changed", file=sys.stderr)
        return 1
    print(f"re-encrypted {count} stored secrets with EAGLENEST_SECRET_KEY")
    return 0
