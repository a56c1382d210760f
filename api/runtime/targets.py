"""Which instances take an invocation: the endpoint's serving generation, in round-robin order."""

from __future__ import annotations

import itertools
import threading
from dataclasses import dataclass
from typing import Any

from sqlalchemy.orm import Session, sessionmaker

from core.principal import Principal
from core.sagemaker.runtime_errors import ServiceUnavailable, ValidationError
from db.models.endpoint_status import SERVING_STATUSES
from db.queries.endpoint import get_endpoint_by_name
from db.queries.endpoint_instance import serving_urls


@dataclass(frozen=True)
class Target:
    endpoint_id: int
    endpoint_arn: str
    endpoint_name: str
    variant_name: str
    # In the order to try them: the first is this request's turn, the rest its fallbacks.
    urls: list[str]
    data_capture: dict[str, Any] | None


class Balancer:
    """Round robin per endpoint over the instances that serve now (the supervisor's rows)."""

    def __init__(self, session_factory: sessionmaker[Session]) -> None:
        self._session_factory = session_factory
        self._turns: dict[int, itertools.count[int]] = {}
        self._lock = threading.Lock()

    def target(self, principal: Principal, name: str) -> Target:
        with self._session_factory() as session:
            endpoint = get_endpoint_by_name(
                session, account_id=principal.account_id, region=principal.region, name=name
            )
            if endpoint is None:
                raise ValidationError(f"Endpoint {name} of account {principal.aws_account_id} not found.")
            if endpoint.status not in SERVING_STATUSES:
                raise ValidationError(
                    f"Endpoint {endpoint.name} of account {principal.aws_account_id} is not in service "
                    f"(EndpointStatus {endpoint.status.value})."
                )
            urls = serving_urls(session, endpoint_id=endpoint.id, generation=endpoint.generation)
            variant = endpoint.config_spec["ProductionVariants"][0]
            capture = endpoint.config_spec.get("DataCaptureConfig")
            endpoint_id, endpoint_arn = endpoint.id, endpoint.arn
        if not urls:
            raise ServiceUnavailable(f"No instance of endpoint {name} is serving right now; retry shortly.")
        with self._lock:
            turn = next(self._turns.setdefault(endpoint_id, itertools.count()))
        start = turn % len(urls)
        return Target(
            endpoint_id=endpoint_id,
            endpoint_arn=endpoint_arn,
            endpoint_name=name,
            variant_name=str(variant["VariantName"]),
            urls=urls[start:] + urls[:start],
            data_capture=capture,
        )
