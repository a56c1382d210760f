"""What the runtime holds for the api's lifetime: the balancer, one HTTP client, the metrics."""

from __future__ import annotations

import logging
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
from prometheus_client import CollectorRegistry
from sqlalchemy.orm import Session, sessionmaker
from starlette.concurrency import run_in_threadpool

from api.runtime.capture import CaptureWriter, capture_line, should_capture
from api.runtime.capture_spool import CaptureSpool
from api.runtime.endpoint_metrics import EndpointMetrics
from api.runtime.instance_stats import EndpointStats, endpoint_stats
from api.runtime.invocation_log import Invocation
from api.runtime.targets import Balancer
from core.sagemaker.errors import AwsError
from db.queries.endpoint_capture import CaptureRow
from db.queries.endpoint_instance import serving_instance_urls

logger = logging.getLogger(__name__)


class RuntimeState:
    def __init__(
        self,
        session_factory: sessionmaker[Session],
        registry: CollectorRegistry,
        *,
        capture_spool_dir: Path,
        write_session_factory: sessionmaker[Session] | None = None,
    ) -> None:
        self._session_factory = session_factory
        self.balancer = Balancer(session_factory)
        self.captures = CaptureWriter(
            write_session_factory or session_factory, CaptureSpool(capture_spool_dir)
        )
        self.metrics = EndpointMetrics(registry)
        self._client: httpx.AsyncClient | None = None

    @property
    def client(self) -> httpx.AsyncClient:
        """Created on first use, inside the api's event loop; pooled connections to the instances."""
        if self._client is None:
            self._client = httpx.AsyncClient(limits=httpx.Limits(max_connections=256))
        return self._client

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    async def instance_stats(self, *, account_id: int | None = None) -> dict[str, EndpointStats]:
        """Live stats of the endpoints serving now (of one account, or all), by ARN."""

        def urls() -> list[tuple[str, str]]:
            with self._session_factory() as session:
                return serving_instance_urls(session, account_id=account_id)

        return await endpoint_stats(self.client, await run_in_threadpool(urls))

    async def refresh_metrics(self) -> None:
        """Before /metrics renders: the instance gauges of every endpoint serving now."""
        self.metrics.instance_gauges.snapshot = await self.instance_stats()

    def finished(
        self,
        invocation: Invocation,
        *,
        error: Exception | None = None,
        text: str | None = None,
        usage: dict[str, Any] | None = None,
    ) -> None:
        """Record an invocation that ended (``error`` set when it failed)."""
        code = "200" if error is None else (error.code if isinstance(error, AwsError) else "InternalFailure")
        usage = usage or {}
        self.metrics.observe(
            endpoint=invocation.target.endpoint_arn,
            code=code,
            seconds=time.perf_counter() - invocation.started,
            prompt_tokens=int(usage.get("prompt_tokens") or 0),
            output_tokens=int(usage.get("completion_tokens") or 0),
        )

    async def capture(self, invocation: Invocation, *, response_body: bytes) -> None:
        """Capture an answered invocation if its DataCaptureConfig samples it. Awaited before the
        response goes out: once the client has its answer, the captured line is on disk."""
        config = invocation.target.data_capture
        if config is None or not should_capture(config):
            return
        event_id = str(uuid.uuid4())
        line = capture_line(
            config,
            event_id=event_id,
            request_body=invocation.request_body,
            content_type=invocation.content_type,
            response_body=response_body,
        )
        row = CaptureRow(invocation.target.endpoint_id, event_id, line)
        try:
            await run_in_threadpool(self.captures.put, row)
        except OSError:
            # Capture is best effort, as on SageMaker: a full disk never fails an invocation.
            logger.exception("could not spool a captured invocation of %s", invocation.target.endpoint_arn)
