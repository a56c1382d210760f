"""Shared FastAPI dependencies as ``Annotated`` aliases."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from functools import partial
from typing import Annotated
from urllib.parse import quote

from fastapi import Depends, Request
from sqlalchemy.orm import Session
from starlette.concurrency import run_in_threadpool

from api.auth.sigv4 import SignedRequest
from api.state import ApiState
from core.job_dispatcher import JobDispatcher
from core.principal import Principal
from db.session import UnitOfWork, unit_of_work
from db.settings import Settings

Transaction = Callable[[], AbstractContextManager[UnitOfWork]]


def get_api_state(request: Request) -> ApiState:
    state: ApiState = request.app.state.api
    return state


def signed_request_from(request: Request, body: bytes) -> SignedRequest:
    """The request as SigV4 sees it: the path exactly as sent (still %-encoded), raw headers."""
    raw_path: bytes | None = request.scope.get("raw_path")
    path = raw_path.split(b"?", 1)[0].decode("latin-1") if raw_path else quote(request.scope["path"])
    return SignedRequest(
        method=request.method,
        raw_path=path,
        raw_query=request.scope.get("query_string", b"").decode("latin-1"),
        headers=[
            (name.decode("latin-1").lower(), value.decode("latin-1")) for name, value in request.headers.raw
        ],
        body=body,
    )


async def authenticate(request: Request) -> Principal:
    """Verify the request's SigV4 signature (the same verifier as the AWS route)."""
    state = get_api_state(request)
    signed = signed_request_from(request, await request.body())
    return await run_in_threadpool(state.authenticator.authenticate, signed)


def get_transaction(request: Request) -> Transaction:
    """Opens the request's unit of work: ``with transaction() as unit:`` in a route that writes.

    The block commits when it ends (then runs the unit's after-commit work) and rolls back
    if it raises. Deliberately not a dependency with ``yield`` that commits after the yield:
    FastAPI runs that code only after the response has been sent (unless the dependency is
    declared with scope="function", FastAPI 0.121 and later), too late to commit what the
    response reports, or to answer an error when the commit fails.
    """
    return partial(unit_of_work, get_api_state(request).session_factory)


def get_read_session(request: Request) -> Iterator[Session]:
    """An autocommit session for routes that only read (see create_read_session_factory)."""
    with get_api_state(request).read_session_factory() as session:
        yield session


def get_dispatcher(request: Request) -> JobDispatcher:
    return get_api_state(request).dispatcher


def get_app_settings(request: Request) -> Settings:
    return get_api_state(request).settings


ApiStateDep = Annotated[ApiState, Depends(get_api_state)]
PrincipalDep = Annotated[Principal, Depends(authenticate)]
TransactionDep = Annotated[Transaction, Depends(get_transaction)]
ReadSessionDep = Annotated[Session, Depends(get_read_session)]
DispatcherDep = Annotated[JobDispatcher, Depends(get_dispatcher)]
SettingsDep = Annotated[Settings, Depends(get_app_settings)]
