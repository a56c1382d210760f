"""A tag (Key/Value) on any resource, addressed by ARN as the AWS tagging APIs do."""

from __future__ import annotations

from sqlalchemy import ForeignKey, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from db.base import Base, IdMixin


class ResourceTag(IdMixin, Base):
    __tablename__ = "resource_tags"
    __table_args__ = (UniqueConstraint("resource_arn", "key"),)

    account_id: Mapped[int] = mapped_column(ForeignKey("accounts.id", ondelete="CASCADE"), index=True)
    resource_arn: Mapped[str] = mapped_column(String(2048))
    key: Mapped[str] = mapped_column(String(128))
    value: Mapped[str] = mapped_column(String(256))
