"""Request id on every response, and metrics for every request (pure ASGI, no per-request copies)."""

from __future__ import annotations

import time
import uuid
from typing import Any

from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from api.metrics import ApiMetrics

REQUEST_ID_HEADER = "x-amzn-RequestId"


def operation_label(scope: Scope) -> str:
    """The AWS operation for POST /, else the matched route's path template (bounded cardinality)."""
    operation = scope.get("state", {}).get("operation")
    if isinstance(operation, str):
        return operation
    route: Any = scope.get("route")
    path = getattr(route, "path", None)
    return path if isinstance(path, str) else "unmatched"


class RequestContextMiddleware:
    def __init__(self, app: ASGIApp, metrics: ApiMetrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request_id = str(uuid.uuid4())
        scope.setdefault("state", {})["request_id"] = request_id
        started = time.perf_counter()
        outcome = {"code": "InternalFailure"}

        async def send_with_request_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                if REQUEST_ID_HEADER.lower() not in headers:
                    headers.append(REQUEST_ID_HEADER, request_id)
                outcome["code"] = headers.get("x-amzn-errortype") or str(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, send_with_request_id)
        finally:
            self.metrics.observe(
                operation=operation_label(scope), code=outcome["code"], seconds=time.perf_counter() - started
            )
