"""The FastAPI application: ``create_app(settings)`` and the module-level ``app`` uvicorn serves."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from importlib.metadata import PackageNotFoundError, version

from fastapi import FastAPI
from starlette.concurrency import run_in_threadpool

from api import aws_json_route
from api.body_limit import BodyLimitMiddleware
from api.dashboard.pages import include_dashboard
from api.error_responses import add_exception_handlers
from api.middleware import RequestContextMiddleware
from api.openapi import install_openapi
from api.rest import health, optimization_jobs, sagemaker_models
from api.runtime import routes as runtime_routes
from api.state import ApiState
from core.job_dispatcher import CeleryJobDispatcher, JobDispatcher
from db.queries.account import dev_access_key_exists, ensure_dev_access_key
from db.settings import Settings, get_settings

logger = logging.getLogger(__name__)


class DevKeyInProductionError(RuntimeError):
    """Production refuses to serve while the public test/test key can sign requests."""


def _package_version() -> str:
    try:
        return version("eaglenest")
    except PackageNotFoundError:
        return "0.0.0"


def prepare_database(state: ApiState) -> None:
    """Seed the dev key when asked, and refuse production while the dev key exists."""
    settings = state.settings
    with state.session_factory() as session:
        if settings.seed_dev_key:
            ensure_dev_access_key(session)
            session.commit()
        if (
            settings.environment == "production"
            and not settings.allow_dev_key
            and dev_access_key_exists(session)
        ):
            raise DevKeyInProductionError(
                "the development access key 'test' exists in the database; delete it "
                "(`eaglenest keys delete test`) or set EAGLENEST_ALLOW_DEV_KEY=true"
            )


def create_app(settings: Settings | None = None, *, dispatcher: JobDispatcher | None = None) -> FastAPI:
    """Build the api for ``settings`` (default: the environment's). ``dispatcher`` defaults to Celery."""
    settings = settings or get_settings()
    state = ApiState.build(settings, dispatcher or CeleryJobDispatcher())

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        prepare_database(state)
        # At once, not at the first capture: what a killed api left in the spool is stored now.
        state.runtime.captures.start()
        yield
        await run_in_threadpool(state.runtime.captures.close)
        await state.runtime.aclose()
        state.engine.dispose()

    app = FastAPI(
        title="eaglenest",
        version=_package_version(),
        summary="Self-hosted SageMaker optimization jobs that train EAGLE speculative-decoding heads.",
        description=(
            "The AWS JSON 1.1 control plane (`POST /`, for the AWS CLI and boto3) and the same "
            "operations as REST under `/v1`. Every request except /healthz and /metrics is signed "
            'with AWS Signature Version 4. Errors are `{"__type": <AWS code>, "message": ...}`.'
        ),
        lifespan=lifespan,
        # No /docs or /redoc: FastAPI's pages load Swagger UI and ReDoc from a CDN, which
        # fails offline and tells a third party who reads the docs, and their "Try it out"
        # cannot sign with SigV4 anyway. The spec stays at /openapi.json and in openapi.yaml.
        docs_url=None,
        redoc_url=None,
        # operationId = the route function's name (list_optimization_jobs, describe_model, ...).
        generate_unique_id_function=lambda route: route.name,
    )
    app.state.api = state
    install_openapi(app)
    add_exception_handlers(app)
    # add_middleware wraps what is already there: the request context stays outermost, so a
    # refused oversized body still gets a request id and is counted.
    app.add_middleware(BodyLimitMiddleware, max_bytes=settings.max_request_body_bytes)
    app.add_middleware(RequestContextMiddleware, metrics=state.metrics)
    app.include_router(aws_json_route.router)
    app.include_router(optimization_jobs.router)
    app.include_router(sagemaker_models.router)
    app.include_router(health.router)
    app.include_router(runtime_routes.router)
    include_dashboard(app)
    return app


app = create_app()
