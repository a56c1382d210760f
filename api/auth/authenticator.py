"""Turn a signed request into the Principal (account, key, region) it acts for."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import datetime, timedelta

from sqlalchemy.orm import Session, sessionmaker

from api.auth.signed_headers import HostPolicy, check_signed_headers
from api.auth.sigv4 import (
    SERVICE,
    SignedRequest,
    check_request_time,
    check_scope,
    parse_amz_date,
    parse_authorization,
    signature_matches,
)
from core.principal import Principal
from core.sagemaker.errors import (
    InvalidSignatureException,
    MissingAuthenticationTokenException,
    UnrecognizedClientException,
)
from db.queries.account import AccessKeyCredentials, get_access_key_credentials
from db.types import utc_now

_MAX_CACHED_KEYS = 4096


class AccessKeyCache:
    """Access key id -> credentials for a few seconds, so most requests skip the key look-up.

    Only the database read is cached; every request's signature is still computed and
    compared. Unknown keys are never cached, so a newly created key works at once; a
    deleted key keeps working for at most ``ttl_seconds``.
    """

    def __init__(self, ttl_seconds: float, clock: Callable[[], float] = time.monotonic) -> None:
        self._ttl = ttl_seconds
        self._clock = clock
        self._entries: dict[str, tuple[float, AccessKeyCredentials]] = {}
        self._lock = threading.Lock()

    def get(self, access_key_id: str) -> AccessKeyCredentials | None:
        entry = self._entries.get(access_key_id)
        if entry is None or entry[0] < self._clock():
            return None
        return entry[1]

    def put(self, credentials: AccessKeyCredentials) -> None:
        if self._ttl <= 0:
            return
        with self._lock:
            if len(self._entries) >= _MAX_CACHED_KEYS:
                self._entries.clear()
            self._entries[credentials.access_key_id] = (self._clock() + self._ttl, credentials)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()


class Authenticator:
    def __init__(
        self,
        session_factory: sessionmaker[Session],
        *,
        max_skew: timedelta,
        cache: AccessKeyCache,
        hosts: HostPolicy,
        now: Callable[[], datetime] = utc_now,
    ) -> None:
        self._session_factory = session_factory
        self._max_skew = max_skew
        self._hosts = hosts
        self._cache = cache
        self._now = now

    def authenticate(self, request: SignedRequest, *, service: str = SERVICE) -> Principal:
        """Verify the SigV4 signature for ``service``; raises the AWS auth error describing the failure."""
        header = request.header("authorization")
        if not header:
            raise MissingAuthenticationTokenException("Request is missing Authentication Token")
        authorization = parse_authorization(header)
        signed_at = parse_amz_date(request, header)
        check_scope(authorization, service)
        check_signed_headers(request, authorization)
        self._hosts.check(request)
        check_request_time(signed_at, authorization, now=self._now(), max_skew=self._max_skew)
        credentials = self._credentials(authorization.access_key_id)
        if request.header("x-amz-security-token") is not None:
            # We issue no temporary credentials, so no session token belongs to any key.
            raise UnrecognizedClientException("The security token included in the request is invalid.")
        amz_date = request.header("x-amz-date") or ""
        if not signature_matches(request, authorization, credentials.secret_access_key, amz_date.strip()):
            raise InvalidSignatureException(
                "The request signature we calculated does not match the signature you provided. "
                "Check your AWS Secret Access Key and signing method. "
                "Consult the service documentation for details."
            )
        return Principal(
            account_id=credentials.account_id,
            aws_account_id=credentials.aws_account_id,
            access_key_id=credentials.access_key_id,
            region=authorization.region,
        )

    def _credentials(self, access_key_id: str) -> AccessKeyCredentials:
        cached = self._cache.get(access_key_id)
        if cached is not None:
            return cached
        with self._session_factory() as session:
            credentials = get_access_key_credentials(session, access_key_id=access_key_id)
        if credentials is None:
            raise UnrecognizedClientException("The security token included in the request is invalid.")
        self._cache.put(credentials)
        return credentials
