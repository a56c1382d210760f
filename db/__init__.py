"""Persistence: SQLAlchemy tables (one module each) and keyword-only repository functions.

Importing the package registers every table on ``Base.metadata`` (Alembic relies on it).
"""

from db.access_key import AccessKey
from db.account import Account
from db.base import Base
from db.job_event import JobEvent
from db.optimization_job import OptimizationJob
from db.optimization_job_status import OptimizationJobStatus
from db.resource_tag import ResourceTag
from db.sagemaker_model import SageMakerModel
from db.training_point import TrainingPoint

__all__ = [
    "AccessKey",
    "Account",
    "Base",
    "JobEvent",
    "OptimizationJob",
    "OptimizationJobStatus",
    "ResourceTag",
    "SageMakerModel",
    "TrainingPoint",
]
