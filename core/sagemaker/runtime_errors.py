# Each class is named exactly after its AWS error code.
# ruff: noqa: N818
"""The errors of the sagemaker-runtime wire (InvokeEndpoint), as botocore's runtime model names them.

The runtime speaks rest-json: botocore reads the code from ``X-Amzn-ErrorType`` (or
``__type``) and a modeled error's members from the body, so ModelError carries
OriginalStatusCode and OriginalMessage (what the model server answered) beside ``message``.
"""

from __future__ import annotations

from typing import Any

from core.sagemaker.errors import AwsError


class ValidationError(AwsError):
    code = "ValidationError"
    status_code = 400
    sender_fault = True
    description = "The endpoint does not exist, is not in service, or the request is not one it can serve."


class ModelError(AwsError):
    code = "ModelError"
    status_code = 424
    sender_fault = True
    description = "The model server answered with an error; OriginalStatusCode and OriginalMessage say which."

    def __init__(self, message: str, *, original_status_code: int, original_message: str) -> None:
        super().__init__(message)
        self.original_status_code = original_status_code
        self.original_message = original_message

    def body(self) -> dict[str, Any]:
        return {
            **super().body(),
            "OriginalStatusCode": self.original_status_code,
            "OriginalMessage": self.original_message,
        }


class ServiceUnavailable(AwsError):
    code = "ServiceUnavailable"
    status_code = 503
    sender_fault = False
    description = "No instance of the endpoint can take the request now (starting, restarting); retry."


RUNTIME_ERRORS: tuple[type[AwsError], ...] = (ValidationError, ModelError, ServiceUnavailable)
