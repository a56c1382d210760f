"""`eaglenest roles create|list|delete`: the roles a job's RoleArn may name, and their S3 keys.

A role stands for one S3 access key pair: the worker signs every S3 request of a job with the
key pair of the job's role. On a deployment with its own S3, pass a key pair limited to the
account's buckets; on the embedded stack, leave them out and a fresh pair is made, which
SeaweedFS then accepts for the account's own buckets (stack/s3_identities.py).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from sqlalchemy.orm import Session, sessionmaker

from cli.keys import with_database
from db.errors import NameAlreadyExistsError
from db.queries.account import generate_access_key_id, generate_secret_access_key
from db.queries.role import create_role, delete_role, list_roles, role_arn
from db.session import session_scope


def register(subparsers: Any) -> None:
    roles = subparsers.add_parser(
        "roles",
        help="create, list or delete the roles that jobs access S3 as",
        description="Roles live in the same database as the access keys (see `eaglenest keys -h`).",
    )
    roles.add_argument(
        "--state-dir",
        type=Path,
        default=None,
        help="the embedded stack's state directory (default: state), used unless "
        "EAGLENEST_DATABASE_URL is set; an explicit --state-dir wins over it",
    )
    actions = roles.add_subparsers(dest="roles_action", required=True, metavar="{create,list,delete}")

    create = actions.add_parser(
        "create", help="register a role of an account and the S3 key pair it stands for"
    )
    create.add_argument("--account-id", required=True, help="12-digit account id that owns the role")
    create.add_argument("--role-name", required=True, help="the name after role/ in the ARN (path allowed)")
    create.add_argument(
        "--s3-access-key-id", help="the S3 key id jobs of this role sign with (default: a new pair)"
    )
    create.add_argument("--s3-secret-access-key", help="its secret (with --s3-access-key-id)")
    create.add_argument("--description", help="free text shown by `roles list`")
    create.set_defaults(handler=with_database(run_create))

    listing = actions.add_parser("list", help="list roles and their S3 key ids (never secrets)")
    listing.add_argument("--account-id", help="only roles of this account")
    listing.set_defaults(handler=with_database(run_list))

    delete = actions.add_parser("delete", help="delete a role; jobs naming it can no longer reach S3")
    delete.add_argument("role_arn", help="the role's ARN, arn:aws:iam::<account>:role/<name>")
    delete.set_defaults(handler=with_database(run_delete))


def run_create(args: argparse.Namespace, sessions: sessionmaker[Session]) -> int:
    if (args.s3_access_key_id is None) != (args.s3_secret_access_key is None):
        print("error: give both --s3-access-key-id and --s3-secret-access-key, or neither", file=sys.stderr)
        return 2
    generated = args.s3_access_key_id is None
    key_id = generate_access_key_id() if generated else args.s3_access_key_id
    secret = generate_secret_access_key() if generated else args.s3_secret_access_key
    arn = role_arn(aws_account_id=args.account_id, name=args.role_name)
    try:
        with session_scope(sessions) as session:
            create_role(
                session,
                aws_account_id=args.account_id,
                name=args.role_name,
                s3_access_key_id=key_id,
                s3_secret_access_key=secret,
                description=args.description,
            )
    except NameAlreadyExistsError:
        print(f"error: role {arn} already exists", file=sys.stderr)
        return 1
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    role: dict[str, str] = {"Arn": arn, "RoleName": args.role_name, "AccountId": args.account_id}
    role["S3AccessKeyId"] = key_id
    if generated:
        # Shown once, like a new access key's secret: it is stored only encrypted.
        role["S3SecretAccessKey"] = secret
    print(json.dumps({"Role": role}, indent=2))
    return 0


def run_list(args: argparse.Namespace, sessions: sessionmaker[Session]) -> int:
    with session_scope(sessions) as session:
        roles = list_roles(session, aws_account_id=args.account_id)
    listing = [
        {
            "Arn": role.role_arn,
            "AccountId": role.aws_account_id,
            "S3AccessKeyId": role.s3_access_key_id,
            "Description": role.description,
            "CreateDate": role.created_at,
        }
        for role in roles
    ]
    print(json.dumps({"Roles": listing}, indent=2))
    return 0


def run_delete(args: argparse.Namespace, sessions: sessionmaker[Session]) -> int:
    with session_scope(sessions) as session:
        deleted = delete_role(session, arn=args.role_arn)
    if not deleted:
        print(f"error: no role {args.role_arn!r}", file=sys.stderr)
        return 1
    print(f"deleted role {args.role_arn}")
    return 0
