"""A SageMaker model (CreateModel): the container definition that points at weights on S3.

Named ``sagemaker_model`` so it is never confused with an ML model or an ORM model.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import ForeignKey, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column, relationship

from db.base import Base, IdMixin, TimestampMixin
from db.models.account import Account
from db.types import JsonDocument


class SageMakerModel(IdMixin, TimestampMixin, Base):
    __tablename__ = "sagemaker_models"
    # SageMaker lower-cases names in ARNs, so two names differing only in case would
    # share an ARN: uniqueness and look-ups go through the lower-cased ``name_key``.
    __table_args__ = (UniqueConstraint("account_id", "region", "name_key"),)

    account_id: Mapped[int] = mapped_column(ForeignKey("accounts.id", ondelete="CASCADE"), index=True)
    name: Mapped[str] = mapped_column(String(63))
    name_key: Mapped[str] = mapped_column(String(63))
    region: Mapped[str] = mapped_column(String(32))
    arn: Mapped[str] = mapped_column(String(2048))
    # The request's structures, stored exactly as the API echoes them (PascalCase JSON).
    primary_container: Mapped[dict[str, Any] | None] = mapped_column(JsonDocument)
    containers: Mapped[list[dict[str, Any]] | None] = mapped_column(JsonDocument)
    inference_execution_config: Mapped[dict[str, Any] | None] = mapped_column(JsonDocument)
    execution_role_arn: Mapped[str | None] = mapped_column(String(2048))
    vpc_config: Mapped[dict[str, Any] | None] = mapped_column(JsonDocument)
    enable_network_isolation: Mapped[bool | None]

    account: Mapped[Account] = relationship(lazy="raise")
