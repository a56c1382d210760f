"""`eaglenest keys create|list|delete`: manage the access keys that sign requests."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from db.accounts import create_access_key, delete_access_key, list_access_keys
from db.errors import NameAlreadyExistsError
from db.session import session_scope


def register(subparsers: Any) -> None:
    keys = subparsers.add_parser("keys", help="create, list or delete access keys")
    actions = keys.add_subparsers(dest="keys_action", required=True, metavar="{create,list,delete}")

    create = actions.add_parser("create", help="create a key pair for an account and print it (once)")
    create.add_argument("--account-id", required=True, help="12-digit account id that owns the key")
    create.add_argument("--access-key-id", help="use this key id instead of a generated AKIA... one")
    create.add_argument("--secret-access-key", help="use this secret instead of a generated one")
    create.add_argument("--description", help="free text shown by `keys list`")
    create.set_defaults(handler=run_create)

    listing = actions.add_parser("list", help="list key ids and their accounts (never secrets)")
    listing.add_argument("--account-id", help="only keys of this account")
    listing.set_defaults(handler=run_list)

    delete = actions.add_parser("delete", help="delete a key; requests signed with it stop working")
    delete.add_argument("access_key_id", help="the key id to delete")
    delete.set_defaults(handler=run_delete)


def run_create(args: argparse.Namespace) -> int:
    try:
        with session_scope() as session:
            key, secret = create_access_key(
                session,
                aws_account_id=args.account_id,
                access_key_id=args.access_key_id,
                secret_access_key=args.secret_access_key,
                description=args.description,
            )
            key_id = key.access_key_id
    except NameAlreadyExistsError:
        print(f"error: access key {args.access_key_id!r} already exists", file=sys.stderr)
        return 1
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    # The same shape as `aws iam create-access-key`, so scripts can reuse their parsing.
    document = {"AccessKey": {"AccessKeyId": key_id, "SecretAccessKey": secret, "AccountId": args.account_id}}
    print(json.dumps(document, indent=2))
    return 0


def run_list(args: argparse.Namespace) -> int:
    with session_scope() as session:
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


def run_delete(args: argparse.Namespace) -> int:
    with session_scope() as session:
        deleted = delete_access_key(session, access_key_id=args.access_key_id)
    if not deleted:
        print(f"error: no access key {args.access_key_id!r}", file=sys.stderr)
        return 1
    print(f"deleted access key {args.access_key_id}")
    return 0
