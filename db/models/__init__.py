"""The SQLAlchemy tables, one module each.

Importing this package registers every table on ``Base.metadata`` (Alembic relies on it, and
SQLAlchemy resolves relationships named by string only among registered tables); any import of
one table's module runs it first.
"""

from db.base import Base
from db.models.access_key import AccessKey
from db.models.account import Account
from db.models.endpoint import Endpoint
from db.models.endpoint_capture import EndpointCapture
from db.models.endpoint_config import EndpointConfig
from db.models.endpoint_instance import EndpointInstance
from db.models.endpoint_status import EndpointStatus
from db.models.job_event import JobEvent
from db.models.log_event import LogEvent
from db.models.log_group import LogGroup
from db.models.log_stream import LogStream
from db.models.optimization_job import OptimizationJob
from db.models.optimization_job_status import OptimizationJobStatus
from db.models.resource_tag import ResourceTag
from db.models.role import Role
from db.models.sagemaker_model import SageMakerModel
from db.models.training_point import TrainingPoint

__all__ = [
    "AccessKey",
    "Account",
    "Base",
    "Endpoint",
    "EndpointCapture",
    "EndpointConfig",
    "EndpointInstance",
    "EndpointStatus",
    "JobEvent",
    "LogEvent",
    "LogGroup",
    "LogStream",
    "OptimizationJob",
    "OptimizationJobStatus",
    "ResourceTag",
    "Role",
    "SageMakerModel",
    "TrainingPoint",
]
