"""The explicit operation registry: ``@aws_operation("CreateModel", CreateModelInput)`` fills it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from sqlalchemy.orm import Session

from core.job_dispatcher import JobDispatcher
from core.principal import Principal
from core.sagemaker.service_model import sagemaker_service_model
from core.sagemaker.shapes.base import AwsRequest, AwsShape
from db.session import UnitOfWork
from db.settings import Settings

RequestT = TypeVar("RequestT", bound=AwsRequest)


@dataclass(frozen=True)
class OperationContext:
    """Everything a handler may use; one per request.

    ``unit`` is the request's unit of work: the dispatcher commits it after the handler
    returns (then runs its after-commit work), or rolls it back if the handler raises.
    A read-only handler's unit wraps an autocommit session and is never committed.
    """

    unit: UnitOfWork
    principal: Principal
    dispatcher: JobDispatcher
    settings: Settings

    @property
    def session(self) -> Session:
        return self.unit.session


Handler = Callable[[OperationContext, RequestT], AwsShape | None]


@dataclass(frozen=True)
class Operation:
    name: str
    request_model: type[AwsRequest]
    handler: Callable[[OperationContext, Any], AwsShape | None]
    # Read-only handlers get an autocommit session (no BEGIN/ROLLBACK round trips).
    read_only: bool = False


class OperationRegistry:
    def __init__(self) -> None:
        self._operations: dict[str, Operation] = {}

    def register(self, operation: Operation) -> None:
        if operation.name not in sagemaker_service_model().operation_names:
            raise ValueError(f"{operation.name} is not an operation of the committed SageMaker service model")
        if operation.name in self._operations:
            raise ValueError(f"operation {operation.name} is registered twice")
        expected_input = sagemaker_service_model().input_shape_name(operation.name)
        if operation.request_model.aws_shape != expected_input:
            raise ValueError(
                f"{operation.name} takes {expected_input}, not {operation.request_model.aws_shape}"
            )
        self._operations[operation.name] = operation

    def get(self, name: str) -> Operation | None:
        return self._operations.get(name)

    @property
    def names(self) -> list[str]:
        return sorted(self._operations)


REGISTRY = OperationRegistry()


def aws_operation(
    name: str, request_model: type[RequestT], *, read_only: bool = False
) -> Callable[[Handler[RequestT]], Handler[RequestT]]:
    """Register the decorated function as the handler of the AWS operation ``name``."""

    def decorate(handler: Handler[RequestT]) -> Handler[RequestT]:
        REGISTRY.register(
            Operation(name=name, request_model=request_model, handler=handler, read_only=read_only)
        )
        return handler

    return decorate
