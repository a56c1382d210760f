"""Where the client connects and as whom: arguments, then the environment, then stack.json.

Each setting is taken from the first source that has it:
1. the function's arguments;
2. the environment: ``EAGLENEST_ENDPOINT_URL`` (or botocore's own ``AWS_ENDPOINT_URL_SAGEMAKER``
   and ``AWS_ENDPOINT_URL``), ``AWS_REGION``/``AWS_DEFAULT_REGION``, ``AWS_ACCESS_KEY_ID`` +
   ``AWS_SECRET_ACCESS_KEY`` (+ ``AWS_SESSION_TOKEN``) or ``AWS_PROFILE``; for S3
   ``EAGLENEST_S3_ENDPOINT_URL`` or ``AWS_ENDPOINT_URL_S3``;
3. the ``stack.json`` an embedded stack (``eaglenest up``) writes into its state directory,
   ``EAGLENEST_STATE_DIR`` or ./state.
Credentials found nowhere are left to boto3's usual chain (config files, instance roles).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TypeAlias

from botocore.credentials import Credentials
from pydantic import ValidationError

from client.errors import EndpointNotConfiguredError
from stack.stack_file import StackInfo, read_stack_file, stack_file_path

# eaglenest accepts any signing region; this is the embedded stack's default.
DEFAULT_REGION = "us-east-1"
DEFAULT_STATE_DIR = Path("state")

CredentialsLike: TypeAlias = Credentials | tuple[str, str] | tuple[str, str, str]


@dataclass(frozen=True)
class ClientSettings:
    endpoint_url: str
    region: str
    credentials: Credentials | None  # None: boto3's default chain (or AWS_PROFILE) decides
    profile: str | None
    s3_endpoint_url: str | None  # None: AWS S3
    stack_file: Path | None  # the stack.json that supplied something, if any


def state_dir(environ: Mapping[str, str]) -> Path:
    return Path(environ.get("EAGLENEST_STATE_DIR") or DEFAULT_STATE_DIR)


def resolve_client_settings(
    *,
    endpoint_url: str | None = None,
    region: str | None = None,
    credentials: CredentialsLike | None = None,
    s3_endpoint_url: str | None = None,
    environ: Mapping[str, str] | None = None,
) -> ClientSettings:
    env = os.environ if environ is None else environ
    stack = _StackSource(stack_file_path(state_dir(env)))
    resolved_endpoint = (
        endpoint_url
        or _first(env, "EAGLENEST_ENDPOINT_URL", "AWS_ENDPOINT_URL_SAGEMAKER", "AWS_ENDPOINT_URL")
        or stack.value("api_url")
    )
    if not resolved_endpoint:
        raise EndpointNotConfiguredError(
            "no eaglenest endpoint: pass endpoint_url=..., set EAGLENEST_ENDPOINT_URL, or start "
            f"`eaglenest up` (no stack file at {stack.path}; EAGLENEST_STATE_DIR names another state dir)"
        )
    resolved_credentials, profile = _credentials(credentials, env, stack)
    return ClientSettings(
        endpoint_url=resolved_endpoint,
        region=region
        or _first(env, "AWS_REGION", "AWS_DEFAULT_REGION")
        or stack.value("region")
        or DEFAULT_REGION,
        credentials=resolved_credentials,
        profile=profile,
        s3_endpoint_url=s3_endpoint_url
        or _first(env, "EAGLENEST_S3_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3")
        or stack.value("s3_endpoint_url"),
        stack_file=stack.path if stack.used else None,
    )


def as_credentials(credentials: CredentialsLike) -> Credentials:
    if isinstance(credentials, Credentials):
        return credentials
    if (
        isinstance(credentials, tuple)
        and len(credentials) in (2, 3)
        and all(isinstance(part, str) and part for part in credentials)
    ):
        return Credentials(*credentials)
    raise TypeError(
        "credentials must be botocore Credentials or a tuple (access_key_id, secret_access_key"
        f"[, session_token]) of non-empty strings, got {type(credentials).__name__}"
    )


def _credentials(
    given: CredentialsLike | None, env: Mapping[str, str], stack: _StackSource
) -> tuple[Credentials | None, str | None]:
    if given is not None:
        return as_credentials(given), None
    key, secret = env.get("AWS_ACCESS_KEY_ID"), env.get("AWS_SECRET_ACCESS_KEY")
    if key and secret:
        return Credentials(key, secret, env.get("AWS_SESSION_TOKEN") or None), None
    if env.get("AWS_PROFILE"):
        return None, env["AWS_PROFILE"]
    stack_key, stack_secret = stack.value("aws_access_key_id"), stack.value("aws_secret_access_key")
    if stack_key and stack_secret:
        return Credentials(stack_key, stack_secret), None
    return None, None


def _first(env: Mapping[str, str], *names: str) -> str | None:
    for name in names:
        if env.get(name):
            return env[name]
    return None


class _StackSource:
    """stack.json, read at most once and only if a setting is still missing."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.used = False
        self._info: StackInfo | None = None
        self._read = False

    def value(self, field: str) -> str | None:
        info = self._load()
        if info is None:
            return None
        value: str = getattr(info, field)
        self.used = True
        return value

    def _load(self) -> StackInfo | None:
        if not self._read:
            self._read = True
            if self.path.is_file():
                try:
                    self._info = read_stack_file(self.path.parent)
                except (ValidationError, ValueError) as error:
                    raise EndpointNotConfiguredError(
                        f"{self.path} is not a valid stack file: {error}"
                    ) from None
        return self._info
