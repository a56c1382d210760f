"""Server-side AWS Signature Version 4 (header form), stdlib only.

Follows https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_sigv-create-signed-request.html
and mirrors botocore's signer (non-S3 variant: the path is normalised and encoded twice).
Error wording follows what AWS's JSON services answer.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from urllib.parse import quote, unquote

from core.sagemaker.errors import IncompleteSignatureException, InvalidSignatureException

ALGORITHM = "AWS4-HMAC-SHA256"
SERVICE = "sagemaker"
TERMINATOR = "aws4_request"
AMZ_DATE_FORMAT = "%Y%m%dT%H%M%SZ"
UNSIGNED_PAYLOAD = "UNSIGNED-PAYLOAD"


@dataclass(frozen=True)
class SignedRequest:
    """The parts of an HTTP request that SigV4 covers, as received (path still %-encoded)."""

    method: str
    raw_path: str
    raw_query: str
    headers: Sequence[tuple[str, str]]  # lower-case names; repeated headers appear repeatedly
    body: bytes

    def header_values(self, name: str) -> list[str]:
        return [value for key, value in self.headers if key == name]

    def header(self, name: str) -> str | None:
        values = self.header_values(name)
        return values[0] if values else None


@dataclass(frozen=True)
class Authorization:
    """A parsed ``Authorization: AWS4-HMAC-SHA256 Credential=..., SignedHeaders=..., Signature=...``."""

    access_key_id: str
    date: str
    region: str
    service: str
    terminator: str
    signed_headers: tuple[str, ...]
    signature: str

    @property
    def scope(self) -> str:
        return f"{self.date}/{self.region}/{self.service}/{self.terminator}"


def parse_authorization(header: str) -> Authorization:
    """Parse the header or raise IncompleteSignatureException saying what is missing."""
    algorithm, _, rest = header.strip().partition(" ")
    if algorithm != ALGORITHM:
        raise IncompleteSignatureException(
            f"Unsupported AWS 'algorithm': '{algorithm}'; only {ALGORITHM} (Signature Version 4) is accepted."
        )
    parameters: dict[str, str] = {}
    # AWS separates the components by commas and/or spaces; a stray space inside a value
    # (a pasted key id with a trailing blank) therefore shows up as a part without "=".
    for part in re.split(r"[,\s]+", rest.strip()):
        if not part:
            continue
        key, equals, value = part.partition("=")
        if not equals:
            raise IncompleteSignatureException(
                f"'{part}' not a valid key=value pair (missing equal-sign) "
                f"in Authorization header: '{header}'."
            )
        parameters[key.strip()] = value.strip()
    missing = [name for name in ("Credential", "Signature", "SignedHeaders") if not parameters.get(name)]
    if missing:
        requirements = " ".join(f"Authorization header requires '{name}' parameter." for name in missing)
        raise IncompleteSignatureException(f"{requirements} Authorization={header}")
    credential = parameters["Credential"].split("/")
    if len(credential) != 5 or not all(credential):
        raise IncompleteSignatureException(
            "Credential must have the form '<AccessKeyId>/<yyyymmdd>/<region>/<service>/aws4_request', "
            f"got '{parameters['Credential']}'."
        )
    access_key_id, date, region, service, terminator = credential
    return Authorization(
        access_key_id=access_key_id,
        date=date,
        region=region,
        service=service,
        terminator=terminator,
        signed_headers=tuple(name.strip().lower() for name in parameters["SignedHeaders"].split(";")),
        signature=parameters["Signature"].lower(),
    )


def check_scope(authorization: Authorization, service: str = SERVICE) -> None:
    """The credential scope must name ``service``, a plausible region and the v4 terminator.

    One server answers several AWS services (sagemaker, logs, sts); each signs with its own
    signing name, and a request signed for one is refused by the others, as AWS does.
    """
    if authorization.service != service:
        raise InvalidSignatureException(f"Credential should be scoped to correct service: '{service}'.")
    if authorization.terminator != TERMINATOR:
        raise InvalidSignatureException(
            f"Credential should be scoped with a valid terminator: '{TERMINATOR}', "
            f"not '{authorization.terminator}'."
        )
    region = authorization.region
    if len(region) > 32 or not all(ch.islower() or ch.isdigit() or ch == "-" for ch in region):
        raise InvalidSignatureException(f"Credential should be scoped to a valid region, not '{region}'.")


def parse_amz_date(request: SignedRequest, authorization_header: str) -> datetime:
    amz_date = request.header("x-amz-date")
    if amz_date is None:
        raise IncompleteSignatureException(
            "Authorization header requires existence of a 'X-Amz-Date' header. "
            f"Authorization={authorization_header}"
        )
    try:
        return datetime.strptime(amz_date.strip(), AMZ_DATE_FORMAT).replace(tzinfo=UTC)
    except ValueError:
        raise IncompleteSignatureException(
            f"X-Amz-Date must be in the ISO-8601 basic format yyyyMMdd'T'HHmmss'Z', got '{amz_date}'."
        ) from None


def check_request_time(
    signed_at: datetime, authorization: Authorization, *, now: datetime, max_skew: timedelta
) -> None:
    """Refuse stale or future-dated requests, and a scope date that is not the request's date."""
    stamp = signed_at.strftime(AMZ_DATE_FORMAT)
    minutes = int(max_skew.total_seconds() // 60)
    if signed_at < now - max_skew:
        raise InvalidSignatureException(
            f"Signature expired: {stamp} is now earlier than {(now - max_skew).strftime(AMZ_DATE_FORMAT)} "
            f"({now.strftime(AMZ_DATE_FORMAT)} - {minutes} min.)"
        )
    if signed_at > now + max_skew:
        raise InvalidSignatureException(
            f"Signature not yet current: {stamp} is still later than "
            f"{(now + max_skew).strftime(AMZ_DATE_FORMAT)} ({now.strftime(AMZ_DATE_FORMAT)} + {minutes} min.)"
        )
    if authorization.date != stamp[:8]:
        raise InvalidSignatureException(
            "Date in Credential scope does not match YYYYMMDD from ISO-8601 version of date from HTTP: "
            f"'{authorization.date}' != '{stamp[:8]}', from '{stamp}'."
        )


def payload_hash(request: SignedRequest) -> str:
    """The body's SHA-256; a client-sent X-Amz-Content-SHA256 must agree with the body we received."""
    actual = hashlib.sha256(request.body).hexdigest()
    declared = request.header("x-amz-content-sha256")
    if declared is None:
        return actual
    if declared == UNSIGNED_PAYLOAD:
        # The JSON body is the whole request here: leaving it unsigned would let anyone who
        # sees one request replay its signature with a different body.
        raise InvalidSignatureException("UNSIGNED-PAYLOAD is not accepted; the request body must be signed.")
    if declared.lower() != actual:
        raise InvalidSignatureException(
            "The provided 'x-amz-content-sha256' header does not match what was computed."
        )
    return declared.lower()


def _remove_dot_segments(path: str) -> str:
    # RFC 3986 5.2.4 plus collapsing empty segments, as botocore (and AWS) do.
    if not path:
        return "/"
    output: list[str] = []
    for segment in path.split("/"):
        if segment in ("", "."):
            continue
        if segment == "..":
            if output:
                output.pop()
        else:
            output.append(segment)
    trailing = "/" if path.endswith("/") and output else ""
    return "/" + "/".join(output) + trailing


def canonical_uri(raw_path: str) -> str:
    return quote(_remove_dot_segments(raw_path), safe="/~")


def canonical_query(raw_query: str) -> str:
    pairs = []
    for part in raw_query.split("&"):
        if not part:
            continue
        key, _, value = part.partition("=")
        pairs.append((quote(unquote(key), safe="-_.~"), quote(unquote(value), safe="-_.~")))
    return "&".join(f"{key}={value}" for key, value in sorted(pairs))


def canonical_headers(request: SignedRequest, signed_headers: Sequence[str]) -> str:
    lines = []
    for name in sorted(set(signed_headers)):
        values = request.header_values(name)
        if not values:
            raise IncompleteSignatureException(
                f"SignedHeaders names '{name}' but the request has no such header."
            )
        lines.append(f"{name}:" + ",".join(" ".join(value.split()) for value in values))
    return "\n".join(lines) + "\n"


def canonical_request(request: SignedRequest, authorization: Authorization) -> str:
    signed = sorted(set(authorization.signed_headers))
    return "\n".join(
        [
            request.method.upper(),
            canonical_uri(request.raw_path),
            canonical_query(request.raw_query),
            canonical_headers(request, signed),
            ";".join(signed),
            payload_hash(request),
        ]
    )


def string_to_sign(amz_date: str, scope: str, canonical: str) -> str:
    digest = hashlib.sha256(canonical.encode("utf-8")).hexdigest()
    return f"{ALGORITHM}\n{amz_date}\n{scope}\n{digest}"


@lru_cache(maxsize=1024)
def signing_key(secret: str, date: str, region: str, service: str) -> bytes:
    # Derived from the secret alone and valid for a whole day: caching it saves four
    # HMACs per request without caching any verdict about a particular signature.
    key = _hmac(f"AWS4{secret}".encode(), date)
    key = _hmac(key, region)
    key = _hmac(key, service)
    return _hmac(key, TERMINATOR)


def _hmac(key: bytes, message: str) -> bytes:
    return hmac.new(key, message.encode("utf-8"), hashlib.sha256).digest()


def expected_signature(
    request: SignedRequest, authorization: Authorization, secret: str, amz_date: str
) -> str:
    key = signing_key(secret, authorization.date, authorization.region, authorization.service)
    to_sign = string_to_sign(amz_date, authorization.scope, canonical_request(request, authorization))
    return hmac.new(key, to_sign.encode("utf-8"), hashlib.sha256).hexdigest()


def signature_matches(
    request: SignedRequest, authorization: Authorization, secret: str, amz_date: str
) -> bool:
    expected = expected_signature(request, authorization, secret, amz_date)
    return hmac.compare_digest(expected, authorization.signature)
