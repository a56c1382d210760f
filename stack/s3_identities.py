"""The embedded stack's S3 identities, kept in step with the accounts, keys and roles in its database.

SeaweedFS has no IAM of its own that could hold AWS-style policies, but its identities can
be limited to buckets by name prefix. So bucket names carry their owner:

- an account owns the buckets whose names start with its 12-digit id and a dash
  (``111122223333-models``);
- the development account (000000000000) also owns every bucket whose name starts with a
  letter, so the README's and ``make demo``'s ``s3://models``, ``s3://demo-data``... stay
  its own and work unchanged with the test/test key;
- every account may read the built-in dataset catalog (``builtin_datasets_uri``), which
  jobs without a TrainingDataSource train on.

Each account's identity carries its access keys (the key that signs SageMaker calls also
reaches S3, as on the embedded stack before) and its roles' S3 keys, so a job signed with
its role reaches exactly its account's buckets. The service's own admin identity is a
random key of the state directory, which no account holds.

``eaglenest keys create`` and ``eaglenest roles create`` write only the database; a thread of
``eaglenest up`` notices the change within seconds, rewrites the identity file and makes
SeaweedFS reload it (SIGHUP).
"""

from __future__ import annotations

import json
import logging
import secrets
import string
import threading
from collections.abc import Callable
from pathlib import Path

from sqlalchemy.orm import Session, sessionmaker

from db.models.account import DEV_ACCOUNT_ID
from db.queries.account import list_access_key_secrets
from db.queries.role import list_role_s3_keys
from db.session import session_scope
from stack.processes import ManagedProcess
from stack.seaweedfs import S3Credentials, S3Identity, reload_s3_identities, write_s3_identities

logger = logging.getLogger(__name__)

SYNC_INTERVAL_SECONDS = 2.0
ADMIN_CREDENTIALS_FILE = "s3-admin.json"


def account_bucket_prefixes(aws_account_id: str) -> tuple[str, ...]:
    """The bucket-name prefixes an account owns (see the module docstring)."""
    own = (f"{aws_account_id}-",)
    return own + tuple(string.ascii_lowercase) if aws_account_id == DEV_ACCOUNT_ID else own


def account_identities(session: Session, *, shared_buckets: tuple[str, ...]) -> list[S3Identity]:
    """One identity per account that has keys or roles, holding all of them."""
    keys: dict[str, list[S3Credentials]] = {}
    taken: set[str] = set()
    # Access keys first: a role registered with some account's access key id adds nothing.
    for account, key_id, secret in list_access_key_secrets(session) + list_role_s3_keys(session):
        if key_id in taken:
            continue
        taken.add(key_id)
        keys.setdefault(account, []).append(S3Credentials(key_id, secret))
    return [
        S3Identity(
            name=f"account-{account}",
            credentials=tuple(pairs),
            bucket_prefixes=account_bucket_prefixes(account),
            read_only_buckets=shared_buckets,
        )
        for account, pairs in sorted(keys.items())
    ]


def read_admin_credentials(s3_root: Path) -> S3Credentials:
    """The service's own S3 key of this state directory; FileNotFoundError before the first start."""
    stored = json.loads((s3_root / ADMIN_CREDENTIALS_FILE).read_text())
    return S3Credentials(stored["accessKey"], stored["secretKey"])


def load_or_create_admin_credentials(s3_root: Path) -> S3Credentials:
    """The service's own S3 key of this state directory (created once, kept 0600)."""
    if (s3_root / ADMIN_CREDENTIALS_FILE).is_file():
        return read_admin_credentials(s3_root)
    path = s3_root / ADMIN_CREDENTIALS_FILE
    credentials = S3Credentials("EAGLENEST" + secrets.token_hex(8).upper(), secrets.token_urlsafe(30))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.touch(mode=0o600)
    path.write_text(
        json.dumps({"accessKey": credentials.access_key_id, "secretKey": credentials.secret_access_key})
    )
    return credentials


class S3IdentitySync:
    """Rewrites the identity file when the database's keys or roles change, and reloads SeaweedFS."""

    def __init__(
        self,
        *,
        identities_file: Path,
        admin: S3Credentials,
        shared_buckets: tuple[str, ...],
        seaweedfs: Callable[[], ManagedProcess | None],
        sessions: sessionmaker[Session] | None = None,
    ) -> None:
        self.identities_file = identities_file
        self.admin = admin
        self.shared_buckets = shared_buckets
        # Looked up each time: a restarted SeaweedFS is a new process.
        self.seaweedfs = seaweedfs
        self.sessions = sessions  # None: the process's database (EAGLENEST_DATABASE_URL)
        self._written: list[S3Identity] | None = None
        self._stop = threading.Event()

    def sync_once(self) -> bool:
        """Write and reload when the identities changed; returns whether they had."""
        with session_scope(self.sessions) as session:
            identities = account_identities(session, shared_buckets=self.shared_buckets)
        if identities == self._written:
            return False
        write_s3_identities(self.identities_file, self.admin, identities)
        process = self.seaweedfs()
        if process is not None and process.is_running():
            reload_s3_identities(process)
        self._written = identities
        logger.info("S3 identities updated: %s", ", ".join(identity.name for identity in identities))
        return True

    def start(self) -> None:
        threading.Thread(target=self._run, name="s3-identity-sync", daemon=True).start()

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        while not self._stop.wait(SYNC_INTERVAL_SECONDS):
            try:
                self.sync_once()
            except Exception:  # a locked or migrating database: try again next round
                logger.exception("could not update the S3 identities")
