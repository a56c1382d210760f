"""Refuse request bodies over the configured size while reading them, before any other work.

Pure ASGI, outside the routes: an unauthenticated client must not make the server hold a
50 MB body in memory, hash it for SigV4 or look up its access key. A declared
Content-Length over the limit is refused unread; a chunked body is counted as it arrives
and refused at the first chunk that crosses the limit. Bodies within the limit are
buffered (every route reads its whole body anyway) and handed on unchanged.
"""

from __future__ import annotations

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from api.error_responses import content_type_for_path, render_error
from core.sagemaker.errors import RequestEntityTooLargeException


class BodyLimitMiddleware:
    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = Headers(scope=scope).get("content-length")
        if declared is not None and (not declared.strip().isdigit() or int(declared) > self.max_bytes):
            await self._refuse(scope, receive, send)
            return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return  # the client went away; nobody is left to answer
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                await self._refuse(scope, receive, send)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        await self.app(scope, _replay(b"".join(chunks), receive), send)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send) -> None:
        error = RequestEntityTooLargeException(
            f"The request body is larger than the {self.max_bytes} bytes this server accepts."
        )
        response = render_error(error, content_type=content_type_for_path(scope["path"]))
        # The unread rest of the body cannot be skipped on a kept-alive connection.
        response.headers["Connection"] = "close"
        await response(scope, receive, send)


def _replay(body: bytes, receive: Receive) -> Receive:
    """A receive() that yields the buffered body once, then defers to the real one (disconnects)."""
    delivered = False

    async def replayed() -> Message:
        nonlocal delivered
        if delivered:
            return await receive()
        delivered = True
        return {"type": "http.request", "body": body, "more_body": False}

    return replayed
