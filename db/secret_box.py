"""Symmetric encryption of the secret access keys kept in the database."""

from __future__ import annotations

import base64
import hashlib
from functools import lru_cache

from cryptography.fernet import Fernet, InvalidToken

from db.settings import get_settings


class SecretDecryptionError(RuntimeError):
    """A stored secret does not decrypt with the configured EAGLENEST_SECRET_KEY."""


@lru_cache(maxsize=4)
def _fernet(secret_key: str) -> Fernet:
    # Fernet wants 32 url-safe base64 bytes; hashing lets operators use any passphrase.
    return Fernet(base64.urlsafe_b64encode(hashlib.sha256(secret_key.encode()).digest()))


def _current_fernet() -> Fernet:
    return _fernet(get_settings().secret_key.get_secret_value())


def encrypt_secret(plaintext: str) -> str:
    return _current_fernet().encrypt(plaintext.encode()).decode("ascii")


def decrypt_secret(ciphertext: str) -> str:
    try:
        return _current_fernet().decrypt(ciphertext.encode("ascii")).decode()
    except InvalidToken as error:
        raise SecretDecryptionError(
            "a stored secret access key cannot be decrypted: EAGLENEST_SECRET_KEY differs from the key "
            "it was encrypted with"
        ) from error
