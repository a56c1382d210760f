"""What a signature must cover, and which Host it may name.

A signature covers only the headers its SignedHeaders lists. ``X-Amz-Target`` selects the
operation of ``POST /``, so a signature that leaves it out could be replayed within its
15 minutes as any other operation (a DescribeOptimizationJob re-sent as
DeleteOptimizationJob). As AWS does, ``host``, ``x-amz-date`` and every ``x-amz-*``
header present must be signed; botocore, the AWS CLI and the dashboard sign all of them.

The signed Host must also be a name this server answers to, so that a request signed for
another endpoint (another deployment that shares an access key, say) is not accepted here.
"""

from __future__ import annotations

from collections.abc import Iterable

from api.auth.sigv4 import Authorization, SignedRequest
from core.sagemaker.errors import IncompleteSignatureException, InvalidSignatureException

ANY_HOST = "*"


def check_signed_headers(request: SignedRequest, authorization: Authorization) -> None:
    signed = set(authorization.signed_headers)
    if "host" not in signed:
        raise IncompleteSignatureException(
            "'Host' or ':authority' must be a 'SignedHeader' in the AWS Authorization."
        )
    if "x-amz-date" not in signed:
        raise IncompleteSignatureException("'X-Amz-Date' must be a 'SignedHeader' in the AWS Authorization.")
    unsigned = sorted({name for name, _ in request.headers if name.startswith("x-amz-")} - signed)
    if unsigned:
        raise IncompleteSignatureException(
            "Every 'X-Amz-*' header of the request must be a 'SignedHeader' in the AWS Authorization; "
            f"not signed: {', '.join(unsigned)}."
        )


class HostPolicy:
    """The host names (without port) that the signed Host header may name; ``*`` allows any."""

    def __init__(self, hostnames: Iterable[str]) -> None:
        self._names = frozenset(name.strip().lower() for name in hostnames if name.strip())

    def check(self, request: SignedRequest) -> None:
        if ANY_HOST in self._names:
            return
        host = request.header("host") or ""
        if hostname(host) not in self._names:
            raise InvalidSignatureException(
                f"The signed Host '{host[:255]}' is not a name this endpoint serves; sign the request for "
                "the endpoint URL you send it to (operators: EAGLENEST_API_HOSTNAMES)."
            )


def hostname(host: str) -> str:
    """``example.com:8600`` -> ``example.com``; ``[::1]:8600`` -> ``::1``; lower-cased."""
    host = host.strip().lower()
    if host.startswith("["):
        return host[1:].partition("]")[0]
    if host.count(":") == 1:
        return host.partition(":")[0]
    return host
