"""STS on the query protocol: ``GetCallerIdentity`` only, with AWS's XML bodies and errors.

The AWS CLI (``aws sts get-caller-identity --endpoint-url ...``), boto3 and the SageMaker
Python SDK (``Session.account_id()``, ``default_bucket()``) send ``POST /`` with a form
body ``Action=GetCallerIdentity&Version=2011-06-15``, no ``X-Amz-Target``, signed for the
service ``sts``. botocore's query parser reads XML only, so every answer here, errors
included, is ``text/xml`` in the shape real STS sends.

Access keys belong to an account, not to an IAM user (we have none), so a key's identity
is what AWS reports for an account's root credentials: ``arn:aws:iam::<account>:root``
with the account id as UserId.
"""

from __future__ import annotations

from typing import ClassVar
from urllib.parse import parse_qs
from xml.sax.saxutils import escape

from fastapi.responses import Response

from api.auth.sigv4 import SignedRequest
from api.state import ApiState
from core.principal import Principal
from core.sagemaker.errors import (
    AwsError,
    IncompleteSignatureException,
    InvalidSignatureException,
    MissingAuthenticationTokenException,
    UnrecognizedClientException,
)

STS_SERVICE = "sts"
STS_VERSION = "2011-06-15"
STS_NAMESPACE = f"https://sts.amazonaws.com/doc/{STS_VERSION}/"
FORM_CONTENT_TYPE = "application/x-www-form-urlencoded"
XML_CONTENT_TYPE = "text/xml"


class InvalidAction(AwsError):  # noqa: N818 - named after its AWS error code
    code = "InvalidAction"
    status_code = 400
    sender_fault = True
    description = "The query names no STS action this server implements (only GetCallerIdentity)."


# STS names the shared SigV4 failures differently from the JSON services, and answers 403.
_STS_AUTH_ERRORS: dict[type[AwsError], tuple[str, int]] = {
    MissingAuthenticationTokenException: ("MissingAuthenticationToken", 403),
    UnrecognizedClientException: ("InvalidClientTokenId", 403),
    InvalidSignatureException: ("SignatureDoesNotMatch", 403),
    IncompleteSignatureException: ("IncompleteSignature", 400),
}


class StsQuery:
    """The form parameters of one request (the last value of a repeated name wins, as in AWS)."""

    known_actions: ClassVar[frozenset[str]] = frozenset({"GetCallerIdentity"})

    def __init__(self, body: bytes) -> None:
        pairs = parse_qs(body.decode("utf-8", errors="replace"), keep_blank_values=True)
        self.params = {name: values[-1] for name, values in pairs.items()}

    def action(self) -> str:
        action = self.params.get("Action", "")
        version = self.params.get("Version", "")
        if action not in self.known_actions or version != STS_VERSION:
            raise InvalidAction(
                f"Could not find operation {action} for version {version}. "
                "This server implements only GetCallerIdentity (version 2011-06-15)."
            )
        return action


def is_query_request(content_type: str | None, target: str | None) -> bool:
    """Query-protocol requests carry a form body and no ``X-Amz-Target``."""
    media_type = (content_type or "").split(";", 1)[0].strip().lower()
    return target is None and media_type == FORM_CONTENT_TYPE


def handle_sts_request(state: ApiState, signed: SignedRequest, request_id: str) -> Response:
    """Authenticate (scope ``sts``), run the action, and answer XML; never raises an AwsError."""
    try:
        principal = state.authenticator.authenticate(signed, service=STS_SERVICE)
        StsQuery(signed.body).action()
    except AwsError as error:
        return _error_response(error, request_id)
    return Response(
        content=_caller_identity_xml(principal, request_id),
        media_type=XML_CONTENT_TYPE,
        headers={"x-amzn-RequestId": request_id},
    )


def caller_identity(principal: Principal) -> dict[str, str]:
    account = principal.aws_account_id
    return {"Arn": f"arn:aws:iam::{account}:root", "UserId": account, "Account": account}


def _caller_identity_xml(principal: Principal, request_id: str) -> str:
    fields = "".join(
        f"<{name}>{escape(value)}</{name}>" for name, value in caller_identity(principal).items()
    )
    return (
        f'<GetCallerIdentityResponse xmlns="{STS_NAMESPACE}">'
        f"<GetCallerIdentityResult>{fields}</GetCallerIdentityResult>"
        f"<ResponseMetadata><RequestId>{escape(request_id)}</RequestId></ResponseMetadata>"
        "</GetCallerIdentityResponse>"
    )


def _error_response(error: AwsError, request_id: str) -> Response:
    code, status = _STS_AUTH_ERRORS.get(type(error), (error.code, error.status_code))
    fault = "Sender" if error.sender_fault else "Receiver"
    body = (
        f'<ErrorResponse xmlns="{STS_NAMESPACE}">'
        f"<Error><Type>{fault}</Type><Code>{escape(code)}</Code>"
        f"<Message>{escape(error.message)}</Message></Error>"
        f"<RequestId>{escape(request_id)}</RequestId>"
        "</ErrorResponse>"
    )
    return Response(
        content=body,
        status_code=status,
        media_type=XML_CONTENT_TYPE,
        headers={"x-amzn-RequestId": request_id, "X-Amzn-ErrorType": code},
    )
