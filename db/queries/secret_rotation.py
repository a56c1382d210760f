"""Re-encrypting every stored secret with the current EAGLENEST_SECRET_KEY (the end of a rotation).

A stored secret is any ``*_ciphertext`` column (access keys, roles): found through the
metadata, so a table added later is rotated too.
"""

from __future__ import annotations

from sqlalchemy import Column, Table, select, update
from sqlalchemy.orm import Session

from db.base import Base
from db.secret_box import reencrypt_secret

CIPHERTEXT_SUFFIX = "_ciphertext"


def _encrypted_columns() -> list[tuple[Table, Column[str]]]:
    return [
        (table, column)
        for table in Base.metadata.sorted_tables
        for column in table.columns
        if column.name.endswith(CIPHERTEXT_SUFFIX)
    ]


def reencrypt_stored_secrets(session: Session) -> int:
    """Re-encrypt each secret that a previous key encrypted; returns how many were.

    Raises SecretDecryptionError (and writes nothing once the caller rolls back) when a
    secret decrypts with no configured key.
    """
    changed = 0
    for table, column in _encrypted_columns():
        (key,) = table.primary_key.columns
        for row_id, ciphertext in session.execute(select(key, column)).all():
            renewed = reencrypt_secret(ciphertext)
            if renewed is not None:
                session.execute(update(table).where(key == row_id).values({column.name: renewed}))
                changed += 1
    session.flush()
    return changed
