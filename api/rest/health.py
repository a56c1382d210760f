"""/healthz (is the database reachable?) and /metrics (Prometheus); both unauthenticated."""

from __future__ import annotations

import logging

from fastapi import APIRouter
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel
from sqlalchemy import text
from sqlalchemy.exc import SQLAlchemyError
from starlette.concurrency import run_in_threadpool

from api.deps import ApiStateDep
from api.state import ApiState

logger = logging.getLogger(__name__)
router = APIRouter(tags=["operations"])


class Health(BaseModel):
    status: str
    detail: str | None = None


def _database_error(state: ApiState) -> str | None:
    try:
        with state.session_factory() as session:
            session.execute(text("SELECT 1"))
    except SQLAlchemyError as error:
        logger.warning("health check: database unreachable: %s", error)
        return f"database unreachable: {type(error).__name__}"
    return None


@router.get(
    "/healthz",
    response_model=Health,
    response_model_exclude_none=True,
    responses={503: {"model": Health, "description": "The database is unreachable."}},
)
async def healthz(state: ApiStateDep) -> Response:
    error = await run_in_threadpool(_database_error, state)
    if error is not None:
        return JSONResponse(Health(status="unavailable", detail=error).model_dump(exclude_none=True), 503)
    return JSONResponse({"status": "ok"})


@router.get("/metrics", response_class=Response, responses={200: {"content": {"text/plain": {}}}})
async def metrics(state: ApiStateDep) -> Response:
    await state.runtime.refresh_metrics()
    return Response(state.metrics.render(), media_type=state.metrics.content_type)
