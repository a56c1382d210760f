"""An endpoint configuration (CreateEndpointConfig): what an endpoint serves and how many instances."""

from __future__ import annotations

from typing import Any

from sqlalchemy import ForeignKey, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column, relationship

from db.base import Base, CreatedAtMixin, IdMixin
from db.models.account import Account
from db.types import JsonDocument


class EndpointConfig(IdMixin, CreatedAtMixin, Base):
    __tablename__ = "endpoint_configs"
    # Names are unique per account and region case-insensitively, as their lower-cased ARNs are.
    __table_args__ = (UniqueConstraint("account_id", "region", "name_key"),)

    account_id: Mapped[int] = mapped_column(ForeignKey("accounts.id", ondelete="CASCADE"), index=True)
    name: Mapped[str] = mapped_column(String(63))
    name_key: Mapped[str] = mapped_column(String(63))
    region: Mapped[str] = mapped_column(String(32))
    arn: Mapped[str] = mapped_column(String(2048))
    # DescribeEndpointConfig's members as the request gave them (PascalCase JSON), less the
    # name, ARN, time and tags: ProductionVariants, DataCaptureConfig, KmsKeyId, ...
    spec: Mapped[dict[str, Any]] = mapped_column(JsonDocument)

    account: Mapped[Account] = relationship(lazy="raise")
